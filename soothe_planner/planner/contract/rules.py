"""What must a plan hold, given what the goal must hand back? (every model, every profile)

The DAG validator (``dag/``) judges any plan's shape. These rules judge a plan against the goal's
deliverable (``soothe_planner.deliverable``) and the tools' declared data (``evidence``), never
against the goal's words, so they read the same for a goal in any language:

- ``writes_outside``: a step that writes a workspace file the deliverable does not name. A small
  model answering a question wrote its answer over the source file it had just read; a user
  asking "How do I save output to JSON?" wants an answer, not a file. The contract says which
  files a run may write; every other write is refused with the deliverable named.
- ``owed_writes``: a file the deliverable names that neither the plan nor a finished step of the
  goal writes. The rule is told with the write to add, so a re-ask can mend the plan.
- ``order_writes``: a plan's writes of one file run in the plan's order (chance otherwise decides
  which write a file keeps).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from soothe_planner.deliverable import Deliverable
from soothe_planner.models import AgentDecision, Capability, PlanStep, StepAction
from soothe_planner.planner.contract.evidence import path_key, write_target

__all__ = ["finished_writes", "order_writes", "owed_files", "owed_writes", "writer_names", "writes_outside"]


def writer_names(capabilities: Mapping[str, Capability] | None) -> list[str]:
    """The tools that declare the file they write (``Capability.writes_path_arg``)."""
    return sorted(n for n, c in (capabilities or {}).items() if c.writes_path_arg)


def finished_writes(nodes: Sequence[PlanStep], capabilities: Mapping[str, Capability] | None) -> set[str]:
    """The files completed steps of the goal wrote with something in them (a write of blank text
    made the file, not what the goal asked to be in it: ``outcome["blank"]``)."""
    out = set()
    for n in nodes:
        if n.status != "completed" or n.result is None or n.result.outcome.get("blank") is True:
            continue
        target = write_target(n, capabilities)
        if target:
            out.add(target)
    return out


def writes_outside(
    deliverable: Deliverable | None, decision: AgentDecision, capabilities: Mapping[str, Capability] | None
) -> list[str]:
    """A write of a file the deliverable does not name (none without a deliverable)."""
    if deliverable is None:
        return []
    problems = []
    for s in decision.steps:
        target = write_target(s, capabilities)
        if not target or target in deliverable.files:
            continue
        if deliverable.kind == "file":
            problems.append(f"step {s.id} writes {target!r}, but the goal's deliverable is {deliverable.describe()}: "
                            f"write only {', '.join(repr(f) for f in deliverable.files)}")
        else:
            problems.append(f"step {s.id} writes {target!r}, but the goal's deliverable is {deliverable.describe()}, "
                            "not a file: end the plan with an answer step and write no file")
    return problems


def owed_files(
    deliverable: Deliverable | None, decision: AgentDecision | None, nodes: Sequence[PlanStep],
    capabilities: Mapping[str, Capability] | None,
) -> list[str]:
    """The deliverable's files that no step of ``decision`` and no finished step of the goal writes."""
    if deliverable is None or deliverable.kind != "file" or not writer_names(capabilities):
        return []
    planned = {write_target(s, capabilities) for s in decision.steps} if decision is not None else set()
    done = finished_writes(nodes, capabilities)
    return [f for f in deliverable.files if f not in planned and f not in done]


def owed_writes(
    deliverable: Deliverable | None, decision: AgentDecision, nodes: Sequence[PlanStep],
    capabilities: Mapping[str, Capability] | None,
) -> list[str]:
    """Why a plan that leaves a deliverable file unwritten is refused, with the write that mends it."""
    missing = owed_files(deliverable, decision, nodes, capabilities)
    if not missing:
        return []
    writer = writer_names(capabilities)[0]
    arg = (capabilities or {})[writer].writes_path_arg
    source = _last_text(decision, capabilities)
    content = f"content={source}" if source else "content=..."
    return [f"the goal's deliverable is {deliverable.describe() if deliverable else ''}, and no step writes {name}: "
            f"end the plan with the write, for example {writer}({arg}=\"{name}\", {content})" for name in missing]


def _last_text(decision: AgentDecision, capabilities: Mapping[str, Capability] | None) -> str:
    """The id of the plan's last step that is not a write (what a write of the deliverable would carry)."""
    for s in reversed(decision.steps):
        if not write_target(s, capabilities):
            return s.id
    return ""


def order_writes(decision: AgentDecision, capabilities: Mapping[str, Capability] | None) -> AgentDecision:
    """``decision`` with each write of a file made to wait for the plan's earlier write of it.

    Two steps without an order between them run in either order, so which write a file keeps was
    chance. A plan is read as it is written, top to bottom: the later write is the one that stays.
    A dependency that would make a cycle is not added (a JSON plan may list a step before one it
    depends on).
    """
    last: dict[str, str] = {}
    steps = {s.id: s for s in decision.steps}
    added: dict[str, list[str]] = {}
    for s in decision.steps:
        key = path_key(write_target(s, capabilities))
        if not key:
            continue
        before = last.get(key)
        last[key] = s.id
        if before is None or before in s.depends_on or s.id in _upstream(before, steps, added):
            continue
        added.setdefault(s.id, []).append(before)
    if not added:
        return decision
    return decision.model_copy(update={"steps": [
        s.model_copy(update={"depends_on": [*s.depends_on, *added[s.id]]}) if s.id in added else s
        for s in decision.steps]})


def _upstream(step_id: str, steps: Mapping[str, StepAction], added: Mapping[str, list[str]]) -> set[str]:
    """The ids ``step_id`` waits for, directly or not (its own and ``added`` dependencies)."""
    seen: set[str] = set()
    todo = [step_id]
    while todo:
        s = steps.get(todo.pop())
        for d in [*(s.depends_on if s else []), *added.get(s.id if s else "", [])]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen
