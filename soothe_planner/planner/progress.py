"""What the run's steps say about the plan in progress, read the same way with or without a
``PlanManager`` (``run_steps.RunSteps`` has chosen the source): what is still running, whether any
plan exists, which steps failed for good, and how far the plan got. The planner's phases decide
with these; none of them calls a model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from soothe_planner.models import AgentDecision, LoopState

if TYPE_CHECKING:
    from soothe_planner.planner.run_steps import RunSteps

__all__ = ["direct_failures", "has_plan", "plan_progress", "running_decision"]


def running_decision(run: RunSteps) -> AgentDecision | None:
    """The decision still running: the manager's unfinished steps, or the current batch while one of
    its steps has no result."""
    if run.manager is not None:
        return run.manager.in_flight_decision()
    if run.decision is None:
        return None
    done = {r.step_id for r in run.results}
    unfinished = [s for s in run.decision.steps if s.id not in done]
    return run.decision if unfinished else None


def has_plan(state: LoopState, run: RunSteps) -> bool:
    """Whether any plan exists: the manager's nodes, the decision in flight, or a whole plan in ``state``."""
    return bool(run.manager is not None and run.manager.nodes) or run.decision is not None \
        or state.previous_plan is not None


def direct_failures(state: LoopState, run: RunSteps) -> list[str]:
    """Steps of the last decision that failed for good (not blocked, not waiting for a retry)."""
    if state.iteration < 1 or run.decision is None:
        return []
    last = {s.id for s in run.decision.steps}
    ids = [r.step_id for r in run.results if r.step_id in last and not r.success and r.error_type != "blocked"]
    pm = run.manager
    if pm is not None:
        ids = [i for i in ids if i in pm and pm.node(i).status == "failed"]
    return ids


def plan_progress(run: RunSteps) -> float:
    """The share of the plan's steps that completed: the progress of an assessment that did not say."""
    if run.manager is not None:
        return run.manager.progress()
    steps = run.steps
    ok = {r.step_id for r in run.results if r.success}
    return sum(s.id in ok for s in steps) / len(steps) if steps else 0.0
