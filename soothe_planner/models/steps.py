"""A plan's steps and what running one returns: ``StepAction``, ``AgentDecision``, ``PlanStep``,
``StepResult`` and the whole ``Plan``.

A step's id and the ids it depends on keep the one id rule; the strings a model or a tool wrote
are cleaned as the model is built (``base.py``).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from soothe_planner.concurrency import ConcurrencyPolicy
from soothe_planner.models.base import (
    FINISHED_STATUSES,
    DataModel,
    ExecutionHint,
    ExecutionMode,
    StepStatus,
    TextModel,
    check_step_id,
    execution_mode_of,
)

__all__ = [
    "AgentDecision",
    "Plan",
    "PlanStep",
    "StepAction",
    "StepResult",
]

class _StepIds(TextModel):
    """A step: its id and the ids it depends on keep the one id rule."""

    @field_validator("id", check_fields=False)
    @classmethod
    def _id_rule(cls, value: str) -> str:
        return check_step_id(value)

    @field_validator("depends_on", check_fields=False)
    @classmethod
    def _dependency_rule(cls, value: list[str]) -> list[str]:
        for dep in value:
            check_step_id(dep, "dependency")
        return value


class StepResult(TextModel):
    """What running one step produced. The single result type used everywhere."""

    step_id: str
    success: bool
    output: str = ""
    error: str | None = None
    error_type: str | None = Field(
        default=None,
        description="A short machine-readable kind: tool_error, timeout, policy_denied, blocked, ...",
    )
    outcome: dict[str, Any] = Field(default_factory=dict, description="Structured output, if any.")
    duration_ms: float = 0.0
    thread_id: str | None = None
    attempt: int = 1


class StepAction(_StepIds):
    """One step of a decision, as the planner hands it to the executor."""

    id: str
    description: str
    tools: list[str] = Field(default_factory=list)
    subagent: str | None = None
    expected_output: str = ""
    depends_on: list[str] = Field(default_factory=list)
    execution_hint: ExecutionHint = "auto"
    tool: str | None = Field(
        default=None,
        description="A typed tool step: the one tool this step calls, with ``args``, and no LLM call.",
    )
    args: dict[str, Any] = Field(
        default_factory=dict,
        description="The typed tool step's arguments; a string may hold references such as {{s1.output}}.",
    )


class AgentDecision(TextModel):
    """A batch of steps to execute (or a final answer), with how to schedule them."""

    type: Literal["execute_steps", "final"] = "execute_steps"
    steps: list[StepAction] = Field(default_factory=list)
    execution_mode: ExecutionMode = "dependency"
    reasoning: str = ""

    @field_validator("execution_mode", mode="before")
    @classmethod
    def _legacy_mode(cls, value: Any) -> Any:
        return execution_mode_of(value)

    @model_validator(mode="after")
    def _steps_for_execute(self) -> AgentDecision:
        if self.type == "execute_steps" and not self.steps:
            raise ValueError("an execute_steps decision needs at least one step")
        return self


class PlanStep(_StepIds):
    """A node of the goal-wide DAG: a step plus its runtime state."""

    id: str
    description: str
    execution_hint: ExecutionHint = "auto"
    status: StepStatus = "pending"
    result: StepResult | None = None
    depends_on: list[str] = Field(default_factory=list)
    tools: list[str] = Field(default_factory=list)
    subagent: str | None = None
    expected_output: str = ""
    attempts: int = 0
    iteration: int = Field(default=0, description="The loop iteration whose decision added this step.")
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED_STATUSES

    def to_action(self) -> StepAction:
        return StepAction(
            id=self.id,
            description=self.description,
            tools=list(self.tools),
            subagent=self.subagent,
            expected_output=self.expected_output,
            depends_on=list(self.depends_on),
            execution_hint=self.execution_hint,
            tool=self.tool,
            args=dict(self.args),
        )


class Plan(DataModel):
    """A whole plan for a goal (the ``PlannerProtocol`` view)."""

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12])
    goal: str
    steps: list[PlanStep] = Field(default_factory=list)
    status: Literal["active", "completed", "failed", "revised"] = "active"
    concurrency: ConcurrencyPolicy = Field(default_factory=ConcurrencyPolicy)
    is_plan_only: bool = False
    reasoning: str = ""
    revision: int = 0

    def step(self, step_id: str) -> PlanStep:
        for s in self.steps:
            if s.id == step_id:
                return s
        raise KeyError(f"plan {self.id!r} has no step {step_id!r}")
