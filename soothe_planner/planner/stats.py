"""What did a planner's calls go through: how often each fallback, guard and trim happened?

``PlannerStats`` is the one record of it, held by ``LLMPlanner.stats`` and fed by the planner
(guards, degraded results, prompt trims) and by its ``Caller`` (the repair ladder and transport
retries). A dataclass with one named counter per event, not a ``Counter[str]``: a misspelt key
was a new counter that stayed at zero, and a reader had to grep two files to learn the keys. Here a
typo is an ``AttributeError`` (and a mypy error), and each counter says what it counts.

The counters are per planner, not per call (``PlanResult.llm_calls`` counts a call's requests) and
not per run (``ConcurrencyController`` counts a run's calls by phase).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, fields

__all__ = ["PlannerStats"]


@dataclass
class PlannerStats:
    """How often each outcome, fallback and guard happened in one planner's calls."""

    structured_ok: int = 0
    """A structured answer was usable as the model gave it."""
    text_ok: int = 0
    """A plan asked for as text (the ``calls`` syntax) was usable as the model first wrote it."""
    salvaged: int = 0
    """A structured answer did not parse; the lenient parser read its raw text (no extra call)."""
    raw_fallback: int = 0
    """The structured format failed, so one unstructured call was made."""
    raw_ok: int = 0
    """That unstructured call gave a usable answer."""
    reask: int = 0
    """Re-asks made, each showing the model its failed output and the error."""
    reask_ok: int = 0
    """A re-ask gave a usable answer."""
    transport_retry: int = 0
    """Requests repeated after a timeout, connection error, rate limit or 5xx."""
    failed: int = 0
    """Phases that ended in a ``PlanGenerationError`` (every attempt failed, or the transport stayed down)."""
    degraded: int = 0
    """Failures answered with a ``degraded`` result instead of an error (``on_failure="degraded"``)."""
    guard_overrides: int = 0
    """Answers a guard replaced: ``done`` at iteration 0, a bootstrap the intake rules out, ..."""
    prescribed_writes: int = 0
    """Re-plans the model failed every time, answered with the write the delivery check prescribes."""
    prescribed_readings: int = 0
    """Re-plans the model failed every time, answered by reading the files the searches found, then answering."""
    unbound_calls: int = 0
    """Plans refused every time for their calls' arguments, kept with those arguments left to run time."""
    keep_without_plan: int = 0
    """``keep`` answered with no plan in flight, so steps were asked for once more."""
    budget_trims: int = 0
    """Prompts whose state was trimmed to fit the prompt budget."""
    compact_briefing: int = 0
    """Prompts still over budget after trimming, sent with the compact briefing."""
    budget_overflow: int = 0
    """Prompts over budget even so, sent whole."""

    def as_dict(self) -> dict[str, int]:
        """Every counter by name, for reports and benchmarks."""
        return asdict(self)

    def __getitem__(self, name: str) -> int:
        """Deprecated: ``stats["reask"]`` from when the stats were a ``Counter``; use ``stats.reask``."""
        known = [f.name for f in fields(self)]
        if name not in known:
            raise KeyError(f"no planner counter named {name!r}; the counters are: {', '.join(known)}")
        warnings.warn(
            f"PlannerStats[{name!r}] is deprecated; read the attribute instead: stats.{name}",
            DeprecationWarning,
            stacklevel=2,
        )
        value: int = getattr(self, name)
        return value
