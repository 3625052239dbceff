"""How many things may run at once, and how many LLM calls a run may make.

``ConcurrencyPolicy`` is the configuration (validated ``>= 0``; ``0`` means unlimited at every
level, never "disabled"). ``ConcurrencyController`` turns it into a tree of slots: goal → step →
subagent, with the LLM-call limiter at the root shared by every LLM call of a run — planner,
executor, subagents. LangGraph's ``max_concurrency`` is not relied on: it is silently ignored in
some placements, so the limits are enforced here.

The LLM-call limiter is usable from async code and from plain threads (a sync ``invoke`` on a
model), because LangChain runs sync model calls in worker threads; one limiter serves both.

What was weighed:

- ``asyncio.Semaphore`` cannot be shared with threads and ``threading.Semaphore`` would block the
  event loop, so ``Slots`` is a lock-protected counter with one FIFO of waiters of both kinds
  (futures woken with ``call_soon_threadsafe``, ``threading.Event`` for threads). A freed slot is
  handed straight to the oldest waiter, so the limit is fully used and nobody starves.
- A waiter cancelled after it was handed a slot gives the slot back; otherwise one cancelled task
  would shrink the limit for the rest of the run.
- The total-calls budget is checked and reserved *before* waiting for a slot, so the call that
  would exceed it never reaches the model. A reservation whose wait is cancelled is refunded: no
  call was made. Inside a run's ``CallMeter`` (``meter.py``) the budget is the run's, carried over
  from its checkpoint; the controller's own total then only tallies.
- LLM slots are re-entrant per controller within one context (a ``ContextVar``): a wrapped model
  called inside ``llm_call()``, a model wrapped twice, or an async call falling back to the sync
  one in a worker thread (LangChain copies the context there) all count once. The price: a task
  spawned *inside* an ``llm_call()`` block shares the caller's slot, so keep those blocks around
  one model call.
- A held slot is a ``SlotLease`` that the worker thread of a sync provider call joins (see
  ``slots.py``): a cancelled ``llm_call()`` — a caller's timeout, a step timeout — lets go of its
  hold, but the slot comes back only when the thread's call returns. The limit counts provider
  calls actually running; a retry after a timeout waits for the abandoned call (for as long as
  the provider's own client lets it run) instead of running beside it. A thread that starts after
  its caller already let go takes a slot of its own (not counted again in the budget).
- A freed LLM slot goes to the next waiter at once when both are on the same event loop (no
  extra loop round). A flood of ``ainvoke`` calls is paced by an admission queue of twice the LLM
  limit: without it every call runs LangChain's preparation (callbacks, config, messages) before
  any finished call can hand its slot on, and the slots sit idle behind that burst. The admission
  queue only orders work; the LLM limit and the budget are enforced at the model call itself.
- A runnable built elsewhere (a subagent graph passed in from code) calls models this controller
  never wrapped. ``runnable_call`` holds one LLM slot for the whole run of it — its model calls
  join that slot, so they never exceed the limit — and hands back a callback handler that charges
  each of its model calls to the budget as it starts. The price: such a subagent's own calls run
  one at a time, and a model in it wrapped by *another* controller is charged by both.
- ``backend: postgres`` swaps the LLM-call limiter for ``shared.SharedSlots``: the same ``Slots``
  interface, its slots leased from a table in PostgreSQL, so the in-flight cap holds across every
  process sharing the database; the budget, the admission queue and the goal, step and subagent
  slots stay as they are (per run, per process). Every controller of a process built with the
  same shared policy uses one ``SharedSlots``.
- A sync ``llm_call_sync()`` made on a thread that runs an event loop blocks that loop while it
  waits; if the slots are held by tasks of the same loop it waits forever. Sync model calls
  belong in worker threads (LangChain's ``ainvoke`` already puts them there).
- Each LLM-slot method has a thread form beside the async one. What they decide is written once
  (``_charged``: charge before waiting, refund a failed wait; ``_joined_lease``: share a live hold;
  ``_holding``: mark the context, leave after), so the two forms differ only in the wait itself,
  which cannot be shared: a thread cannot await, and a coroutine must not block its loop.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.callbacks import BaseCallbackHandler
from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

from soothe_planner.concurrency.limited_model import limit_model
from soothe_planner.concurrency.meter import RUN_METER
from soothe_planner.concurrency.shared import shared_slots
from soothe_planner.concurrency.slots import HELD_LLM_SLOTS, SlotLease, Slots, reset_held
from soothe_planner.errors import LLMBudgetExceeded

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = ["ConcurrencyController", "ConcurrencyPolicy", "StepParallelism"]

StepParallelism = Literal["sequential", "dependency", "max"]
ConcurrencyBackend = Literal["process", "postgres"]

UNKNOWN_PHASE = "unknown"

# Calls that may be past their start and waiting for an LLM slot, per slot: enough that a freed
# slot always finds a prepared call, few enough that a flood prepares while others run.
ADMISSION_PER_LLM_SLOT = 2


class ConcurrencyPolicy(BaseModel):
    """Limits at every level of a run. ``0`` means unlimited; negatives are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_parallel_goals: int = Field(default=1, ge=0, description="Goals worked on at once (0 = unlimited).")
    max_parallel_steps: int = Field(
        default=3, ge=0, description="Plan steps running at once (0 = unlimited)."
    )
    max_parallel_subagents: int = Field(
        default=2, ge=0, description="Subagent steps running at once (0 = unlimited)."
    )
    global_max_llm_calls: int = Field(
        default=4, ge=0, description="LLM calls in flight at once, across the whole run (0 = unlimited)."
    )
    max_total_llm_calls: int = Field(
        default=0, ge=0, description="Budget: LLM calls a run may make in all (0 = no budget)."
    )
    step_parallelism: StepParallelism = Field(
        default="dependency",
        description="sequential: one step at a time; dependency: as the DAG allows; max: as the DAG allows, "
        "ignoring max_parallel_steps.",
    )
    backend: ConcurrencyBackend = Field(
        default="process",
        description="Where global_max_llm_calls is counted: process (this process's calls) or postgres (every "
        "process sharing the database; see concurrency/shared.py).",
    )
    dsn: SecretStr | None = Field(
        default=None,
        description="PostgreSQL connection string for backend postgres (default: checkpoint.dsn when the "
        "checkpoints are on PostgreSQL).",
    )
    lease_s: float = Field(
        default=30.0, ge=1.0, le=3600.0,
        description="backend postgres: a slot held by a process that died is free again at most this many "
        "seconds after the process's last renewal (a live holder renews every third of it).",
    )
    scope: str = Field(
        default="default", min_length=1, max_length=200,
        description="backend postgres: the name of the shared cap; processes with the same database and scope "
        "share one cap.",
    )

    @model_validator(mode="after")
    def _backend_needs(self) -> ConcurrencyPolicy:
        if self.backend == "postgres" and (self.dsn is None or not self.dsn.get_secret_value()):
            raise ValueError(
                "backend 'postgres' needs a database: set concurrency.dsn, or keep the checkpoints on PostgreSQL "
                "(checkpoint.backend: postgres; its dsn is the default)"
            )
        return self


