"""How many LLM calls has one run made, and may it make one more?

A ``CallMeter`` is the count of one run (one goal on one thread): the calls it has spent, carried
over from its checkpoint, and its budget. The StrangeLoop's nodes enter a meter seeded from the
state's ``llm_calls`` and write the meter's count back, so the count survives a resume and the
budget is per run, not per process: a resumed run does not start from zero.

What was weighed:

- **Where the count lives.** The controller's own counter is per process and per controller; a
  server's controller serves many threads, and a ``resume`` builds a fresh one. The count that the
  live display, ``show --json`` and ``resume`` read must be one number, so it lives in the run's
  state, and the meter is how a node adds to it.
- **A context variable, not an argument.** Every model call of a run reaches the controller
  (planner requests, wrapped agent and subagent models, worker threads that LangChain starts with
  a copy of the context); the meter reaches all of them through a ``ContextVar`` without threading
  a new argument through the planner and the executor. Tasks and threads started inside a node
  copy the context and so share the node's meter object.
- **Which budget wins.** Inside a meter the meter's budget is the run's; the controller's own
  total still counts every call (for stats and benchmarks) but does not refuse one. Outside any
  meter (a library call of ``plan()``) the controller's budget applies, as before.
- **What is not counted.** Calls made by a node that was killed before it finished are not written
  back (the node's output is lost with them); the step journal keeps the finished steps' results,
  so a resumed run does not pay for those again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from soothe_planner.errors import LLMBudgetExceeded

__all__ = ["RUN_METER", "CallMeter", "metering"]


class CallMeter:
    """The LLM calls of one run: ``spent`` so far and the ``budget`` (0 = none)."""

    def __init__(self, spent: int = 0, budget: int = 0) -> None:
        if spent < 0 or budget < 0:
            raise ValueError(f"a call meter needs spent >= 0 and budget >= 0, got spent={spent}, budget={budget}")
        self.budget = budget
        self._spent = spent
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"CallMeter({self._spent}/{self.budget or '∞'})"

    @property
    def spent(self) -> int:
        return self._spent

    def charge(self) -> None:
        """Count one call before it is made; ``LLMBudgetExceeded`` when the budget is spent."""
        with self._lock:
            if self.budget and self._spent >= self.budget:
                raise LLMBudgetExceeded(self.budget, self._spent)
            self._spent += 1

    def refund(self) -> None:
        """Take back a charge whose call was never made (its wait for a slot was cancelled)."""
        with self._lock:
            self._spent -= 1


RUN_METER: ContextVar[CallMeter | None] = ContextVar("soothe_run_meter", default=None)


@contextmanager
def metering(meter: CallMeter) -> Iterator[CallMeter]:
    """Count every LLM call made in this context (and the tasks and threads it starts) on ``meter``."""
    token = RUN_METER.set(meter)
    try:
        yield meter
    finally:
        RUN_METER.reset(token)
