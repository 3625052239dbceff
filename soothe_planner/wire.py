"""The small schemas the LLM fills in, and how they become runtime models.

Why separate classes: the model must never see runtime fields (statuses, results, concurrency),
and every token of schema is paid for on every call. These are trimmed to what the model decides,
with short descriptions, ``extra="forbid"``, and bounds on every list and string so that a small
model's output cannot run away (a grammar-constrained server ends the JSON when the bounds are
reached). Bounds are advertised in the JSON schema; text over a bound is truncated on validation,
never rejected — a long description is not worth a re-ask. A list over its bound *is* rejected:
a plan of fifty steps is a plan nobody asked for.

The class names are the tool names a provider shows the model, so they read as verbs.

A plan step is a *typed tool step* (``tool`` names one offered tool, ``args`` its arguments; run
with no model call), a *model step* (``tool`` null: one model call over its dependencies'
outputs) or a delegation (``subagent``). ``generation_model`` builds the plan schema for what is
offered: ``tool`` is an enum of the offered tool names (a grammar-constrained model cannot invent
one), ``subagent`` an enum of the offered subagents and absent when there are none. The step's
``tool``, ``args`` and ``depends_on`` are advertised as required, so a grammar makes the model
decide them on every step (``null``, ``{}`` and ``[]`` are answers), while validation still
accepts them missing: the answer may come from a provider that ignores the schema, and the
lenient reading downstream is the same. Two runtime fields are accepted but not advertised:
``tools`` (a step handed to an agent over those tools) and ``expected_output`` — the typed API
still speaks them, but every advertised field costs tokens on every call and a second way to name
a tool confuses a small model.
"""

from __future__ import annotations

from collections.abc import Collection
from functools import lru_cache
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    WithJsonSchema,
    create_model,
    field_validator,
    model_validator,
)
from pydantic.functional_validators import BeforeValidator
from pydantic.json_schema import SkipJsonSchema

from soothe_planner.models import (
    STEP_ID_PATTERN,
    AgentDecision,
    ContinuationAssessment,
    ExecutionHint,
    ExecutionMode,
    StatusAssessment,
    StepAction,
    _clamp01,
    clean_value,
    execution_mode_of,
)

__all__ = [
    "STEP_ID_PATTERN",
    "WIRE_MAX_STEPS",
    "AssessStatus",
    "ChooseContinuation",
    "CrossCheck",
    "DeclareDeliverable",
    "GeneratePlan",
    "PlanStepSpec",
    "ReflectOnPlan",
    "RouteIntake",
    "generation_model",
    "model_step_name",
    "to_continuation",
    "to_decision",
    "to_status_assessment",
]

WIRE_MAX_STEPS = 50
"""A hard ceiling on steps in one answer, whatever ``max_plan_steps`` says."""


def _truncate(limit: int) -> BeforeValidator:
    # Cleaned as well as cut: a lone surrogate in a model's JSON (``"\ud800"``) stops here.
    def cut(value: Any) -> Any:
        if isinstance(value, str):
            value = clean_value(value)
            if len(value) > limit:
                return value[: limit - 1] + "…"
        return value

    return BeforeValidator(cut)


def Text(limit: int) -> Any:
    """A string the model writes: advertised with ``maxLength``, truncated when longer."""
    return Annotated[str, _truncate(limit), WithJsonSchema({"type": "string", "maxLength": limit})]


StepId = Annotated[str, Field(pattern=STEP_ID_PATTERN)]
Fraction = Annotated[float, BeforeValidator(_clamp01), Field(ge=0.0, le=1.0)]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid")


Args = Annotated[dict[str, Any], BeforeValidator(clean_value), WithJsonSchema({"type": "object"})]
_ADVERTISED_REQUIRED = ["id", "description", "tool", "args", "depends_on"]


def _step_schema(schema: dict[str, Any]) -> None:
    schema["required"] = [name for name in _ADVERTISED_REQUIRED if name in schema.get("properties", {})]


