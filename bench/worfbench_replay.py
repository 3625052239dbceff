"""Which saved WorFBench answers still stand for the code checked out now, so only the rest needs the model?

A change to the planner usually alters what it does on a few items; planning all 110 again on a
2-core machine takes hours. A **replay** runs an item's run again under the code checked out now,
answering each model call with the reply the model gave in the saved run (its text, or its tool
calls), in order. Each request the code makes is reduced to a digest of everything the model is
sent (``request_digest``: the messages, the tools bound, the grammar, the output cap, the
temperature and seed). The replay stands for a model run of this code when this code makes the
same requests as the code that made the saved run: as many calls, in the same phases, with the same
digests. The model, given the same request, is given exactly what it was given then; what this
code reads from its replies (the rows) is this code's answer, at the saved calls' cost. An item
whose requests differ anywhere — a new rule re-asks, a prompt changed, a reply is read differently
and so re-asked — is planned by the model again, whole.

The saved run's requests are found the same way: ``--digests`` replays a part file under the code
that made it (check out that commit), checks the replay gives back every saved answer, and writes
the digests beside it (``<part>.digests.json``); a run it does not give back is left without
digests and is always planned again. The digests say what was asked, not who answered: a saved
run is read only when its provenance names the model file this run loads (same sha256), and a
part planned by another model is refused, naming both.

What was weighed: comparing prompts alone would miss a changed plan schema or grammar, so the
digest covers the whole request; a replay whose code read a reply differently but asked nothing
new needs no model call, which is the point (a label change costs nothing to measure). A replayed
run is marked in its record (``replayed_from``), and its calls are the saved ones, tokens and
seconds as measured then. Greedy decoding gives one reply per request on one server build and
setting; a run planned again may still flip a near-tie, as any new run may.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import PrivateAttr

from bench import _common
from bench.worfbench_calls import CallRecorder
from bench.worfbench_files import RunKey, read_run
from bench.worfbench_tools import capabilities_of
from bench.worfbench_variants import as_dicts, planner_run, two_shot_run
from soothe_planner.testing import FunctionChatModel, ScriptedCall

__all__ = ["Replay", "ReplayDiverged", "ReplayModel", "Reusable", "code_commit", "digests_of_part", "replay_model",
           "replay_run", "request_digest", "reusable_runs", "try_replay"]

TOOLS_KEY = "replay_tools"


class ReplayDiverged(RuntimeError):
    """Raised into the code under replay once its requests leave the saved run's.

    The planner may take it for a failed call and try again; every later call raises it too, and
    the replay keeps the first departure (``Replay.diverged``), so nothing asked after it counts.
    """


def request_digest(messages: Sequence[BaseMessage], *, tools: Any = None, grammar: Any = None,
                   max_tokens: Any = None, temperature: Any = None, seed: Any = None) -> str:
    """A digest of one request: everything that decides the model's reply."""
    payload = {
        "messages": [{"type": m.type, "content": m.content, "tool_calls": getattr(m, "tool_calls", None) or []}
                     for m in messages],
        "tools": tools or [], "grammar": grammar, "max_tokens": max_tokens, "temperature": temperature,
        "seed": seed,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:20]


@dataclass
class Replay:
    """The saved calls of one run, answered in order, and the digests of the requests met."""

    calls: list[dict[str, Any]]
    digests: list[str] = field(default_factory=list)
    diverged: str = ""

    def answer(self, call: ScriptedCall, digest: str) -> AIMessage:
        i = len(self.digests)
        self.digests.append(digest)
        if self.diverged:
            self._leave(self.diverged)
        if i >= len(self.calls):
            self._leave(f"call {i + 1} was asked; the saved run made {len(self.calls)}")
        saved = self.calls[i]
        phase = str(call.metadata.get("soothe_phase") or "")
        if saved["phase"] != phase:
            self._leave(f"call {i + 1} is {phase or 'unnamed'}; the saved run's was {saved['phase'] or 'unnamed'}")
        if saved.get("error"):
            self._leave(f"call {i + 1} failed in the saved run ({str(saved['error'])[:80]})")
        try:
            return saved_reply(saved, call, i)
        except ReplayDiverged as exc:
            self._leave(str(exc))
            raise

    def _leave(self, why: str) -> None:
        self.diverged = self.diverged or why  # the first departure; a caller that retries adds nothing
        raise ReplayDiverged(self.diverged)

    @property
    def whole(self) -> bool:
        """Every saved call was asked, and nothing else."""
        return not self.diverged and len(self.digests) == len(self.calls)


