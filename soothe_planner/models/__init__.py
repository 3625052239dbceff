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

The models live in modules by concept (``base.py``: the id rule, clean text and the literal kinds;
``steps.py``; ``context.py``; ``loop.py``; ``settings.py``); this front door re-exports them.
"""

from __future__ import annotations

from soothe_planner.models.base import (
    FINISHED_STATUSES as FINISHED_STATUSES,  # the DAG reads it; not part of the surface
)
from soothe_planner.models.base import (
    LEGACY_EXECUTION_MODES,
    STEP_ID_PATTERN,
    STEP_ID_RULE,
    CallKind,
    ExecutionHint,
    ExecutionMode,
    IntakeRoute,
    StepStatus,
    check_step_id,
    clean_text,
    clean_value,
    execution_mode_of,
    is_step_id,
)
from soothe_planner.models.base import clamp01 as _clamp01  # noqa: F401  (the wire schema's name for it)
from soothe_planner.models.context import Capability, PlanContext
from soothe_planner.models.loop import (
    ContinuationAssessment,
    GoalDirective,
    LoopState,
    PlanResult,
    Reflection,
    StatusAssessment,
)
from soothe_planner.models.settings import FailurePolicy, PlanExample, PlanExampleStep, PlannerSettings
from soothe_planner.models.steps import AgentDecision, Plan, PlanStep, StepAction, StepResult

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
    "PlanExample",
    "PlanExampleStep",
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
