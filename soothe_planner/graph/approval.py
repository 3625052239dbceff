"""How is a plan approved, frozen, and checked again before it runs?

The gate is one LangGraph node that calls ``interrupt()`` with the validated plan, a readable
rendering and the plan's SHA-256. LangGraph reruns an interrupted node from its start on resume,
so the node does nothing before ``interrupt()`` but pure computation: no model call, no step, no
event — the planner ran in earlier nodes whose results are already checkpointed, and nothing is
repeated when the human answers.

An approval names the plan it approves: ``{"approved": true, "sha256": <the pause's digest>}``.
On resume the node re-reads the state, so without the digest it would seal whatever plan the
state holds by then, which may not be the plan the human read. A digest that does not match the
plan awaiting approval, or an approval with no digest, is a refusal: recorded, and nothing runs.

The rendering is what the human reads, and every piece of it but the layout is untrusted text
(the model wrote the descriptions, the ids and the arguments): each step is one line, with line
breaks and other unprintable characters shown as escapes so a description cannot fake another
step; the Mermaid diagram names its nodes by position (``n0``, ``n1``), so ids such as ``s-1``
and ``s_1`` stay two nodes, and escapes the characters Mermaid reads; each step says how it runs
(a typed tool with its arguments, a tool whose arguments a model fills in, an agent, a subagent,
or a model step with no tools).

Sealing: the decision's canonical JSON (sorted keys, no whitespace, UTF-8) is digested — with
HMAC-SHA-256 under a key held outside the checkpoint when the graph is given one (a config's
graph always is: ``config.resolve_seal_key``), else with plain SHA-256. On approval the digest
and the plan are stored in ``sealed_plan``; the execute node digests the decision it is about to
run and refuses on any mismatch, so a plan changed after approval by a node or a tool cannot run
under the old approval. A plain digest cannot stop someone who can write the checkpoint: they
can change the plan and compute its new SHA-256. A keyed one can, as long as they cannot read
the key. The sealed plan is
handed to execution as data, never as instructions. On rejection the human's feedback goes back to
the planner (``approval_feedback`` and working memory) and the graph asks for a revised plan.

**The pause is LangGraph's human-in-the-loop request** (the Agent Inbox shape that Agent Chat UI
and Agent Inbox render, ``langgraph.prebuilt.interrupt.HumanInterrupt``): ``action_request``
``{"action": "run_plan", "args": {<the plan's fields>, "sha256": <digest>}}``, ``config`` allowing
accept, edit, respond and ignore, and the rendering as ``description``. The same payload keeps
``plan``, ``rendering`` and ``sha256`` at its top level for clients of the earlier shape. Replies
(``parse_reply``), each also as a list of one, which is how those tools resume:

- ``{"approved": true, "sha256": ...}`` / ``{"approved": false, "feedback": ...}`` — as before;
- ``{"type": "accept", "args": <the action request shown>}`` — consent to the plan its ``sha256``
  names; an accept naming no digest, or another plan's, is refused as a bare approval is;
- ``{"type": "edit", "args": {"action": ..., "args": {<plan fields>}}}`` — the human's own plan:
  checked as the planner's are (the decision's schema, then the plan manager's whole-batch
  validation with its step cap and tool allow-list), sealed under its own digest and run. An edit
  that does not validate runs nothing: the same plan is asked about again, with the errors;
- ``{"type": "response", "args": "<text>"}`` — feedback, as a rejection: the planner re-plans;
- ``{"type": "ignore"}`` — the run ends, failed as rejected; nothing runs.

Tolerated in an edit, because the tools edit every argument as text: a field the plan holds as a
list or an object (``steps``) may come back as that value's JSON text, and is read with
``json.loads``. Nothing else is guessed; an edit that still does not fit the schema is refused.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from soothe_planner.errors import ConfigError

__all__ = [
    "APPROVAL_ACTION",
    "SEAL_KEY_ENV",
    "ApprovalReply",
    "SealKey",
    "approval_request",
    "canonical_json",
    "edited_decision",
    "parse_reply",
    "render_decision",
    "seal_digest",
    "shown",
]

SEAL_KEY_ENV = "SOOTHE_SEAL_KEY"
"""The approval seal's key, when it is not kept in a key file."""
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class SealKey:
    """The seal's key: ``SOOTHE_SEAL_KEY``, else the file ``path`` (created 0600 on first use).

    Read when first needed, not when the graph is built: a graph whose runs never pause for
    approval never touches the file. Equal keys name the same file.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SealKey) and other.path == self.path

    def __hash__(self) -> int:
        return hash(self.path)

    def __repr__(self) -> str:
        return f"SealKey({str(self.path)!r})"

    def get(self) -> bytes:
        """The key; a ``ConfigError`` naming the file when it cannot be used."""
        from_env = os.environ.get(SEAL_KEY_ENV)
        if from_env:
            return from_env.encode("utf-8")
        with self._lock:
            if self._key is None:
                self._key = self._read()
            return self._key

    def _read(self) -> bytes:
        path = self.path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "w", encoding="ascii") as out:
                    out.write(secrets.token_hex(32))
            with os.fdopen(os.open(path, os.O_RDONLY | _NOFOLLOW), encoding="ascii") as handle:
                mode = os.fstat(handle.fileno()).st_mode
                if mode & 0o077:
                    raise ConfigError(
                        f"the approval seal's key file {str(path)!r} has mode {oct(mode & 0o777)}; others may "
                        f"read or change it, so it cannot key the seal: chmod 600 it (or set {SEAL_KEY_ENV})"
                    )
                key = handle.read().strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"the approval seal's key file {str(path)!r} cannot be used ({getattr(exc, 'strerror', None) or exc}); "
                f"set {SEAL_KEY_ENV} instead"
            ) from None
        if len(key) < 32:
            raise ConfigError(f"the approval seal's key file {str(path)!r} holds {len(key)} characters, fewer than 32")
        return key.encode("ascii")


def canonical_json(value: Any) -> str:
    """One byte-exact JSON text per value: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def seal_digest(decision: Mapping[str, Any], key: bytes | None = None) -> str:
    """The digest (hex) of a decision's canonical JSON: HMAC-SHA-256 under ``key``, else SHA-256."""
    data = canonical_json(dict(decision)).encode("utf-8")
    if key:
        return hmac.new(key, data, hashlib.sha256).hexdigest()
    return hashlib.sha256(data).hexdigest()


