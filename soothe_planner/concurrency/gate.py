"""What does a limited model ask of whatever limits it?

A wrapped model (``limited_model.py``) holds one LLM slot of each controller that limits it for
the length of a call, and paces its ``ainvoke`` through their admission places. This protocol is
that much of :class:`~soothe_planner.concurrency.ConcurrencyController` and no more: the controller
wraps models, so the wrapper types against this, and neither module imports the other.
"""

from __future__ import annotations

from typing import Protocol

from soothe_planner.concurrency.slots import SlotLease

__all__ = ["LLMGate"]


class LLMGate(Protocol):
    """The slots and admission places a limited model's calls go through."""

    @property
    def serial(self) -> int:
        """Orders the gates a model holds (always taken lowest first) and keys ``HELD_LLM_SLOTS``."""
        ...

    def held_lease(self) -> SlotLease | None:
        """The lease on this gate's LLM slot that the current context holds, if any."""
        ...

    async def lease_llm_slot(self, phase: str | None = None, *, counted: bool = False) -> SlotLease:
        """Take an LLM slot; ``counted`` when the call was already counted against the budget."""
        ...

    def lease_llm_slot_sync(self, phase: str | None = None, *, counted: bool = False) -> SlotLease:
        """The thread form of :meth:`lease_llm_slot`."""
        ...

    async def admit_llm_call(self) -> bool:
        """Wait for a place among the calls being prepared; ``True`` if one was taken."""
        ...

    def end_admission(self) -> None:
        """Give back a place taken by :meth:`admit_llm_call`."""
        ...
