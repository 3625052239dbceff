"""The runtime data model: what the program holds, checkpoints and returns.

These are not the shapes the LLM fills in (those live in ``wire.py``, trimmed and bounded): the
model never sees runtime-only fields such as statuses, results or concurrency. Coherence is
enforced here by validators, so an incoherent object cannot exist:

- ``PlanResult``: ``done`` ⇒ no decision; ``new`` ⇒ a decision with at least one step;
  ``keep`` ⇒ no decision (the in-flight one stands); ``degraded`` ⇒ never ``done``.
- progress and confidence are clamped into [0, 1]; they are estimates, not contracts.

Two rules hold on every path into these models, whoever builds them (the parser, a structured
answer, the typed API, a checkpoint):

- **One id rule.** A step id (and every dependency a step names) is 1 to 32 letters, digits,
  ``_``, ``.`` or ``-`` (``STEP_ID_PATTERN``; the wire schema advertises the same pattern). An id
  is printed into prompts, Mermaid diagrams and journal keys; an id that could hold ``<``, a
  quote or a newline could close a prompt fence or fake a line, so the rule is enforced here
  rather than escaped at every place that prints one.
- **Clean text.** A lone surrogate (``\ud800``: what a JSON ``"\ud800"`` escape, or a file name
  that is not UTF-8, decodes to) cannot be encoded as UTF-8, and the seal, the step journal and
  every provider request encode text. ``clean_text`` replaces each one with U+FFFD; the models
  that carry a model's or a tool's text (steps, decisions, results, assessments) clean their
  strings when they are built, so nothing downstream meets one. Valid text is left exactly as it
  is (a fast path: ASCII, then one encode attempt).

Everything here is plain pydantic v2 and round-trips through JSON, which is how it is stored in
LangGraph checkpoints.
"""

from __future__ import annotations

import re
import uuid
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from soothe_planner.concurrency import ConcurrencyPolicy
from soothe_planner.deliverable import Deliverable

__all__ = [
    "LEGACY_EXECUTION_MODES",
    "STEP_ID_PATTERN",
    "STEP_ID_RULE",
    "AgentDecision",
    "CallKind",
    "Capability",
    "ContinuationAssessment",
    "ExecutionHint",
    "ExecutionMode",
    "FailurePolicy",
    "GoalDirective",
    "IntakeRoute",
    "LoopState",
    "Plan",
    "PlanContext",
    "PlanResult",
    "PlanStep",
    "PlannerSettings",
    "Reflection",
    "StatusAssessment",
    "StepAction",
    "StepResult",
    "StepStatus",
    "check_step_id",
    "clean_text",
    "clean_value",
    "execution_mode_of",
    "is_step_id",
]

StepStatus = Literal["pending", "in_progress", "completed", "failed", "skipped"]
ExecutionHint = Literal["tool", "subagent", "remote", "auto", "agent"]
"""How a step asks to run; ``agent``: a ReAct agent, for a step whose arguments cannot be known when planning."""
ExecutionMode = Literal["sequential", "dependency"]
"""How a decision's steps are scheduled: ``dependency`` (each step once its own dependencies finished,
within the concurrency limits) or ``sequential`` (one at a time, in dependency order)."""
LEGACY_EXECUTION_MODES: dict[str, ExecutionMode] = {"parallel": "dependency"}
"""Names once offered that ran exactly as another mode: still read (old checkpoints, old replies), never offered."""
IntakeRoute = Literal["trivial", "simple", "complex"]
CallKind = Literal["intake", "plan-assess", "plan-generate", "continuation", "answer", "reflect", "revise"]
"""The planner's kinds of call, as named in traces; a kind's re-asks and raw fallback count as that kind."""
FINISHED_STATUSES: frozenset[str] = frozenset({"completed", "failed", "skipped"})

STEP_ID_PATTERN = r"^[A-Za-z0-9_.-]{1,32}$"
"""The one id rule (see the module docstring): the wire schema, the parser and these models share it."""
STEP_ID_RULE = "1 to 32 letters, digits, '_', '.' or '-'"
_STEP_ID_RE = re.compile(STEP_ID_PATTERN)
_SURROGATE_RE = re.compile("[\ud800-\udfff]")


def is_step_id(value: object) -> bool:
    """Whether ``value`` is a string that keeps the id rule."""
    return isinstance(value, str) and _STEP_ID_RE.fullmatch(value) is not None


def check_step_id(value: object, what: str = "step id") -> str:
    """``value`` if it keeps the id rule; else a ``ValueError`` naming the value and the rule."""
    if not is_step_id(value):
        raise ValueError(f"{what} {value!r} breaks the id rule: {STEP_ID_RULE}")
    return str(value)


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD (valid text comes back unchanged)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE_RE.sub("\ufffd", text)
    return text