class PlanStepSpec(_Wire):
    """One step."""

    model_config = ConfigDict(extra="forbid", json_schema_extra=_step_schema)

    id: StepId
    # Required by the full schema (``_step_schema``); a typed step of the compact shape has none and
    # the parser derives it from the call (``parsing.plan_steps.derived_description``).
    description: Text(300) = Field(default="", description="What this step does for the goal")  # type: ignore[valid-type]
    tool: Text(64) | None = None  # type: ignore[valid-type]
    args: Args = Field(default_factory=dict)
    depends_on: list[StepId] = Field(default_factory=list, max_length=8)
    subagent: Text(64) | None = None  # type: ignore[valid-type]
    tools: SkipJsonSchema[list[Text(64)]] = Field(default_factory=list, max_length=4)  # type: ignore[valid-type]
    expected_output: SkipJsonSchema[Text(200)] = ""  # type: ignore[valid-type]


class AssessStatus(_Wire):
    """Judge the goal's progress from the evidence."""

    # Under the compact profile the model is asked for the status alone: on the 1.5B the other three
    # fields were most of an assessment's generated tokens (and time), written after the status was
    # chosen, and no later call of that profile reads them (the planner derives progress from the plan).
    COMPACT_FIELDS: ClassVar[tuple[str, ...]] = ("status",)

    status: Literal["continue", "replan", "done"] = Field(
        description="done: goal achieved; continue: current plan stands; replan: current plan is wrong"
    )
    goal_progress: Fraction = Field(default=0.0, description="0..1")
    confidence: Fraction = Field(default=0.5, description="0..1")
    summary: Text(300) = Field(default="", description="One sentence on the evidence")  # type: ignore[valid-type]


class GeneratePlan(_Wire):
    """Decide the next steps toward the goal."""

    plan_action: Literal["new", "keep"] = Field(description="new: steps below; keep: in-flight plan stands")
    # Only the modes that schedule differently are offered; an old reply's "parallel" is still read.
    execution_mode: Annotated[ExecutionMode, BeforeValidator(execution_mode_of)] = Field(default="dependency")
    next_action: Text(300) = Field(default="", description="One sentence: what happens next")  # type: ignore[valid-type]
    steps: list[PlanStepSpec] = Field(default_factory=list, max_length=WIRE_MAX_STEPS)

    @model_validator(mode="after")
    def _new_needs_steps(self) -> GeneratePlan:
        if self.plan_action == "new" and not self.steps:
            raise ValueError("plan_action 'new' needs at least one step")
        return self


class ChooseContinuation(_Wire):
    """Decide how to handle a follow-up request on this thread."""

    action: Literal["bootstrap", "plan_generate"] = Field(
        description="bootstrap: one step answers it; plan_generate: needs a plan"
    )
    reasoning: Text(300) = Field(default="", description="Why, in one sentence")  # type: ignore[valid-type]


class DeclareDeliverable(_Wire):
    """Say what the request must hand back when it is done."""

    kind: Literal["answer", "file", "count"] = Field(
        description="file: it asks for a file to be written; count: it asks how many; answer: anything else"
    )
    files: list[Text(120)] = Field(  # type: ignore[valid-type]
        max_length=4, description="The files to write, each path exactly as the request writes it ([] unless kind is file)"
    )
    answer_is: Literal["name", "number", "path", "yes_no", "text"] = Field(
        description="What the answer is: a name (a person, team or channel), a number, a path, yes_no, or text"
    )
    parts: list[Text(80)] = Field(  # type: ignore[valid-type]
        max_length=4, description="Each thing the answer or file must give, a few words each"
    )
    every_match: bool = Field(description="true only when it asks for every line or item that matches something")
    count_of: Text(120) = Field(description="What to count, in the request's words (\"\" unless kind is count)")  # type: ignore[valid-type]


class CrossCheck(_Wire):
    """Copy from the tool outputs what the request asks for; no answer is shown."""

    values: list[Text(300)] = Field(  # type: ignore[valid-type]
        max_length=30,
        description="What the request asks for, copied word for word from the outputs, as the prompt says; "
        "\"\" for a thing the outputs do not state",
    )


