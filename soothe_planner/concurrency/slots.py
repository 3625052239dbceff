"""One counting limit shared by coroutines and threads, and the record of which LLM slots a context holds.

``asyncio.Semaphore`` cannot be shared with threads and ``threading.Semaphore`` would block the
event loop, so ``Slots`` is a lock-protected counter with one FIFO of waiters of both kinds
(futures woken with ``call_soon_threadsafe``, ``threading.Event`` for threads). A freed slot is
handed straight to the oldest waiter, so the limit is fully used and nobody starves.
``acquire`` and ``acquire_sync`` share the queue (``_take_locked``, ``_abandon``, ``release``) and
stay written twice only in making and awaiting their waiter, which must differ by kind. The
controller (``controller.py``) builds its tree from these; the limited model
(``limited_model.py``) marks the slots it holds in ``HELD_LLM_SLOTS``. Both import this module and
neither imports the other's internals.

A held LLM slot is a ``SlotLease``: the slot goes back when the *last* of its holders lets go. The
context that took it is one holder; a provider call running under it in a worker thread (an
``ainvoke`` of a sync-only model, which LangChain runs through ``run_in_executor`` with the
context copied) joins as another. Cancelling the task ends the first hold, not the thread, so
the slot stays taken until the thread's call really returns; the limit then counts provider
calls that are running, not tasks that are waiting for them.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from contextvars import ContextVar
from types import MappingProxyType
from typing import Any

__all__ = ["HELD_LLM_SLOTS", "SlotLease", "Slots", "reset_held"]


class _Waiter:
    """One caller queued for a slot: an asyncio future or a thread's event."""

    __slots__ = ("event", "future", "granted", "loop")

    def __init__(
        self,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
        future: asyncio.Future[None] | None = None,
        event: threading.Event | None = None,
    ) -> None:
        self.loop = loop
        self.future = future
        self.event = event
        # Set under the lock at hand-over time: the source of truth for "this waiter owns a slot",
        # whether or not its future has been resolved yet.
        self.granted = False


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


class Slots:
    """A counting limit shared by coroutines and threads (0 = unlimited), FIFO and hand-over."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._in_flight = 0
        self._peak = 0
        self._waiters: deque[_Waiter] = deque()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    @property
    def peak(self) -> int:
        return self._peak

    def reset_peak(self) -> None:
        with self._lock:
            self._peak = self._in_flight

    def _take_locked(self) -> bool:
        # Newcomers queue behind existing waiters, so a freed slot cannot be stolen from them.
        if self._waiters or (self.limit and self._in_flight >= self.limit):
            return False
        self._in_flight += 1
        self._peak = max(self._peak, self._in_flight)
        return True

    async def acquire(self) -> None:
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._take_locked():
                return
            waiter = _Waiter(loop=loop, future=loop.create_future())
            self._waiters.append(waiter)
        assert waiter.future is not None
        try:
            await waiter.future
        except BaseException:
            self._abandon(waiter)
            raise

    def acquire_sync(self) -> None:
        with self._lock:
            if self._take_locked():
                return
            waiter = _Waiter(event=threading.Event())
            self._waiters.append(waiter)
        assert waiter.event is not None
        try:
            waiter.event.wait()
        except BaseException:
            self._abandon(waiter)
            raise

    def _abandon(self, waiter: _Waiter) -> None:
        """A waiter gave up (cancelled, interrupted): return its slot if it had been handed one."""
        with self._lock:
            granted = waiter.granted
            if not granted:
                self._waiters.remove(waiter)
        if granted:
            # This class's own release, not a subclass's: what was granted is the place here only
            # (a shared cap's database row is taken after it, see shared.py).
            Slots.release(self)

    def release(self) -> None:
        with self._lock:
            if not self._waiters:
                self._in_flight -= 1
                return
            # Hand the slot over: in_flight stays the same, the next waiter now owns it.
            waiter = self._waiters.popleft()
            waiter.granted = True
        if waiter.event is not None:
            waiter.event.set()
            return
        assert waiter.loop is not None and waiter.future is not None
        if waiter.loop is _running_loop():
            # Same loop, same thread: wake it now; call_soon_threadsafe would cost a self-pipe
            # write and one more loop round before the waiter runs.
            _resolve(waiter.future)
            return
        try:
            waiter.loop.call_soon_threadsafe(_resolve, waiter.future)
        except RuntimeError:
            # Its event loop is closed: nobody will ever use this slot, pass it on.
            Slots.release(self)

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()


class SlotLease:
    """One slot taken from ``Slots``, shared by its holders and given back when the last one leaves."""

    __slots__ = ("_holders", "_lock", "_slots")

    def __init__(self, slots: Slots) -> None:
        self._slots = slots
        self._lock = threading.Lock()
        self._holders = 1

    def join(self) -> bool:
        """Hold the slot too; ``False`` if it was already given back (the caller needs its own)."""
        with self._lock:
            if not self._holders:
                return False
            self._holders += 1
            return True

    def leave(self) -> None:
        """Let go; the last holder to leave gives the slot back."""
        with self._lock:
            self._holders -= 1
            last = not self._holders
        if last:
            self._slots.release()


# The controllers (by serial number) whose LLM slot the current context already holds, with the
# lease a worker thread joins to keep that slot for as long as its call runs.
HELD_LLM_SLOTS: ContextVar[Mapping[int, SlotLease]] = ContextVar(
    "soothe_held_llm_slots", default=MappingProxyType({})
)


def reset_held(token: Any) -> None:
    # Exited in another context than it was entered in (an async generator finalised by the
    # event loop): that context dies with it, nothing to restore.
    with suppress(ValueError):
        HELD_LLM_SLOTS.reset(token)
