"""What the loop planner reads and answers: reflection, the two phases' assessments, ``PlanResult``
and the ``LoopState`` it reads a run from.

``PlanResult`` is coherent by construction (``done`` ⇒ no decision, ``new`` ⇒ a decision with a
step, ``keep`` ⇒ none, ``degraded`` ⇒ never ``done``); progress and confidence are clamped into
[0, 1].
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from soothe_planner.deliverable import Deliverable
from soothe_planner.models.base import DataModel, IntakeRoute, TextModel, clamp01
from soothe_planner.models.steps import AgentDecision, Plan, StepResult

__all__ = [
    "ContinuationAssessment",
    "GoalDirective",
    "LoopState",
    "PlanResult",
    "Reflection",
    "StatusAssessment",
]

# --------------------------------------------------------------------------- reflection


class GoalDirective(DataModel):
    """A recommended change to the goal set, from reflection."""

    action: Literal["create", "adjust_priority", "add_dependency", "decompose", "fail", "complete"]
    goal_id: str | None = None
    description: str = ""
    priority: int = Field(default=50, ge=0, le=100)
    parent_id: str | None = None
    depends_on: list[str] = Field(default_factory=list)
    rationale: str = ""

    @model_validator(mode="after")
    def _needs_target(self) -> GoalDirective:
        if self.action == "create" and not self.description:
            raise ValueError("a 'create' directive needs a description")
        if self.action != "create" and not self.goal_id:
            raise ValueError(f"a {self.action!r} directive needs a goal_id")
        return self


class Reflection(TextModel):
    """How a plan is going, and whether it should be revised."""

    assessment: str
    should_revise: bool
    feedback: str = ""
    blocked_steps: list[str] = Field(default_factory=list, description="failed only because a dependency failed")
    failed_details: dict[str, str] = Field(default_factory=dict, description="step id -> error, direct failures")
    goal_directives: list[GoalDirective] = Field(default_factory=list)


# --------------------------------------------------------------------------- loop planning


class StatusAssessment(TextModel):
    """Phase 1: is the goal done, and if not, does the in-flight plan still stand?"""

    status: Literal["continue", "replan", "done"]
    goal_progress: float = Field(default=0.0, ge=0.0, le=1.0)
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    require_goal_completion: bool = False
    summary: str = ""
    degraded: bool = False

    @field_validator("goal_progress", "confidence", mode="before")
    @classmethod
    def _clamp(cls, value: Any) -> Any:
        return clamp01(value)

    @model_validator(mode="after")
    def _degraded_is_never_done(self) -> StatusAssessment:
        if self.degraded and self.status == "done":
            raise ValueError("a degraded assessment can never be 'done'")
        return self


class PlanResult(TextModel):
    """What one ``plan()`` returns: the status, and the decision to execute next, if any."""

    status: Literal["continue", "replan", "done"]
    plan_action: Literal["keep", "new"] = "keep"
    decision: AgentDecision | None = None
    goal_progress: float = Field(default=0.0, ge=0.0, le=1.0)
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)
    next_action: str = ""
    plan_reasoning: str = ""
    evidence_summary: str = ""
    full_output: str = ""
    require_goal_completion: bool = False
    terminal_after_execute: bool = False
    degraded: bool = False
    llm_calls: int = 0
    warnings: list[str] = Field(default_factory=list, description="What the lenient parser repaired.")
    deliverable: Deliverable | None = Field(
        default=None, description="The goal's deliverable, when this call declared it (the goal's first plan)."
    )

    @field_validator("goal_progress", "confidence", mode="before")
    @classmethod
    def _clamp(cls, value: Any) -> Any:
        return clamp01(value)

    @model_validator(mode="after")
    def _coherent(self) -> PlanResult:
        if self.status == "done" and self.decision is not None:
            raise ValueError("a 'done' result carries no decision")
        if self.degraded and self.status == "done":
            raise ValueError("a degraded result can never be 'done'")
        if self.plan_action == "new":
            if self.decision is None or not self.decision.steps:
                raise ValueError("plan_action 'new' needs a decision with at least one step")
        elif self.decision is not None:
            raise ValueError("plan_action 'keep' carries no decision: the in-flight one stands")
        return self


class ContinuationAssessment(TextModel):
    """For a follow-up turn on a thread: one bootstrap step, or full plan generation."""

    action: Literal["bootstrap", "plan_generate"]
    reasoning: str = ""
    goal_progress: float = Field(default=0.0, ge=0.0, le=1.0)

    @field_validator("goal_progress", mode="before")
    @classmethod
    def _clamp(cls, value: Any) -> Any:
        return clamp01(value)


class LoopState(DataModel):
    """Everything the loop planner reads about a run; checkpoint-serialisable."""

    goal: str
    thread_id: str = "default"
    iteration: int = Field(default=0, ge=0)
    max_iterations: int = Field(default=10, ge=1)
    current_decision: AgentDecision | None = None
    step_results: list[StepResult] = Field(default_factory=list)
    previous_plan: Plan | None = None
    previous_assessment: StatusAssessment | None = None
    action_history: list[str] = Field(default_factory=list)
    working_memory: str = ""
    intake: IntakeRoute | None = None
    continuation: bool = Field(default=False, description="Prior goals exist on this thread (structural, not a label).")
    prior_goals: list[str] = Field(default_factory=list)
    recent_messages: list[str] = Field(default_factory=list)
    deliverable: Deliverable | None = Field(
        default=None, description="What the goal must hand back, when known (a PlanManager's wins)."
    )