class ReflectOnPlan(_Wire):
    """Judge how the plan went and whether to revise it."""

    assessment: Text(400) = Field(description="How the plan is going")  # type: ignore[valid-type]
    should_revise: bool
    feedback: Text(400) = Field(default="", description="What to change, if revising")  # type: ignore[valid-type]


class RouteIntake(_Wire):
    """Classify the request before planning."""

    route: Literal["trivial", "simple", "complex"] = Field(
        description="trivial: answer now; simple: one small plan; complex: multi-step work"
    )
    answer: Text(1000) = Field(default="", description="The answer, only when trivial")  # type: ignore[valid-type]

    @field_validator("answer")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()


@lru_cache(maxsize=64)
def generation_model(
    max_steps: int,
    *,
    allow_keep: bool = True,
    tools: tuple[str, ...] = (),
    subagents: tuple[str, ...] = (),
    compact: bool = False,
) -> type[GeneratePlan]:
    """``GeneratePlan`` with its step list bounded by ``max_steps`` (advertised and enforced).

    ``compact`` is the shape for small models: ``{"steps": [{id, tool, args, depends_on}]}`` and
    nothing else — no description (derived from the call), no ``plan_action`` (always ``new``), no
    mode or sentence to write; a model step is the pseudo-tool ``answer`` with ``{"task": ...}``
    (``parsing.plan_steps.MODEL_STEP_TOOL``), added to ``tools``; where a real tool has that name it
    goes by another (``parsing.plan_steps.model_step_name``).
    The class validates the same fields, so the readers downstream are the same.

    Without ``allow_keep`` (nothing is in flight: a first plan, a revision) ``plan_action`` can only
    be ``new``, so a grammar-constrained model cannot answer ``keep`` at all. ``tools`` and
    ``subagents`` are the offered names: each step's ``tool`` (and ``subagent``) is one of them or
    null; with no tools named, any name is accepted (the parser's allow-list judges it). One class
    per argument set, built once: the planner keeps its structured-output binding per class.
    """
    bound = max(1, min(max_steps, WIRE_MAX_STEPS))
    if compact:
        step = model_step_name((*tools, *subagents))
        return _compact_generation_model(bound, tuple(dict.fromkeys((*tools, step))), tuple(dict.fromkeys(subagents)))
    return _generation_model(bound, allow_keep, tuple(dict.fromkeys(tools)), tuple(dict.fromkeys(subagents)))


COMPACT_MODEL_STEP = "answer"
"""The pseudo-tool of a model step in the compact plan shape (``parsing.plan_steps.MODEL_STEP_TOOL``)."""
_MODEL_STEP_NAMES = (COMPACT_MODEL_STEP, "compose", "write_answer")


def model_step_name(tools: Collection[str] | None) -> str:
    """The name the model step goes by in a plan whose tools are ``tools``: ``answer``, or, when a
    real tool is named so (an agent's own ``answer`` action), the first of ``compose``,
    ``write_answer``, ``answer_2``, ... that no tool has: a plan's reader, schema and prompt never
    offer two tools of one name."""
    taken = set(tools or ())
    for name in _MODEL_STEP_NAMES:
        if name not in taken:
            return name
    n = 2
    while f"{COMPACT_MODEL_STEP}_{n}" in taken:
        n += 1
    return f"{COMPACT_MODEL_STEP}_{n}"
_COMPACT_REQUIRED = ["id", "tool", "args", "depends_on"]


def _compact_step_schema(schema: dict[str, Any]) -> None:
    schema["required"] = [name for name in _COMPACT_REQUIRED if name in schema.get("properties", {})]


