"""What every runtime model shares: the one id rule, clean text, and the literal kinds.

See the package docstring (``soothe_planner.models``) for the two rules that hold on every path
into the models; they are enforced here, once: ``check_step_id`` and ``clean_text``, and the two
bases every model builds on (``TextModel`` cleans the strings of a model that carries a model's or
a tool's text as it is built).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

__all__ = [
    "FINISHED_STATUSES",
    "LEGACY_EXECUTION_MODES",
    "STEP_ID_PATTERN",
    "STEP_ID_RULE",
    "CallKind",
    "DataModel",
    "ExecutionHint",
    "ExecutionMode",
    "IntakeRoute",
    "StepStatus",
    "TextModel",
    "check_step_id",
    "clamp01",
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


def clamp01(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return min(1.0, max(0.0, float(value)))
    return value


class DataModel(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=False)


class TextModel(DataModel):
    """A model that carries a model's or a tool's text: its strings are cleaned as it is built."""

    @model_validator(mode="before")
    @classmethod
    def _clean(cls, data: Any) -> Any:
        return clean_value(data) if isinstance(data, dict) else data