_serials = itertools.count(1)


def _llm_slots(policy: ConcurrencyPolicy) -> Slots:
    """The LLM-call limiter: this process's own, or a cap shared through PostgreSQL (``shared.py``)."""
    if policy.backend == "postgres" and policy.global_max_llm_calls and policy.dsn is not None:
        return shared_slots(policy.global_max_llm_calls, dsn=policy.dsn.get_secret_value(), scope=policy.scope,
                            lease_s=policy.lease_s)
    return Slots(policy.global_max_llm_calls)


class ConcurrencyController:
    """The slots of one run: goals, steps, subagents, and the LLM calls that all of them share.

    Create one per run and hand the same instance to the planner and the executor; wrap every model
    of the run with :meth:`wrap_model` (or enter :meth:`llm_call` around a call) so each call takes
    a slot of the one shared limiter.
    """

    def __init__(self, policy: ConcurrencyPolicy | None = None) -> None:
        self.policy = policy if policy is not None else ConcurrencyPolicy()
        self.serial = next(_serials)
        step_limit = {
            "sequential": 1,
            "dependency": self.policy.max_parallel_steps,
            "max": 0,
        }[self.policy.step_parallelism]
        self._goals = Slots(self.policy.max_parallel_goals)
        self._steps = Slots(step_limit)
        self._subagents = Slots(self.policy.max_parallel_subagents)
        self._llm = _llm_slots(self.policy)
        # Pacing, not a limit: calls let into LangChain's per-call preparation while waiting for an
        # LLM slot (see ``admit_llm_call``).
        self._admission = Slots(ADMISSION_PER_LLM_SLOT * self.policy.global_max_llm_calls)
        self._budget_lock = threading.Lock()
        self._total_llm_calls = 0
        self._calls_by_phase: dict[str, int] = {}

    def for_run(self) -> ConcurrencyController:
        """A controller for one run that shares this one's LLM-call slots and keeps its own budget.

        A server runs many goals in one process: the in-flight cap (``global_max_llm_calls``) must
        hold across all of them, so every run's controller hands out the same LLM slots (and the
        same admission places); the budget (``max_total_llm_calls``) and the goal, step and
        subagent slots stay per run, as they are for a run on the command line.
        """
        run = ConcurrencyController(self.policy)
        run._llm = self._llm
        run._admission = self._admission
        return run

    def __repr__(self) -> str:
        return (
            f"ConcurrencyController(llm {self.in_flight_llm_calls}/{self._llm.limit or '∞'} in flight, "
            f"{self.total_llm_calls} calls, steps {self.in_flight_steps}/{self._steps.limit or '∞'})"
        )

    # -- the tree of slots ---------------------------------------------------------------------

    def goal(self) -> AbstractAsyncContextManager[None]:
        """Hold a goal slot (``max_parallel_goals``; 0 = unlimited)."""
        return self._goals.hold()

    def step(self) -> AbstractAsyncContextManager[None]:
        """Hold a step slot: sequential → 1, dependency → ``max_parallel_steps``, max → unlimited."""
        return self._steps.hold()

    def subagent(self) -> AbstractAsyncContextManager[None]:
        """Hold a subagent slot (``max_parallel_subagents``; 0 = unlimited)."""
        return self._subagents.hold()

    @property
    def step_limit(self) -> int:
        """The step slots this policy allows at once (0 = unlimited)."""
        return self._steps.limit

    # -- the LLM-call limiter -------------------------------------------------------------------

    def holds_llm_slot(self) -> bool:
        """Whether the current context already holds one of this controller's LLM slots."""
        return self.serial in HELD_LLM_SLOTS.get()

    def _reserve(self, phase: str | None) -> None:
        """Count the call against the budget before it is made; raise if the budget is spent."""
        limit = self.policy.max_total_llm_calls
        name = phase or UNKNOWN_PHASE
        meter = RUN_METER.get()
        if meter is not None:  # a run's own count and budget (meter.py); the controller only tallies
            meter.charge()
        with self._budget_lock:
            if meter is None and limit and self._total_llm_calls >= limit:
                raise LLMBudgetExceeded(limit, self._total_llm_calls)
            self._total_llm_calls += 1
            self._calls_by_phase[name] = self._calls_by_phase.get(name, 0) + 1

    def _refund(self, phase: str | None) -> None:
        name = phase or UNKNOWN_PHASE
        meter = RUN_METER.get()
        if meter is not None:
            meter.refund()
        with self._budget_lock:
            self._total_llm_calls -= 1
            self._calls_by_phase[name] -= 1
            if not self._calls_by_phase[name]:
                del self._calls_by_phase[name]

    @contextmanager
    def _charged(self, phase: str | None, *, counted: bool = False) -> Iterator[None]:
        """Charge the budget around the wait for a slot (unless ``counted``); refund it if the wait fails.

        The one place the charge-before-waiting rule is written: the async and the thread forms of
        every method below differ only in how they wait, inside this block.
        """
        if counted:
            yield
            return
        self._reserve(phase)
        try:
            yield
        except BaseException:
            self._refund(phase)
            raise

    async def acquire_llm_slot(self, phase: str | None = None) -> bool:
        """Take an LLM slot unless this context already holds one; ``True`` if one was taken.

        The low-level half of :meth:`llm_call` for code that must hold a slot across yields (a
        streaming wrapper): it does not mark the context, and the caller must
        :meth:`release_llm_slot` exactly once when it returns ``True``.
        """
        if self.holds_llm_slot():
            return False
        with self._charged(phase):
            await self._llm.acquire()
        return True

    def acquire_llm_slot_sync(self, phase: str | None = None) -> bool:
        """The thread form of :meth:`acquire_llm_slot`."""
        if self.holds_llm_slot():
            return False
        with self._charged(phase):
            self._llm.acquire_sync()
        return True

    def release_llm_slot(self) -> None:
        """Give back a slot taken by :meth:`acquire_llm_slot` or :meth:`acquire_llm_slot_sync`."""
        self._llm.release()

    async def lease_llm_slot(self, phase: str | None = None, *, counted: bool = False) -> SlotLease:
        """Take a new LLM slot as a lease (whatever the context holds); the caller leaves it once.

        A worker thread running the provider call under it joins and leaves too, so the slot
        returns when the last of them is done. ``counted=True`` takes the slot without charging
        the budget: the call was counted by whoever took the lease it found already given back.
        """
        with self._charged(phase, counted=counted):
            await self._llm.acquire()
        return SlotLease(self._llm)

    def lease_llm_slot_sync(self, phase: str | None = None, *, counted: bool = False) -> SlotLease:
        """The thread form of :meth:`lease_llm_slot`."""
        with self._charged(phase, counted=counted):
            self._llm.acquire_sync()
        return SlotLease(self._llm)

    def held_lease(self) -> SlotLease | None:
        """The lease on this controller's LLM slot that the current context holds, if any."""
        return HELD_LLM_SLOTS.get().get(self.serial)

    def _joined_lease(self) -> SlotLease | None:
        """The held lease, joined; ``None`` when there is none or it was given back (take a new one)."""
        lease = self.held_lease()
        return lease if lease is not None and lease.join() else None

    @contextmanager
    def _holding(self, lease: SlotLease) -> Iterator[None]:
        """Mark ``lease`` as held in this context for the block, and leave it after."""
        token = HELD_LLM_SLOTS.set({**HELD_LLM_SLOTS.get(), self.serial: lease})
        try:
            yield
        finally:
            reset_held(token)
            lease.leave()

    async def admit_llm_call(self) -> bool:
        """Wait for a place among the calls being prepared for an LLM slot; ``True`` if one was taken.

        Pacing for a wrapped model's ``ainvoke``: at most ``ADMISSION_PER_LLM_SLOT`` × the LLM
        limit calls are between their start and the grant of their LLM slot, so a flood of calls
        prepares a few at a time while earlier calls wait on their model. The caller gives the
        place back with :meth:`end_admission` exactly once when this returns ``True``. Nothing is
        waited for when the LLM calls are unlimited or the context already holds an LLM slot (a
        call made from inside another must not queue behind calls waiting for that slot).
        """
        if not self._admission.limit or HELD_LLM_SLOTS.get():
            return False
        await self._admission.acquire()
        return True

    def end_admission(self) -> None:
        """Give back a place taken by :meth:`admit_llm_call`."""
        self._admission.release()

    @asynccontextmanager
    async def llm_call(self, phase: str | None = None) -> AsyncIterator[None]:
        """Hold one LLM slot for the duration of a call; re-entrant within one context.

        Raises ``LLMBudgetExceeded`` before waiting (so before the call) when the run's budget is
        spent.
        """
        lease = self._joined_lease()  # re-entrant: a live hold is shared, not counted again
        if lease is None:
            lease = await self.lease_llm_slot(phase)
        with self._holding(lease):
            yield

    @contextmanager
    def llm_call_sync(self, phase: str | None = None) -> Iterator[None]:
        """The same limiter as :meth:`llm_call`, for code running in a thread."""
        lease = self._joined_lease()
        if lease is None:
            lease = self.lease_llm_slot_sync(phase)
        with self._holding(lease):
            yield

    @asynccontextmanager
    async def runnable_call(self, phase: str | None = None) -> AsyncIterator[BaseCallbackHandler]:
        """Hold one LLM slot around a whole runnable whose models this controller did not wrap.

        Yields a callback handler to put in the runnable's config: it charges every model call of
        the run to the budget when the call starts (``LLMBudgetExceeded`` stops it there). Models
        that this controller did wrap join the held slot and are charged once, by the handler.
        """
        lease = self._joined_lease()
        if lease is None:
            lease = await self.lease_llm_slot(phase, counted=True)
        with self._holding(lease):
            yield _ChargeEachCall(self, phase)

    def wrap_model(self, model: BaseChatModel) -> BaseChatModel:
        """Return a copy of ``model`` whose every call takes one of this controller's LLM slots.

        See ``soothe_planner.concurrency.limited_model`` for how, and why a subclass rather than a proxy.
        """
        return limit_model(model, self)

    # -- counters ------------------------------------------------------------------------------

    @property
    def in_flight_llm_calls(self) -> int:
        return self._llm.in_flight

    @property
    def peak_llm_calls(self) -> int:
        return self._llm.peak

    @property
    def total_llm_calls(self) -> int:
        """Calls admitted so far (the budget counts these; a call that failed still counts)."""
        return self._total_llm_calls

    @property
    def calls_by_phase(self) -> dict[str, int]:
        with self._budget_lock:
            return dict(self._calls_by_phase)

    @property
    def in_flight_steps(self) -> int:
        return self._steps.in_flight

    @property
    def peak_steps(self) -> int:
        return self._steps.peak

    @property
    def in_flight_subagents(self) -> int:
        return self._subagents.in_flight

    @property
    def peak_subagents(self) -> int:
        return self._subagents.peak

    @property
    def in_flight_goals(self) -> int:
        return self._goals.in_flight

    @property
    def peak_goals(self) -> int:
        return self._goals.peak

    def reset_peaks(self) -> None:
        """Start peak measurements afresh (each peak becomes what is in flight now)."""
        for slots in (self._goals, self._steps, self._subagents, self._llm):
            slots.reset_peak()

    def stats(self) -> dict[str, Any]:
        """A snapshot of every counter, for reports and benchmarks."""
        return {
            "llm_in_flight": self.in_flight_llm_calls,
            "llm_peak": self.peak_llm_calls,
            "llm_limit": self._llm.limit,
            "llm_total": self.total_llm_calls,
            "llm_budget": self.policy.max_total_llm_calls,
            "calls_by_phase": self.calls_by_phase,
            "steps_peak": self.peak_steps,
            "steps_limit": self._steps.limit,
            "subagents_peak": self.peak_subagents,
            "goals_peak": self.peak_goals,
        }


class _ChargeEachCall(BaseCallbackHandler):
    """Charges each model call of a runnable to a controller's budget (see ``runnable_call``)."""

    run_inline = True  # counting only: never blocks, and must raise in the caller's own context
    raise_error = True  # a spent budget stops the call

    def __init__(self, controller: ConcurrencyController, phase: str | None) -> None:
        self._controller = controller
        self._phase = phase

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self._controller._reserve(self._phase)

    def on_llm_start(self, serialized: Any, prompts: Any, **kwargs: Any) -> None:
        self._controller._reserve(self._phase)