def clean_value(value: Any) -> Any:
    """``value`` with ``clean_text`` applied to every string in it, keys included, at any depth."""
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, dict):
        return {clean_value(k): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clean_value(v) for v in value)
    return value


def execution_mode_of(value: Any) -> Any:
    """``value`` with a legacy mode name read as the mode it always ran as; anything else is left as is."""
    if isinstance(value, str):
        return LEGACY_EXECUTION_MODES.get(value, value)
    return value


def _clamp01(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return min(1.0, max(0.0, float(value)))
    return value


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class _Text(_Model):
    """A model that carries a model's or a tool's text: its strings are cleaned as it is built."""

    @model_validator(mode="before")
    @classmethod
    def _clean(cls, data: Any) -> Any:
        return clean_value(data) if isinstance(data, dict) else data


# --------------------------------------------------------------------------- steps and results


class _StepIds(_Text):
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


class StepResult(_Text):
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


class AgentDecision(_Text):
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


class Plan(_Model):
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


# --------------------------------------------------------------------------- planner context


class Capability(_Model):
    """Something a step may use: a tool, a subagent or a remote graph."""

    name: str
    kind: Literal["tool", "subagent", "remote"] = "tool"
    description: str = ""
    read_only: bool = False
    args_schema: dict[str, Any] | None = Field(
        default=None,
        description="A tool's argument schema (JSON Schema), so a typed tool step's args can be checked at ingest.",
    )
    writes_path_arg: str | None = Field(
        default=None,
        description="The argument naming the workspace file this tool writes (its metadata 'writes_path_arg'), "
        "so the deliverable's checks see its writes.",
    )
    counts: bool = Field(
        default=False,
        description="The tool counts (its metadata 'counts'): its result's 'count' field is a number it counted.",
    )


class PlanContext(_Model):
    """What the planner may know besides the goal. Every field is optional."""

    recent_messages: list[str] = Field(default_factory=list)
    available_capabilities: list[Capability] = Field(default_factory=list)
    completed_steps: dict[str, str] = Field(default_factory=dict, description="step id -> result summary")
    workspace: str | None = None
    working_memory_excerpt: str = ""
    intake: IntakeRoute | None = None
    thread_id: str | None = None

    @field_validator("available_capabilities", mode="before")
    @classmethod
    def _names_are_tools(cls, value: Any) -> Any:
        # A bare name is accepted as a tool for convenience; it is a typed API, not model output.
        if isinstance(value, list):
            return [{"name": v, "kind": "tool"} if isinstance(v, str) else v for v in value]
        return value

    def capability_names(self) -> set[str]:
        return {c.name for c in self.available_capabilities}


# --------------------------------------------------------------------------- reflection


class GoalDirective(_Model):
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


class Reflection(_Text):
    """How a plan is going, and whether it should be revised."""

    assessment: str
    should_revise: bool
    feedback: str = ""
    blocked_steps: list[str] = Field(default_factory=list, description="failed only because a dependency failed")
    failed_details: dict[str, str] = Field(default_factory=dict, description="step id -> error, direct failures")
    goal_directives: list[GoalDirective] = Field(default_factory=list)


# --------------------------------------------------------------------------- loop planning


class StatusAssessment(_Text):
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
        return _clamp01(value)

    @model_validator(mode="after")
    def _degraded_is_never_done(self) -> StatusAssessment:
        if self.degraded and self.status == "done":
            raise ValueError("a degraded assessment can never be 'done'")
        return self


class PlanResult(_Text):
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
        return _clamp01(value)

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


class ContinuationAssessment(_Text):
    """For a follow-up turn on a thread: one bootstrap step, or full plan generation."""

    action: Literal["bootstrap", "plan_generate"]
    reasoning: str = ""
    goal_progress: float = Field(default=0.0, ge=0.0, le=1.0)

    @field_validator("goal_progress", mode="before")
    @classmethod
    def _clamp(cls, value: Any) -> Any:
        return _clamp01(value)


class LoopState(_Model):
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


# --------------------------------------------------------------------------- settings

_RETRY_RE = re.compile(r"^\s*retry\s*\(\s*(\d+)\s*\)\s*$")


class FailurePolicy(_Model):
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


class PlannerSettings(_Model):
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
    plan_syntax: Literal["auto", "json", "calls"] = Field(
        default="auto",
        description="How the loop's plans are written: 'json', or 'calls' (one Python call per step, about half the "
        "tokens; compact profile only); 'auto' takes the model's declaration under the compact profile (the "
        "embedded model declares 'calls'), else 'json'.",
    )
