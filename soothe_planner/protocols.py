"""What a planner is, independent of how one is built.

Two lifecycles, two protocols. ``PlannerProtocol`` turns a goal into a whole ``Plan`` and revises
it after reflection. ``LoopPlannerProtocol`` is the Plan phase of the StrangeLoop: each iteration
it first asks the cheap question — is the goal done? — and pays for plan generation only when it
is not. This module imports the data model only, never an implementation, so that alternative
planners (and test doubles) can be written against it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from soothe_planner.models import (
    ContinuationAssessment,
    LoopState,
    Plan,
    PlanContext,
    PlanResult,
    Reflection,
    StatusAssessment,
    StepResult,
)

if TYPE_CHECKING:  # the manager is an optional collaborator, not part of the contract's imports
    from soothe_planner.dag.plan_manager import PlanManager

__all__ = ["LoopPlannerProtocol", "PlannerProtocol"]


@runtime_checkable
class PlannerProtocol(Protocol):
    """Goal decomposition: create, reflect on, and revise a whole plan."""

    async def create_plan(self, goal: str, context: PlanContext) -> Plan:
        """Decompose ``goal`` into a validated plan of steps with DAG dependencies."""
        ...

    async def revise_plan(self, plan: Plan, reflection: Reflection, thread_id: str | None = None) -> Plan:
        """A new revision of ``plan``; finished steps keep their ids, dependencies, statuses and results."""
        ...

    async def reflect(
        self, plan: Plan, step_results: list[StepResult], goal_context: str | None = None
    ) -> Reflection:
        """How the plan is going: completed vs failed, failures split into direct and blocked."""
        ...


@runtime_checkable
class LoopPlannerProtocol(Protocol):
    """The StrangeLoop's Plan phase: assess, then generate only when work remains."""

    async def assess_status(self, goal: str, state: LoopState, context: PlanContext) -> StatusAssessment:
        """Phase 1: a small structured call — done, continue, or replan."""
        ...

    async def generate_from_assessment(
        self,
        goal: str,
        state: LoopState,
        context: PlanContext,
        assessment: StatusAssessment,
        plan_manager: PlanManager | None = None,
    ) -> PlanResult:
        """Phase 2: the next decision (``new``), or ``keep`` when the in-flight plan stands."""
        ...

    async def plan(
        self, goal: str, state: LoopState, context: PlanContext, plan_manager: PlanManager | None = None
    ) -> PlanResult:
        """Both phases: phase 2 runs only when phase 1 did not say ``done``."""
        ...

    async def assess_continuation(
        self, goal: str, prior_completed_goals: list[str], context: PlanContext
    ) -> ContinuationAssessment:
        """For a follow-up on a thread: ``bootstrap`` (one step, then done) or ``plan_generate``."""
        ...