def saved_reply(saved: dict[str, Any], call: ScriptedCall, index: int) -> AIMessage:
    """The reply a saved call record holds, as the message the model returned."""
    calls = saved.get("tool_calls") or []
    if not calls:
        return AIMessage(content=str(saved.get("text") or ""))
    name = call.tools[0] if call.tools else (call.schema_name or "")
    if not name or not all(isinstance(a, dict) for a in calls):
        raise ReplayDiverged(f"call {index + 1}: its saved tool calls cannot be given back to this request")
    text = str(saved.get("text") or "")
    content = "" if text == json.dumps(calls) else text  # the recorder writes the calls as text when there is none
    return AIMessage(content=content, tool_calls=[{"name": name, "args": a, "id": f"replay-{index}-{j}"}
                                                  for j, a in enumerate(calls)])


class ReplayModel(FunctionChatModel):
    """A chat model answering from a ``Replay``, with the fields the planner reads or sets on the
    model it was given (temperature, seed, output cap, request body), all part of each digest."""

    temperature: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    extra_body: dict[str, Any] | None = None
    _replay: Replay = PrivateAttr()

    def __init__(self, replay: Replay, **kwargs: Any) -> None:
        super().__init__(_unused, **kwargs)
        self._replay = replay

    def _record(self, messages: list[BaseMessage], run_manager: Any, kwargs: dict[str, Any]) -> ScriptedCall:
        call = super()._record(messages, run_manager, kwargs)
        call.metadata[TOOLS_KEY] = kwargs.get("tools") or []
        return call

    def _next_reply(self, call: ScriptedCall) -> AIMessage:
        body = self.extra_body or {}
        digest = request_digest(call.messages, tools=call.metadata.get(TOOLS_KEY), grammar=body.get("grammar"),
                                max_tokens=body.get("max_tokens", self.max_tokens), temperature=self.temperature,
                                seed=self.seed)
        return self._replay.answer(call, digest)


def _unused(call: ScriptedCall) -> Any:  # ``_next_reply`` is overridden; a replay never calls this
    raise AssertionError("a replay answers through its Replay")


def replay_model(like: Any, replay: Replay) -> ReplayModel:
    """A ``ReplayModel`` declaring what ``like`` (the run's own model) declares: its metadata (prompt
    profile, grammar, small-model rules), temperature, seed, output cap and request body."""
    return ReplayModel(
        replay, metadata=dict(getattr(like, "metadata", None) or {}), temperature=getattr(like, "temperature", None),
        seed=getattr(like, "seed", None), max_tokens=getattr(like, "max_tokens", None),
        extra_body=dict(getattr(like, "extra_body", None) or {}) or None,
    )


# --------------------------------------------------------------------------- replaying a run


async def replay_run(run: str, item: dict[str, Any], saved: dict[str, Any], settings: Any, like: Any,
                     ) -> tuple[tuple[dict[str, Any], dict[str, Any]] | None, Replay]:
    """``run`` of ``item`` under the code checked out now, answered from ``saved`` (that run's saved
    record): its record and rows when every saved call was asked and nothing else, else None; and
    the replay (its digests, where it left the saved run)."""
    replay = Replay(list(saved["calls"]))
    model = replay_model(like, replay)
    recorder = CallRecorder()
    model.callbacks = [recorder]
    capabilities = capabilities_of(item)
    try:
        if run == "two-shot":
            record, answers = await two_shot_run(model, item, recorder, capabilities)
        else:
            record, answers = await planner_run(model, settings, run, item, capabilities, recorder)
    except ReplayDiverged:
        return None, replay
    if not replay.whole:
        return None, replay
    return ({**record, "calls": list(saved["calls"])}, as_dicts(answers)), replay


def code_commit() -> str:
    """The commit of the ``soothe_planner`` package imported (``+dirty`` when it differs from it):
    the code whose requests a digest file holds, wherever the harness itself was imported from."""
    import subprocess

    import soothe_planner

    where = str(Path(soothe_planner.__file__).resolve().parent)

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", where, *args], capture_output=True, text=True, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "HEAD") or "unknown"
    return commit + ("+dirty" if git("status", "--porcelain", "--", ".") else "")


