"""What does a StrangeLoop run report while it works, and in what shape?

Each progress event is a dict on LangGraph's custom stream (``stream_mode="custom"``), with an
``"event"`` key naming its kind. This module is their contract: one ``TypedDict`` per kind, every
key typed and documented, and ``parse_event`` to read one into its type (a ``ValueError`` naming
the key for anything that is not a documented event). The graph's nodes and the step executor
build every event through the constructors here (the ``TypedDict`` call, or a function that reads a
model field by field), so mypy holds each one to its type where it is made; a test runs the loop
through every kind and parses each event with extra keys forbidden, and another checks the table
in ``docs/reference/api/events.md`` against these types.

=================  ====================================================================
``intake``         the request was routed: ``route`` is trivial | simple | complex
``deliverable``    what the goal must hand back: ``kind`` answer | file | count, ``files``, who declared it
``assessment``     phase 1 judged the goal: ``status`` continue | replan | done, progress
``plan``           phase 2 decided: ``plan_action`` keep | new, and the new ``steps``
``step_started``   a step began (or its journaled result was replayed)
``step_completed`` a step ended: ``success``, ``output`` (an excerpt) or ``error``
``approval``       a human approved the plan (``sha256``; ``edited`` when they edited it first) or
                   rejected it (``feedback``; ``refused`` when the gate refused an approval that
                   named no plan or another plan)
``error``          something failed; ``retry: true`` when the loop sends the plan back once
``completed``      the goal is done: ``final_answer``
=================  ====================================================================

TypedDicts rather than pydantic models because the events are plain dicts on the wire (a server
streams them as JSON) and a reader should not need this package to read them; the
``typing_extensions`` form so that pydantic can validate them on Python 3.11.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal, NotRequired

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, with_config
from typing_extensions import TypedDict

if TYPE_CHECKING:
    from soothe_planner.deliverable import Deliverable
    from soothe_planner.models import StatusAssessment

__all__ = [
    "EVENT_KINDS",
    "ApprovalEvent",
    "AssessmentEvent",
    "CompletedEvent",
    "DeliverableEvent",
    "ErrorEvent",
    "Event",
    "IntakeEvent",
    "PlanEvent",
    "ProgressEvent",
    "StepCompletedEvent",
    "StepStartedEvent",
    "assessment_event",
    "deliverable_event",
    "parse_event",
]

_STRICT = ConfigDict(extra="forbid")


@with_config(_STRICT)
class IntakeEvent(TypedDict):
    event: Literal["intake"]
    route: Literal["trivial", "simple", "complex"]


@with_config(_STRICT)
class DeliverableEvent(TypedDict):
    event: Literal["deliverable"]
    kind: Literal["answer", "file", "count"]
    files: list[str]
    holds: list[str]
    count_of: str
    answer_is: Literal["name", "number", "path", "yes_no", "text"]
    parts: list[str]
    every_match: bool
    declared_by: Literal["caller", "model"]
    iteration: NotRequired[int]  # when the model declared it, with the goal's first plan


@with_config(_STRICT)
class AssessmentEvent(TypedDict):
    event: Literal["assessment"]
    iteration: int
    status: Literal["continue", "replan", "done"]
    goal_progress: float
    confidence: float
    require_goal_completion: bool
    summary: str
    degraded: bool


@with_config(_STRICT)
class PlanEvent(TypedDict):
    event: Literal["plan"]
    iteration: int
    plan_action: Literal["keep", "new"]
    steps: list[dict[str, Any]]  # each a StepAction as JSON: id, description, tools, depends_on, ...
    degraded: bool
    refused: NotRequired[list[str]]  # why earlier answers of this plan call were refused before a re-ask mended it


@with_config(_STRICT)
class StepStartedEvent(TypedDict):
    event: Literal["step_started"]
    step_id: str
    description: str
    attempt: int
    replayed: bool  # the result came from the step journal; the step did not run again
    thread_id: str | None


@with_config(_STRICT)
class StepCompletedEvent(TypedDict):
    event: Literal["step_completed"]
    step_id: str
    success: bool
    error_type: str | None  # tool_error, timeout, policy_denied, skipped, ...
    error: str | None
    duration_ms: float
    attempt: int
    output: str  # at most 500 characters, then "…"
    replayed: bool
    thread_id: str | None
    kind: NotRequired[str]  # how the step ran, when the executor reports it
    tool_calls: NotRequired[list[str]]
    recovered_from_text: NotRequired[bool]


@with_config(_STRICT)
class ApprovalEvent(TypedDict):
    event: Literal["approval"]
    approved: bool
    sha256: NotRequired[str]  # on approval: the seal of the approved plan
    edited: NotRequired[bool]  # on approval: the human edited the plan, and this seals the edit
    feedback: NotRequired[str]  # on rejection: what the human said
    refused: NotRequired[bool]  # an approval the gate refused: no digest, or another plan's digest


@with_config(_STRICT)
class ErrorEvent(TypedDict):
    event: Literal["error"]
    error: str
    iteration: int
    retry: NotRequired[bool]  # the plan goes back to the planner once with the error as feedback


@with_config(_STRICT)
class CompletedEvent(TypedDict):
    event: Literal["completed"]
    final_answer: str


Event = (
    IntakeEvent | DeliverableEvent | AssessmentEvent | PlanEvent | StepStartedEvent | StepCompletedEvent | ApprovalEvent
    | ErrorEvent | CompletedEvent
)
"""Any one progress event, for code that sends one (what ``emit`` takes)."""

ProgressEvent = Annotated[Event, Field(discriminator="event")]
"""Any one progress event, told apart by its ``"event"`` key."""

EVENT_KINDS = ("intake", "deliverable", "assessment", "plan", "step_started", "step_completed", "approval", "error", "completed")

_ADAPTER: TypeAdapter[Any] | None = None


def deliverable_event(deliverable: Deliverable, iteration: int | None = None) -> DeliverableEvent:
    """The ``deliverable`` event for ``deliverable``; ``iteration`` when the model declared it with a plan."""
    event = DeliverableEvent(
        event="deliverable", kind=deliverable.kind, files=list(deliverable.files), holds=list(deliverable.holds),
        count_of=deliverable.count_of, answer_is=deliverable.answer_is, parts=list(deliverable.parts),
        every_match=deliverable.every_match, declared_by=deliverable.declared_by,
    )
    if iteration is not None:
        event["iteration"] = iteration
    return event


def assessment_event(iteration: int, assessment: StatusAssessment) -> AssessmentEvent:
    """The ``assessment`` event for phase 1's judgement in ``iteration``."""
    return AssessmentEvent(
        event="assessment", iteration=iteration, status=assessment.status, goal_progress=assessment.goal_progress,
        confidence=assessment.confidence, require_goal_completion=assessment.require_goal_completion,
        summary=assessment.summary, degraded=assessment.degraded,
    )


def parse_event(data: Any) -> ProgressEvent:
    """``data`` checked against its event type; a ``ValueError`` names the kind, the key and the rule."""
    global _ADAPTER
    if _ADAPTER is None:
        _ADAPTER = TypeAdapter(ProgressEvent)
    try:
        event: ProgressEvent = _ADAPTER.validate_python(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        kind = data.get("event") if isinstance(data, dict) else None
        raise ValueError(
            f"not a documented progress event ({kind!r}): {where}: {first['msg']} (kinds: {', '.join(EVENT_KINDS)})"
        ) from None
    return event
