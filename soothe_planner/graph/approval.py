"""How is a plan approved, frozen, and checked again before it runs?

The gate is one LangGraph node that calls ``interrupt()`` with the validated plan, a readable
rendering and the plan's SHA-256. LangGraph reruns an interrupted node from its start on resume,
so the node does nothing before ``interrupt()`` but pure computation: no model call, no step, no
event — the planner ran in earlier nodes whose results are already checkpointed, and nothing is
repeated when the human answers.

Sealing: the decision's canonical JSON (sorted keys, no whitespace, UTF-8) is hashed with SHA-256.
On approval the hash and the plan are stored in ``sealed_plan``; the execute node hashes the
decision it is about to run and refuses on any mismatch, so a plan edited after approval (by a
node, a tool, or a hand-edited checkpoint) cannot run under the old approval. The sealed plan is
handed to execution as data, never as instructions. On rejection the human's feedback goes back to
the planner (``approval_feedback`` and working memory) and the graph asks for a revised plan.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

__all__ = ["ApprovalReply", "canonical_json", "parse_reply", "render_decision", "seal_digest"]


def canonical_json(value: Any) -> str:
    """One byte-exact JSON text per value: sorted keys, no whitespace, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def seal_digest(decision: Mapping[str, Any]) -> str:
    """The SHA-256 (hex) of a decision's canonical JSON."""
    return hashlib.sha256(canonical_json(dict(decision)).encode("utf-8")).hexdigest()


def _uses(step: Mapping[str, Any]) -> str:
    # What the human approves: a typed step's tool *with its args* (a write shows what it writes).
    if step.get("tool"):
        args = json.dumps(step.get("args") or {}, ensure_ascii=False, default=str)
        return f"{step['tool']} {args if len(args) <= 200 else args[:199] + '…'}"
    if step.get("tools") or step.get("subagent"):
        return ", ".join(step.get("tools") or []) or str(step["subagent"])
    return "agent, read-only tools" if step.get("execution_hint") == "agent" else "model step, no tools"


def render_decision(decision: Mapping[str, Any]) -> str:
    """A plan a human can read at a glance: one line per step, then a mermaid diagram."""
    steps = decision.get("steps") or []
    lines = [f"Plan ({decision.get('execution_mode', 'dependency')}, {len(steps)} steps)"]
    if decision.get("reasoning"):
        lines.append(f"Why: {decision['reasoning']}")
    for s in steps:
        uses = _uses(s)
        deps = f" after {', '.join(s['depends_on'])}" if s.get("depends_on") else ""
        lines.append(f"- {s['id']}: {s['description']} [{uses}]{deps}")
    lines += ["", "```mermaid", "graph TD"]
    for s in steps:
        label = str(s["description"]).replace('"', "'")
        if len(label) > 60:
            label = label[:59] + "…"
        lines.append(f'    {_node(s["id"])}["{s["id"]}: {label}"]')
    for s in steps:
        for dep in s.get("depends_on") or []:
            lines.append(f"    {_node(dep)} --> {_node(s['id'])}")
    lines.append("```")
    return "\n".join(lines)


def _node(step_id: str) -> str:
    # Mermaid node ids may not contain dots or dashes; step ids may.
    return "n_" + "".join(c if c.isalnum() or c == "_" else "_" for c in step_id)


class ApprovalReply:
    """A human's answer to the gate: approved, or rejected with feedback."""

    def __init__(self, approved: bool, feedback: str = "") -> None:
        self.approved = approved
        self.feedback = feedback


def parse_reply(reply: Any) -> ApprovalReply:
    """Read ``{"approved": bool, "feedback": str}`` (or a bare bool). Anything else is a rejection.

    An unreadable answer must never count as consent, so it rejects with feedback saying why.
    """
    if isinstance(reply, bool):
        return ApprovalReply(reply)
    if isinstance(reply, Mapping) and isinstance(reply.get("approved"), bool):
        feedback = reply.get("feedback") or ""
        return ApprovalReply(bool(reply["approved"]), str(feedback))
    return ApprovalReply(
        False, f"unreadable approval reply {reply!r}; resume with {{'approved': true}} or {{'approved': false, 'feedback': ...}}"
    )