async def digests_of_part(name: str, key: RunKey, items: dict[str, dict[str, Any]], settings: Any,
                          like: Any, *, config_files: Sequence[Path] = ()) -> dict[str, Any]:
    """The request digests of part file ``name``'s runs, replayed under the code checked out now
    (the code that made them): written beside it as ``<name>.digests.json`` (its ``code``: the
    planner's commit; its provenance: the harness's) and returned. A run
    whose replay does not give back its saved rows exactly gets a reason instead of digests."""
    data = read_run(_common.RESULTS_DIR / f"{name}.json", key)
    out: dict[str, dict[str, Any]] = {}
    for item_id, saved in data["runs"].items():
        item = items[item_id]
        out[item_id] = {}
        for run, record in saved["runs"].items():
            got, replay = await replay_run(run, item, record, settings, like)
            if got is None:
                out[item_id][run] = {"not_reproduced": replay.diverged or "the replay asked fewer calls"}
                continue
            rows = {k: v for k, v in saved["answers"].items() if k in got[1]}
            if rows != got[1]:
                wrong = sorted(k for k in got[1] if rows.get(k) != got[1][k])
                out[item_id][run] = {"not_reproduced": f"rows read differently: {', '.join(wrong)}"}
                continue
            out[item_id][run] = {"digests": replay.digests}
    payload = {"part": name, "code": code_commit(), "runs": out}
    _common.write_results(f"{name}.digests", payload, config_files=config_files)
    return payload


@dataclass
class Reusable:
    """Saved runs that a replay may stand in for: item id -> run -> (saved record, its digests)."""

    source: str
    runs: dict[str, dict[str, tuple[dict[str, Any], list[str]]]] = field(default_factory=dict)
    replayed: int = 0
    planned: int = 0

    def of(self, item_id: str, run: str) -> tuple[dict[str, Any], list[str]] | None:
        return self.runs.get(item_id, {}).get(run)


def reusable_runs(stem: str, key: RunKey, model_digest: str | None) -> Reusable:
    """Every run of the part files ``<stem>.part-*.json`` that has digests beside it; refused when a
    part was planned by another model file than ``model_digest`` (the sha256 of the one this run loads;
    ``None``: a scripted model), since its replies would then stand in for another model's."""
    found = Reusable(stem)
    parts = sorted(p for p in _common.RESULTS_DIR.glob(f"{stem}.part-*-of-*.json") if not p.name.endswith(".digests.json"))
    if not parts:
        raise SystemExit(f"--replay-from: no part file {stem}.part-K-of-N.json in {_common.RESULTS_DIR.name}/")
    for path in parts:
        data = read_run(path, key)
        theirs = (data.get("provenance") or {}).get("model_digest")
        if theirs != model_digest:
            raise SystemExit(
                f"--replay-from: {path.name} was planned by model file {_short(theirs)}, this run loads "
                f"{_short(model_digest)}: a replay stands in only for the same model's replies"
            )
        side = path.with_name(path.stem + ".digests.json")
        digests = json.loads(side.read_text())["runs"] if side.exists() else {}
        for item_id, saved in data["runs"].items():
            for run, record in saved["runs"].items():
                d = digests.get(item_id, {}).get(run, {}).get("digests")
                if d is not None:
                    found.runs.setdefault(item_id, {})[run] = (record, d)
    return found


def _short(digest: str | None) -> str:
    return f"sha256 {digest[:12]}" if digest else "none (a scripted model)"


async def try_replay(reuse: Reusable | None, run: str, item: dict[str, Any], settings: Any, like: Any,
                     ) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``run`` of ``item`` from a saved run when this code asks it exactly what the saved run's code
    asked (see the module docstring); None when the model must plan it."""
    if reuse is None:
        return None
    saved = reuse.of(str(item["id"]), run)
    if saved is None:
        reuse.planned += 1
        return None
    got, replay = await replay_run(run, item, saved[0], settings, like)
    if got is None or replay.digests != saved[1]:
        reuse.planned += 1
        return None
    reuse.replayed += 1
    record, rows = got
    return {**record, "replayed_from": reuse.source}, rows
