"""How a planner is configured: ``PlannerSettings``, and the ``FailurePolicy`` a failed step meets."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from soothe_planner.models.base import CallKind, DataModel, check_step_id

__all__ = [
    "FailurePolicy",
    "PlanExample",
    "PlanExampleStep",
    "PlannerSettings",
]

_RETRY_RE = re.compile(r"^\s*retry\s*\(\s*(\d+)\s*\)\s*$")


class FailurePolicy(DataModel):
    """What happens to a failed step: ``block`` its dependents, or ``retry`` it n times first."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["block", "retry"] = "block"
    max_retries: int = Field(default=0, ge=0)

    @classmethod
    def parse(cls, value: str | FailurePolicy) -> FailurePolicy:
        """Read ``"block"``, ``"retry(n)"`` or a ``FailurePolicy``."""
        if isinstance(value, FailurePolicy):
            return value
        if value == "block":
            return cls(mode="block")
        m = _RETRY_RE.match(value)
        if m:
            return cls(mode="retry", max_retries=int(m.group(1)))
        raise ValueError(f"failure policy {value!r} is not 'block' or 'retry(n)'")

    def __str__(self) -> str:
        return "block" if self.mode == "block" else f"retry({self.max_retries})"


class PlanExampleStep(DataModel):
    """One step of a worked plan: what it does, the tool it calls (None: a model step), after which steps."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    description: str = Field(min_length=1)
    tool: str | None = None
    args: dict[str, Any] = Field(default_factory=dict)
    depends_on: list[str] = Field(default_factory=list)

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return check_step_id(value, "example step id")

    @model_validator(mode="after")
    def _args_need_a_tool(self) -> PlanExampleStep:
        if self.tool is None and self.args:
            raise ValueError(f"example step {self.id!r} has args but no tool: a model step takes no arguments")
        return self


class PlanExample(DataModel):
    """A worked plan for a goal like the ones the planner will get: shown in every plan prompt.

    Its steps depend only on steps written before them, so the example is a DAG in its written order.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    goal: str = Field(min_length=1)
    steps: list[PlanExampleStep] = Field(min_length=1)

    @model_validator(mode="after")
    def _a_dag_in_order(self) -> PlanExample:
        seen: set[str] = set()
        for step in self.steps:
            if step.id in seen:
                raise ValueError(f"example step id {step.id!r} appears twice in the example for {self.goal[:60]!r}")
            later = [d for d in step.depends_on if d not in seen]
            if later:
                raise ValueError(f"example step {step.id!r} depends on {later!r}: a step depends only on steps "
                                 "written before it in the example")
            seen.add(step.id)
        return self


class PlannerSettings(DataModel):
    """How ``LLMPlanner`` behaves. The YAML ``planner:`` section loads into this; defaults live here only."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_iterations: int = Field(default=10, ge=1, description="Loop iterations before the goal fails.")
    max_plan_steps: int = Field(default=8, ge=1, description="Steps one decision may hold; more is an error.")
    reject_done_at_iteration_zero: bool = Field(
        default=True, description="A 'done' at iteration 0 with no evidence becomes 'continue'."
    )
    replan_on_failure_without_assessment: bool = Field(
        default=True,
        description="A step of the last decision that failed for good means 'replan' with no assessment call.",
    )
    structured_output_method: Literal["auto", "json_schema", "function_calling", "json_mode"] = Field(
        default="auto",
        description="How a structured answer is asked for; 'auto' picks function_calling for a local or non-OpenAI "
        "server and json_schema on the OpenAI API.",
    )
    retries: int = Field(default=2, ge=0, description="Re-asks after a parse/validation failure.")
    transport_retries: int = Field(default=2, ge=0, description="Retries of timeouts, rate limits, 5xx.")
    transport_backoff_s: float = Field(default=0.5, ge=0, description="First wait before a transport retry, seconds "
                                       "(doubled each retry, with jitter).")
    call_timeout_s: float = Field(default=120.0, gt=0, description="Per-call timeout, seconds.")
    small_model_rules: bool | None = Field(
        default=None,
        description="The rules that exist because a small model is weak (planner/small_model/): stricter plan "
        "rules, grounded answers, the prescribed write, the plan grammar's owed write; None: on when the model "
        "declares them (the embedded model does), off for every other model.",
    )
    reask_temperature: float | None = Field(
        default=None, ge=0.0, le=2.0,
        description="Sampling temperature of a re-ask after a plan was refused for its content (a greedy model "
        "repeats itself); None: 0.7 with the small-model rules, else the model's own.",
    )
    require_grounded_answer: bool | None = Field(
        default=None,
        description="A 'done' whose answer states a number, path, e-mail or URL that no tool returned "
        "becomes 'replan' (None: as small_model_rules).",
    )
    declare_deliverable: bool | None = Field(
        default=None,
        description="When the caller gave no deliverable and a tool can write or count, one small call asks the "
        "model what the goal must hand back (an answer, a file, a count) before the first plan; None: as "
        "small_model_rules.",
    )
    on_failure: Literal["raise", "degraded"] = Field(
        default="raise", description="After every attempt failed: raise PlanGenerationError, or degrade."
    )
    llm_reflection: bool = Field(default=False, description="Ask the model to reflect (default: deterministic).")
    prompt_budget_tokens: int = Field(default=6000, ge=500, description="Prompt size cap, in tokens (approx.).")
    max_output_tokens: int = Field(default=1024, ge=64, description="Output token cap of each planner call.")
    max_output_tokens_per_call: dict[CallKind, Annotated[int, Field(ge=16)]] = Field(
        default_factory=dict,
        description="Output token cap for one kind of call (e.g. {answer: 300}); other kinds keep the model's.",
    )
    prompt_profile: Literal["auto", "full", "compact"] = Field(
        default="auto",
        description="Prompt wording and tool schemas: 'compact' (fewer tokens, for small local models) or "
        "'full'; 'auto' takes the model's own declaration (the embedded model declares 'compact'), else 'full'.",
    )
    examples: list[PlanExample] = Field(
        default_factory=list,
        description="Worked plans for goals like yours (goal, steps), shown after the built-in example in every "
        "plan prompt, in the plan syntax of the call: they teach a model your goals' steps and their wording.",
    )
    examples_as: Literal["briefing", "turns"] = Field(
        default="briefing",
        description="Where the examples go: at the end of the plan briefing (the system prompt), or as turns "
        "of a conversation before the request, each goal asked and its plan answered.",
    )
    plan_syntax: Literal["auto", "json", "calls"] = Field(
        default="auto",
        description="How the loop's plans are written: 'json', or 'calls' (one Python call per step, about half the "
        "tokens; compact profile only); 'auto' takes the model's declaration under the compact profile (the "
        "embedded model declares 'calls'), else 'json'.",
    )
