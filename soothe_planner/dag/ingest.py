"""How is a decision worked out against the goal's DAG before anything changes?

``PlanManager.ingest`` and ``validate`` both start here: a step id naming a node that can no longer
change gets a fresh ``<id>.<n>`` and the decision's references follow it; a typed read that repeats
a finished step's exact call is read as that step; after a replan the pending nodes the decision
does not list are superseded; and the whole result is checked (``validation.validate_steps``).
All of it lands in a ``Prepared``, which the manager applies only when it holds no error (see
``plan_manager.py`` for what was weighed). What an applied ingest did is an ``IngestReport``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Container, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from soothe_planner.dag.step_refs import rename_references
from soothe_planner.dag.validation import validate_steps
from soothe_planner.models import AgentDecision, Capability, PlanStep, StepAction

__all__ = ["IngestReport", "PlanRevision", "Prepared", "call_key", "follow_renames", "fresh_id", "prepare", "repeats"]

ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]")
MAX_ID = 32


class IngestReport(BaseModel):
    """What one ``ingest`` did to the DAG."""

    model_config = ConfigDict(extra="forbid")

    added: list[str] = Field(default_factory=list)
    refreshed: list[str] = Field(default_factory=list)
    renamed: dict[str, str] = Field(default_factory=dict, description="given id -> id in the DAG")
    superseded: list[str] = Field(default_factory=list)
    reused: dict[str, str] = Field(
        default_factory=dict, description="given id -> the finished step whose exact call it repeated"
    )

    @property
    def empty(self) -> bool:
        return not (self.added or self.refreshed or self.superseded)


class PlanRevision(IngestReport):
    """One entry of the plan history: what one ingest did, at which iteration, and why."""

    iteration: int = 0
    action: Literal["extend", "replace"] = "extend"
    reasoning: str = ""


@dataclass
class Prepared:
    """An ingest worked out but not applied: its validation errors, or everything applying it needs."""

    errors: list[str] = field(default_factory=list)
    steps: list[StepAction] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    superseded: list[str] = field(default_factory=list)
    reused: dict[str, str] = field(default_factory=dict)


def call_key(tool: str, args: Mapping[str, Any]) -> str:
    """One string per tool call: the same tool with the same arguments (in any key order) is the same."""
    return tool + "\0" + json.dumps(args, sort_keys=True, default=str)


def fresh_id(given: str, counters: dict[str, int], taken: set[str], existing: Container[str]) -> str:
    """A new id for ``given`` (``<id>.<n>``, at most ``MAX_ID`` characters), in neither ``taken`` nor ``existing``."""
    base = ID_CHARS.sub("_", given)
    head, dot, tail = base.rpartition(".")
    # An id this manager made ("s1.2") renames to the next of its family ("s1.3"), not "s1.2.2".
    if dot and tail.isdigit() and head in counters and int(tail) < counters[head]:
        base = head
    n = counters.get(base, 2)
    while True:
        suffix = f".{n}"
        candidate = base[: MAX_ID - len(suffix)] + suffix
        n += 1
        if candidate not in taken and candidate not in existing:
            counters[base] = n
            taken.add(candidate)
            return candidate

def follow_renames(step: StepAction, renamed: Mapping[str, str], batch: Collection[str]) -> StepAction:
    """``step`` with its id, dependencies (once each) and the references in its args and description
    following ``renamed`` (given id -> the id to use; ``batch``: the ids as given)."""
    return step.model_copy(
        update={
            "id": renamed.get(step.id, step.id),
            "depends_on": list(dict.fromkeys(renamed.get(d, d) for d in step.depends_on)),
            "args": rename_references(step.args, renamed, batch),
            # a model step's description may point at an output the same way its args would
            "description": rename_references({"d": step.description}, renamed, batch)["d"],
        }
    )


def prepare(
    decision: AgentDecision,
    replace: bool,
    nodes: Mapping[str, PlanStep],
    counters: Mapping[str, int],
    *,
    max_steps: int,
    allowed: Collection[str] | None,
    known: Mapping[str, Capability],
    capabilities: Mapping[str, Capability] | None,
) -> Prepared:
    """``decision`` worked out against the DAG's ``nodes``: renames, repeats, what it supersedes, its errors.

    ``known`` are the manager's capabilities (which tools only read); ``capabilities`` the ones the
    typed steps are checked against; ``counters`` are copied, never changed.
    """
    prep = Prepared()
    prep.counters = dict(counters)
    prep.reused = repeats(decision.steps, nodes, known)
    kept = [s for s in decision.steps if s.id not in prep.reused]
    if not kept:
        shown = ", ".join(f"{sid} (= finished step {old})" for sid, old in prep.reused.items())
        prep.errors = [f"every step repeats a finished one: {shown}; their outputs are in the results, "
                       "so plan only what remains, depending on them"]
        return prep
    given = [s.id for s in kept]
    # Fresh ids avoid the decision's own ids; ids of the graph are checked in fresh_id.
    taken = set(given)
    for sid in dict.fromkeys(given):
        node = nodes.get(sid)
        if node is not None and node.status != "pending":
            prep.renamed[sid] = fresh_id(sid, prep.counters, taken, nodes)
    # a repeated step is the finished one: what depends on it depends on that
    ren = {**{k: v for k, v in prep.reused.items() if k != v}, **prep.renamed}
    given_ids = frozenset(s.id for s in decision.steps)
    prep.steps = [
        follow_renames(s, ren, given_ids)
        if ren and (s.id in ren or any(d in ren for d in s.depends_on) or s.args or "{{" in s.description)
        else s
        for s in kept
    ]
    if replace:
        listed = {s.id for s in prep.steps}
        prep.superseded = [sid for sid, n in nodes.items() if n.status == "pending" and sid not in listed]
    prep.errors = validate_steps(
        prep.steps,
        existing=nodes,
        max_steps=max_steps,
        allowed_capabilities=allowed,
        superseded=set(prep.superseded),
        aliases={new: old for old, new in ren.items()},
        capabilities=capabilities,
    )
    return prep

def repeats(
    steps: Sequence[StepAction], nodes: Mapping[str, PlanStep], capabilities: Mapping[str, Capability]
) -> dict[str, str]:
    """New tool steps that make exactly the call of a completed step: given id -> that step's id.

    A model that re-plans often lists again what already ran (a small one, every iteration).
    Running it again would redo finished work for the same output; the repeat is read as the
    finished step instead, and its dependents wait on that. Only typed tool steps qualify: the
    same tool with the same arguments is the same work, while two model steps with the same
    words may be meant to differ (a second attempt at an answer). And only reads, while nothing
    of the goal has written yet: a read after a write may see other contents, and a tool not
    known to be read-only may change what the next call returns.
    """
    if not any(s.tool for s in steps):
        return {}

    def reads(tool: str) -> bool:
        cap = capabilities.get(tool)
        return cap is not None and cap.read_only

    finished = [n for n in nodes.values() if n.status == "completed" and n.tool]
    if any(not reads(n.tool) for n in finished if n.tool):
        return {}
    done: dict[str, str] = {}
    for node in finished:
        if node.tool:
            done.setdefault(call_key(node.tool, node.args), node.id)
    out: dict[str, str] = {}
    for s in steps:
        if s.tool:
            old = done.get(call_key(s.tool, s.args))
            if old is not None:
                out[s.id] = old
    return out
