"""How is a plan going, judged from facts rather than asked of a model?

Reflection is deterministic by default: which steps completed, which failed, and — the part a
reviser needs most — which failures are *direct* (the step itself went wrong) and which are
*blocked* (it never ran, or was skipped, because something it depends on failed). Revising a
blocked step is pointless; revising what blocked it is the fix. An LLM reflection is an option of
the planner layered on top of these facts; it never replaces them.

Goal directives are recommendations to whoever manages goals, and only two are ever made here:

- ``complete`` when every step completed;
- ``fail`` when nothing can make progress: a plan that has already been revised at least once,
  with no step left to run and not one step completed. Revising again would repeat a plan that has
  achieved nothing, so ``should_revise`` is false in that case. Anything short of that is a
  ``should_revise`` (when a direct failure exists) and the goal stays open.
"""

from __future__ import annotations

from collections.abc import Sequence

from soothe_planner.dag import ancestors, latest_results
from soothe_planner.models import GoalDirective, Plan, PlanStep, Reflection, StepResult

__all__ = ["deterministic_reflection", "split_failures"]


def _latest_by_step(plan: Plan, step_results: Sequence[StepResult]) -> dict[str, StepResult]:
    # What the plan recorded, overlaid by the results given (they are newer).
    recorded = [s.result for s in plan.steps if s.result is not None]
    return {r.step_id: r for r in latest_results([*recorded, *step_results])}


def split_failures(plan: Plan, step_results: Sequence[StepResult]) -> tuple[list[str], list[str], list[str], list[str]]:
    """``(completed, direct, blocked, unfinished)`` step ids, in plan order (extra results last)."""
    latest = _latest_by_step(plan, step_results)
    steps: dict[str, PlanStep] = {s.id: s for s in plan.steps}
    order = [s.id for s in plan.steps] + [sid for sid in latest if sid not in steps]
    failed: set[str] = set()
    completed: list[str] = []
    unfinished: list[str] = []
    for sid in order:
        r = latest.get(sid)
        status = steps[sid].status if sid in steps else None
        if r is not None and r.success:
            completed.append(sid)
        elif (r is not None and not r.success) or status in ("failed", "skipped"):
            failed.add(sid)
        else:
            unfinished.append(sid)

    blocked_memo: dict[str, bool] = {}

    def is_blocked(sid: str, trail: frozenset[str] = frozenset()) -> bool:
        if sid in blocked_memo:
            return blocked_memo[sid]
        r = latest.get(sid)
        step = steps.get(sid)
        verdict = (r is not None and r.error_type == "blocked") or (step is not None and step.status == "skipped")
        if not verdict and step is not None:
            # failed while a dependency had failed: the dependency is the cause
            verdict = any(d in failed and d not in trail for d in step.depends_on)
        blocked_memo[sid] = verdict
        return verdict

    direct = [sid for sid in order if sid in failed and not is_blocked(sid)]
    blocked = [sid for sid in order if sid in failed and is_blocked(sid)]
    return completed, direct, blocked, unfinished


def deterministic_reflection(plan: Plan, step_results: Sequence[StepResult]) -> Reflection:
    """The facts of a plan's run as a ``Reflection`` (see the module docstring for directives)."""
    latest = _latest_by_step(plan, step_results)
    completed, direct, blocked, unfinished = split_failures(plan, step_results)
    total = len(completed) + len(direct) + len(blocked) + len(unfinished)
    details = {sid: (latest[sid].error or latest[sid].output or "failed") if sid in latest else "failed" for sid in direct}

    parts = [f"{len(completed)} of {total} steps completed"]
    if direct:
        parts.append(f"{len(direct)} failed directly ({', '.join(direct)})")
    if blocked:
        parts.append(f"{len(blocked)} blocked by a failed dependency ({', '.join(blocked)})")
    if unfinished:
        parts.append(f"{len(unfinished)} not finished")
    assessment = "; ".join(parts)

    directives: list[GoalDirective] = []
    exhausted = not unfinished and not completed and bool(direct) and plan.revision >= 1
    if total and len(completed) == total:
        directives.append(GoalDirective(action="complete", goal_id=plan.id, rationale="every step completed"))
    elif exhausted:
        directives.append(
            GoalDirective(
                action="fail",
                goal_id=plan.id,
                rationale=f"revision {plan.revision} completed no step and has nothing left to run",
            )
        )

    feedback_lines = []
    depends_on = {s.id: s.depends_on for s in plan.steps}
    fed_by = {b: ancestors(depends_on, b) for b in blocked}  # one walk a blocked step, not one per failure
    for sid in direct:
        dependents = [b for b in blocked if sid in fed_by[b]]
        line = f"step {sid!r} failed: {details[sid]}"
        if dependents:
            line += f"; it blocked {', '.join(dependents)}"
        feedback_lines.append(line)
    if direct and not exhausted:
        feedback_lines.append("Replace or route around the failed steps; blocked steps need no change of their own.")
    return Reflection(
        assessment=assessment,
        should_revise=bool(direct) and not exhausted,
        feedback="\n".join(feedback_lines),
        blocked_steps=blocked,
        failed_details=details,
        goal_directives=directives,
    )