@lru_cache(maxsize=64)
def _compact_generation_model(bound: int, tools: tuple[str, ...], subagents: tuple[str, ...]) -> type[GeneratePlan]:
    fields: dict[str, Any] = {
        "description": (SkipJsonSchema[Text(300)], ""),  # type: ignore[misc]
        "tool": (_one_of(tools), ...),
    }
    if subagents:
        fields["subagent"] = (_one_of(subagents) | None, None)
    else:
        fields["subagent"] = (SkipJsonSchema[str | None], None)  # type: ignore[misc]
    step: type[PlanStepSpec] = create_model(
        "PlanStep", __base__=PlanStepSpec, __doc__="One step: a tool and its arguments.",
        __config__=None, **fields,
    )
    step.model_config["json_schema_extra"] = _compact_step_schema
    step.model_rebuild(force=True)
    hidden: dict[str, Any] = {
        "plan_action": (SkipJsonSchema[Literal["new"]], "new"),  # type: ignore[misc]
        "execution_mode": (SkipJsonSchema[ExecutionMode], "dependency"),  # type: ignore[misc]
        "next_action": (SkipJsonSchema[str], ""),
        "steps": (list[step], Field(min_length=1, max_length=bound)),
    }
    plan: type[GeneratePlan] = create_model(
        "GeneratePlan", __base__=GeneratePlan, __doc__="The steps that do the goal.", **hidden,
    )
    return plan


def _one_of(names: tuple[str, ...]) -> Any:
    """``Literal[names]``: an enum in the JSON schema."""
    return Literal.__getitem__(names)


@lru_cache(maxsize=64)
def _step_model(tools: tuple[str, ...], subagents: tuple[str, ...]) -> type[PlanStepSpec]:
    if not tools and not subagents:
        return PlanStepSpec
    fields: dict[str, Any] = {}
    if tools:
        fields["tool"] = (_one_of(tools) | None, None)
    # No subagent offered: the field is not advertised (still accepted, for the parser to judge).
    fields["subagent"] = (_one_of(subagents) | None, None) if subagents else (SkipJsonSchema[str | None], None)  # type: ignore[misc]
    model: type[PlanStepSpec] = create_model(
        "PlanStepSpec", __base__=PlanStepSpec, __doc__=PlanStepSpec.__doc__, **fields
    )
    return model


@lru_cache(maxsize=64)
def _generation_model(
    bound: int, allow_keep: bool, tools: tuple[str, ...], subagents: tuple[str, ...]
) -> type[GeneratePlan]:
    step = _step_model(tools, subagents)
    fields: dict[str, Any] = {"steps": (list[step], Field(default_factory=list, max_length=bound))}  # type: ignore[valid-type]
    if not allow_keep:
        fields["plan_action"] = (Literal["new"], Field(default="new", description="new: the steps below"))
    model: type[GeneratePlan] = create_model(
        "GeneratePlan", __base__=GeneratePlan, __doc__=GeneratePlan.__doc__, **fields
    )
    return model


# --------------------------------------------------------------------------- conversion


def _hint(spec: PlanStepSpec) -> ExecutionHint:
    if spec.subagent:
        return "subagent"
    if spec.tool or spec.tools:
        return "tool"
    return "auto"


def to_decision(gen: GeneratePlan, *, reasoning: str = "") -> AgentDecision:
    """The steps of a ``new`` answer as an executable decision (validation of the DAG is separate).

    A step with neither ``tool`` nor ``subagent`` (nor ``tools``) is a model step."""
    steps = [
        StepAction(
            id=s.id,
            description=s.description,
            tools=list(s.tools),
            subagent=s.subagent or None,
            expected_output=s.expected_output,
            depends_on=list(s.depends_on),
            execution_hint=_hint(s),
            tool=s.tool or None,
            args=dict(s.args),
        )
        for s in gen.steps
    ]
    return AgentDecision(
        type="execute_steps", steps=steps, execution_mode=gen.execution_mode, reasoning=reasoning or gen.next_action
    )


def to_status_assessment(a: AssessStatus) -> StatusAssessment:
    return StatusAssessment(
        status=a.status, goal_progress=a.goal_progress, confidence=a.confidence, summary=a.summary
    )


def to_continuation(c: ChooseContinuation) -> ContinuationAssessment:
    return ContinuationAssessment(action=c.action, reasoning=c.reasoning)
