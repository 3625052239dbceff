"""What the loop's state says about the plan in progress, read the same way with or without a
``PlanManager``: what is still running, whether any plan exists, which steps failed for good, and
how far the plan got. The planner's phases decide with these; none of them calls a model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from soothe_planner.dag import latest_results
from soothe_planner.models import AgentDecision, LoopState

if TYPE_CHECKING:
    from soothe_planner.dag import PlanManager

__all__ = ["direct_failures", "has_plan", "plan_progress", "running_decision"]


def running_decision(state: LoopState, pm: PlanManager | None) -> AgentDecision | None:
    """The decision still running: the manager's unfinished steps, or the state's current batch."""
    if pm is not None:
        return pm.in_flight_decision()
    if state.current_decision is None:
        return None
    done = {r.step_id for r in state.step_results}
    unfinished = [s for s in state.current_decision.steps if s.id not in done]
    return state.current_decision if unfinished else None


def has_plan(state: LoopState, pm: PlanManager | None) -> bool:
    return bool(pm is not None and pm.nodes) or state.current_decision is not None or state.previous_plan is not None


def direct_failures(state: LoopState, pm: PlanManager | None) -> list[str]:
    """Steps of the last decision that failed for good (not blocked, not waiting for a retry)."""
    if state.iteration < 1 or state.current_decision is None:
        return []
    last = {s.id for s in state.current_decision.steps}
    ids = [r.step_id for r in latest_results(state.step_results)
           if r.step_id in last and not r.success and r.error_type != "blocked"]
    if pm is not None:
        ids = [i for i in ids if i in pm and pm.node(i).status == "failed"]
    return ids


def plan_progress(state: LoopState, pm: PlanManager | None) -> float:
    """The share of the plan's steps that completed: the progress of an assessment that did not say."""
    if pm is not None:
        return pm.progress()
    steps = state.current_decision.steps if state.current_decision is not None else []
    ok = {r.step_id for r in latest_results(state.step_results) if r.success}
    return sum(s.id in ok for s in steps) / len(steps) if steps else 0.0