_ARGS_SHOWN = 200
_LABEL = 60
_MERMAID_ESCAPES = str.maketrans({ch: f"#{ord(ch)};" for ch in '#"[](){}<>|`;'})


def shown(value: Any) -> str:
    """Untrusted text on one line: every unprintable character (line breaks, tabs, bidi controls,
    line and paragraph separators) shown as its escape, so it cannot start a line of its own."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else json.dumps(c)[1:-1] for c in text)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _uses(step: Mapping[str, Any]) -> str:
    # How the step runs, as the executor decides it (execution/steps.py ``step_kind``): what the
    # human approves is a typed step's tool *with its args* (a write shows what it writes).
    tools = [shown(t) for t in step.get("tools") or []]
    if step.get("execution_hint") == "remote":
        return f"remote graph {shown(step.get('subagent') or ''.join(tools[:1]))}"
    if step.get("subagent"):
        return f"subagent {shown(step['subagent'])}"
    if step.get("execution_hint") == "agent":
        return f"agent over {', '.join(tools)}" if tools else "agent, read-only tools"
    if step.get("tool"):
        args = json.dumps(step.get("args") or {}, ensure_ascii=True, default=str)
        return f"{shown(step['tool'])} {_cut(args, _ARGS_SHOWN)}"
    if len(tools) > 1:
        return f"agent over {', '.join(tools)}"
    if tools:
        return f"{tools[0]}, arguments filled in by a model"
    return "model step, no tools"


def render_decision(decision: Mapping[str, Any]) -> str:
    """A plan a human can read at a glance: one line per step, then a mermaid diagram."""
    steps = decision.get("steps") or []
    lines = [f"Plan ({shown(decision.get('execution_mode', 'dependency'))}, {len(steps)} steps)"]
    if decision.get("reasoning"):
        lines.append(f"Why: {shown(decision['reasoning'])}")
    for s in steps:
        deps = f" after {', '.join(shown(d) for d in s['depends_on'])}" if s.get("depends_on") else ""
        lines.append(f"- {shown(s['id'])}: {shown(s['description'])} [{_uses(s)}]{deps}")
    lines += ["", "```mermaid", "graph TD"]
    # Nodes by position, never by a transformed id: two ids must never fold into one node.
    node = {str(s["id"]): f"n{i}" for i, s in enumerate(steps)}
    for s in steps:
        label = f"{shown(s['id'])}: {_cut(shown(s['description']), _LABEL)}".translate(_MERMAID_ESCAPES)
        lines.append(f'    {node[str(s["id"])]}["{label}"]')
    for s in steps:
        for dep in s.get("depends_on") or []:
            if str(dep) not in node:  # a step of an earlier decision, already in the goal's DAG
                node[str(dep)] = f"n{len(node)}"
                lines.append(f'    {node[str(dep)]}["{shown(dep).translate(_MERMAID_ESCAPES)}"]')
            lines.append(f"    {node[str(dep)]} --> {node[str(s['id'])]}")
    lines.append("```")
    return "\n".join(lines)


APPROVAL_ACTION = "run_plan"
"""The action a plan awaiting approval is shown as, in the human-in-the-loop request."""


def approval_request(
    decision: Mapping[str, Any], rendering: str, digest: str, note: str | None = None
) -> dict[str, Any]:
    """The interrupt's payload: a human-in-the-loop request for ``decision``, plus the earlier keys.

    ``note``: shown above the rendering (why an edit was not applied).
    """
    description = f"{note}\n\n{rendering}" if note else rendering
    return {
        "action_request": {"action": APPROVAL_ACTION, "args": {**decision, "sha256": digest}},
        "config": {"allow_accept": True, "allow_edit": True, "allow_respond": True, "allow_ignore": True},
        "description": description,
        "plan": dict(decision),
        "rendering": rendering,
        "sha256": digest,
    }


class ApprovalReply:
    """A human's answer to the gate: approved, or rejected with feedback; ``refused`` when an
    approval was given but could not be accepted (no digest, or another plan's digest); ``edit``
    the plan fields of an edit (to validate before anything runs); ``ignored`` when the run is to
    end as rejected."""

    def __init__(
        self,
        approved: bool,
        feedback: str = "",
        *,
        refused: bool = False,
        edit: Mapping[str, Any] | None = None,
        ignored: bool = False,
    ) -> None:
        self.approved = approved
        self.feedback = feedback
        self.refused = refused
        self.edit = edit
        self.ignored = ignored


_HUMAN_RESPONSE_TYPES = frozenset({"accept", "edit", "response", "ignore"})


def _human_response(reply: Any) -> Mapping[str, Any] | None:
    """``reply`` as a human-in-the-loop response (alone or a list of one), else ``None``."""
    if isinstance(reply, list) and len(reply) == 1:
        reply = reply[0]
    if isinstance(reply, Mapping) and reply.get("type") in _HUMAN_RESPONSE_TYPES and "approved" not in reply:
        return reply
    return None


def _action_args(args: Any) -> Mapping[str, Any] | None:
    """The plan fields of an action request (``{"action", "args"}``), or of bare args."""
    if isinstance(args, Mapping) and "action" in args and isinstance(args.get("args"), Mapping):
        return args["args"]
    return args if isinstance(args, Mapping) else None


def edited_decision(args: Mapping[str, Any]) -> dict[str, Any]:
    """The decision an edit's plan fields describe, before validation (see the module docstring).

    A ``steps`` value that is text is read as JSON (the one tolerance); the digest is dropped.
    Raises ``ValueError`` naming the field when that text is not JSON.
    """
    decision = {k: v for k, v in args.items() if k != "sha256"}
    for key, value in list(decision.items()):
        if key == "steps" and isinstance(value, str):
            try:
                decision[key] = json.loads(value)
            except ValueError as exc:
                raise ValueError(f"the edited {key!r} is not JSON ({exc})") from None
    return decision


def _parse_human_response(response: Mapping[str, Any], digest: str) -> ApprovalReply:
    kind, args = response.get("type"), response.get("args")
    if kind == "ignore":
        return ApprovalReply(False, "the reviewer ignored the plan", ignored=True)
    if kind == "response":
        return ApprovalReply(False, "" if args is None else str(args))
    if kind == "edit":
        fields = _action_args(args)
        if fields is None:
            return ApprovalReply(False, f"an edit must carry the edited action request; {_HOW_HITL}", refused=True)
        return ApprovalReply(False, edit=fields)
    fields = _action_args(args) or {}
    return _consent(fields.get("sha256"), digest)


_HOW = "resume with {'approved': true, 'sha256': <the digest shown with the plan>} or {'approved': false, 'feedback': ...}"
_HOW_HITL = "resume with {'type': 'accept', 'args': <the action request shown>}, or edit, response, ignore"


def _consent(named: Any, digest: str) -> ApprovalReply:
    """Approval of the plan ``named`` by its digest: consent only when it is the plan awaiting approval."""
    if named == digest:
        return ApprovalReply(True)
    if not isinstance(named, str) or not named:
        return ApprovalReply(False, f"the approval named no plan digest; {_HOW}", refused=True)
    return ApprovalReply(
        False,
        f"the approval names plan {shown(named)[:16]}…, but the plan awaiting approval is {digest[:16]}…: "
        "it changed after it was shown, so nothing ran; review the plan shown now",
        refused=True,
    )


def parse_reply(reply: Any, digest: str) -> ApprovalReply:
    """Read ``{"approved": true, "sha256": digest}`` or ``{"approved": false, "feedback": str}``.

    Or a human-in-the-loop response (accept, edit, response, ignore; see the module docstring).
    Only an approval naming ``digest`` — the plan awaiting approval — is consent. An approval with
    no digest or another one is refused, with feedback saying why; so is anything unreadable.
    """
    human = _human_response(reply)
    if human is not None:
        return _parse_human_response(human, digest)
    if isinstance(reply, Mapping) and reply.get("approved") is False:
        return ApprovalReply(False, str(reply.get("feedback") or ""))
    if isinstance(reply, Mapping) and reply.get("approved") is True:
        return _consent(reply.get("sha256"), digest)
    if reply is False:
        return ApprovalReply(False)
    return ApprovalReply(False, f"unreadable approval reply {shown(repr(reply))[:200]}; {_HOW}", refused=reply is True)
