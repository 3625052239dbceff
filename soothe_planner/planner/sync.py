"""How does a script or a notebook call the planner without event-loop plumbing?

Every public async method of ``LLMPlanner`` has a sync twin with the same arguments and the
suffix ``_sync`` (``plan_sync``, ``create_plan_sync``, ...). Each runs its async form on the
package's sync bridge (``concurrency.run_sync``: one background event loop per process), so it
works in a plain script, in a notebook cell whose own loop is running, and from worker threads,
and the provider's async clients stay on one loop across calls.

Weighed: making ``LLMPlanner`` a ``Runnable`` would give ``invoke``/``ainvoke``, but a planner has
nine operations with different arguments, not one input; a twin per method keeps each one's
signature, types and docstring. The twins live in this mixin so ``llm_planner.py`` holds only
planning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

from soothe_planner.concurrency import run_sync
from soothe_planner.protocols import LoopPlannerProtocol, PlannerProtocol

if TYPE_CHECKING:
    from soothe_planner.dag import PlanManager
    from soothe_planner.deliverable import Deliverable
    from soothe_planner.models import (
        ContinuationAssessment,
        IntakeRoute,
        LoopState,
        Plan,
        PlanContext,
        PlanResult,
        Reflection,
        StatusAssessment,
        StepResult,
    )

__all__ = ["SyncPlannerMethods"]


class _AsyncPlanner(LoopPlannerProtocol, PlannerProtocol, Protocol):
    """What the twins run: both protocols' methods, and the declaration of a deliverable."""

    async def declare_deliverable(self, goal: str, context: PlanContext) -> Deliverable:
        """What ``goal`` must hand back, as the model declares it."""
        ...


def _planner(mixin: SyncPlannerMethods) -> _AsyncPlanner:
    return cast(_AsyncPlanner, mixin)  # the mixin is only ever a base of a planner with these methods


class SyncPlannerMethods:
    """The ``_sync`` twins of ``LLMPlanner``'s async methods (see the module docstring)."""

    def plan_sync(
        self, goal: str, state: LoopState, context: PlanContext, plan_manager: PlanManager | None = None
    ) -> PlanResult:
        """``plan``, synchronously: both phases, phase 2 only when phase 1 did not say done."""
        return run_sync(_planner(self).plan(goal, state, context, plan_manager))

    def assess_status_sync(
        self, goal: str, state: LoopState, context: PlanContext, plan_manager: PlanManager | None = None
    ) -> StatusAssessment:
        """``assess_status``, synchronously (phase 1)."""
        return run_sync(_planner(self).assess_status(goal, state, context, plan_manager))

    def generate_from_assessment_sync(
        self,
        goal: str,
        state: LoopState,
        context: PlanContext,
        assessment: StatusAssessment,
        plan_manager: PlanManager | None = None,
    ) -> PlanResult:
        """``generate_from_assessment``, synchronously (phase 2)."""
        return run_sync(_planner(self).generate_from_assessment(goal, state, context, assessment, plan_manager))

    def assess_continuation_sync(
        self, goal: str, prior_completed_goals: list[str], context: PlanContext
    ) -> ContinuationAssessment:
        """``assess_continuation``, synchronously."""
        return run_sync(_planner(self).assess_continuation(goal, prior_completed_goals, context))

    def route_intake_sync(self, goal: str, context: PlanContext) -> tuple[IntakeRoute, str]:
        """``route_intake``, synchronously."""
        return run_sync(_planner(self).route_intake(goal, context))

    def declare_deliverable_sync(self, goal: str, context: PlanContext) -> Deliverable:
        """``declare_deliverable``, synchronously."""
        return run_sync(_planner(self).declare_deliverable(goal, context))

    def answer_sync(self, goal: str, context: PlanContext, evidence: str = "") -> str:
        """``answer``, synchronously."""
        return run_sync(_planner(self).answer(goal, context, evidence))

    def create_plan_sync(self, goal: str, context: PlanContext) -> Plan:
        """``create_plan``, synchronously."""
        return run_sync(_planner(self).create_plan(goal, context))

    def revise_plan_sync(
        self, plan: Plan, reflection: Reflection, thread_id: str | None = None
    ) -> Plan:
        """``revise_plan``, synchronously."""
        return run_sync(_planner(self).revise_plan(plan, reflection, thread_id))

    def reflect_sync(
        self, plan: Plan, step_results: list[StepResult], goal_context: str | None = None
    ) -> Reflection:
        """``reflect``, synchronously."""
        return run_sync(_planner(self).reflect(plan, step_results, goal_context))
