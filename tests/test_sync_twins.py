"""The sync and async forms of the limiter give the same admissions and records on the same script.

The thread forms of the controller's LLM-slot methods and the sync provider methods of a limited
model are derived from the rules their async twins use (``controller._charged``/``_holding``,
``limited_model._Hold``); these tests drive both forms through one script — plain calls, a held
slot joined, a given-back slot, a failed wait, a spent budget — and compare every record, so a
change to one form that the other does not share shows up as a difference.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel

from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
from soothe_planner.concurrency.limited_model import PHASE_METADATA_KEY
from soothe_planner.concurrency.slots import HELD_LLM_SLOTS, SlotLease, Slots
from soothe_planner.errors import LLMBudgetExceeded
from soothe_planner.testing import FunctionChatModel, ScriptedCall


class WaitFailed(Exception):
    """A wait for a slot that ended without one (as a cancelled task or an interrupted thread does)."""


class FailingWaits(Slots):
    """Unlimited slots whose next ``fail`` waits raise ``WaitFailed``, in either form."""

    def __init__(self) -> None:
        super().__init__(0)
        self.fail = 0

    def _maybe_fail(self) -> None:
        if self.fail:
            self.fail -= 1
            raise WaitFailed

    async def acquire(self) -> None:
        self._maybe_fail()
        await super().acquire()

    def acquire_sync(self) -> None:
        self._maybe_fail()
        super().acquire_sync()


def _counters(controller: ConcurrencyController) -> tuple[int, dict[str, int], int, int]:
    return (
        controller.total_llm_calls,
        controller.calls_by_phase,
        controller.in_flight_llm_calls,
        controller._admission.in_flight,
    )


def _given_back(controller: ConcurrencyController) -> SlotLease:
    """A lease of ``controller`` already left: what a worker thread finds when its caller let go."""
    lease = controller.lease_llm_slot_sync("given-back")
    lease.leave()
    return lease


# -- the controller ------------------------------------------------------------------------------


class AsyncForm:
    def __init__(self, controller: ConcurrencyController) -> None:
        self.c = controller

    async def acquire(self, phase: str) -> bool:
        return await self.c.acquire_llm_slot(phase)

    async def lease(self, phase: str, *, counted: bool = False) -> SlotLease:
        return await self.c.lease_llm_slot(phase, counted=counted)

    def llm_call(self, phase: str) -> AbstractAsyncContextManager[None]:
        return self.c.llm_call(phase)


class ThreadForm(AsyncForm):
    """The thread forms, called straight from the test (the slots never make them wait)."""

    async def acquire(self, phase: str) -> bool:
        return self.c.acquire_llm_slot_sync(phase)

    async def lease(self, phase: str, *, counted: bool = False) -> SlotLease:
        return self.c.lease_llm_slot_sync(phase, counted=counted)

    @asynccontextmanager
    async def llm_call(self, phase: str) -> AsyncIterator[None]:
        with self.c.llm_call_sync(phase):
            yield


async def _controller_script(form_of: Callable[[ConcurrencyController], AsyncForm]) -> list[Any]:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=4, max_total_llm_calls=6))
    waits = FailingWaits()
    controller._llm = waits
    form = form_of(controller)
    records: list[Any] = []

    def note(what: str) -> None:
        records.append((what, *_counters(controller), controller.holds_llm_slot()))

    async def attempt(what: str, step: Awaitable[Any]) -> Any:
        try:
            result = await step
        except (WaitFailed, LLMBudgetExceeded) as exc:
            note(f"{what}: {type(exc).__name__}")
            return None
        note(f"{what}: {type(result).__name__} {result if isinstance(result, bool) else ''}")
        return result

    assert await attempt("acquire a", form.acquire("a"))
    controller.release_llm_slot()
    (await attempt("lease b", form.lease("b"))).leave()
    (await attempt("lease b counted", form.lease("b", counted=True))).leave()
    waits.fail = 1
    await attempt("lease c, the wait fails", form.lease("c"))
    waits.fail = 1
    await attempt("acquire c, the wait fails", form.acquire("c"))
    async with form.llm_call("d"):
        note("in d")
        async with form.llm_call("inner"):
            note("in d, inner")
        await attempt("acquire e in d", form.acquire("e"))
    token = HELD_LLM_SLOTS.set({controller.serial: _given_back(controller)})
    try:
        async with form.llm_call("g"):
            note("in g, over a given-back lease")
    finally:
        HELD_LLM_SLOTS.reset(token)
    (await attempt("lease h", form.lease("h"))).leave()
    await attempt("lease i, past the budget", form.lease("i"))
    note("end")
    return records


async def test_the_controllers_thread_forms_keep_the_same_books_as_its_async_forms() -> None:
    awaited = await _controller_script(AsyncForm)
    threaded = await _controller_script(ThreadForm)

    assert threaded == awaited
    by_step = {r[0]: r[1:] for r in awaited}
    assert by_step["lease b counted: SlotLease "][0] == 2  # taken without a charge
    assert by_step["lease c, the wait fails: WaitFailed"][0] == 2  # refunded
    assert by_step["in d, inner"][0] == 3 and by_step["in d, inner"][2] == 1  # re-entrant: shared
    assert by_step["acquire e in d: bool False"][0] == 3
    assert by_step["lease i, past the budget: LLMBudgetExceeded"][0] == 6
    assert by_step["end"] == (6, {"a": 1, "b": 1, "d": 1, "given-back": 1, "g": 1, "h": 1}, 0, 0, False)


# -- the limited model ---------------------------------------------------------------------------


def _limited() -> tuple[ConcurrencyController, ConcurrencyController, FailingWaits, BaseChatModel, list[Any]]:
    """A model limited by two controllers (the second with failing waits and a budget of 4)."""
    first = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=4))
    second = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=4, max_total_llm_calls=4))
    waits = FailingWaits()
    second._llm = waits
    seen: list[Any] = []

    def reply(call: ScriptedCall) -> str:
        held = HELD_LLM_SLOTS.get()
        seen.append((sorted(held) == sorted((first.serial, second.serial)), first.in_flight_llm_calls,
                     second.in_flight_llm_calls))
        return "ok"

    model = second.wrap_model(first.wrap_model(FunctionChatModel(reply)))
    return first, second, waits, model, seen


async def _call(form: str, model: BaseChatModel, phase: str) -> str:
    config: Any = {"metadata": {PHASE_METADATA_KEY: phase}}
    if form == "invoke":
        return str(model.invoke("q", config).content)
    if form == "ainvoke":
        return str((await model.ainvoke("q", config)).content)
    if form == "stream":
        return "".join(str(c.content) for c in model.stream("q", config))
    return "".join([str(c.content) async for c in model.astream("q", config)])


async def _model_script(form: str) -> list[Any]:
    first, second, waits, model, seen = _limited()
    records: list[Any] = []

    async def attempt(what: str, phase: str) -> None:
        try:
            outcome = await _call(form, model, phase)
        except (WaitFailed, LLMBudgetExceeded) as exc:
            outcome = type(exc).__name__
        records.append((what, outcome, _counters(first), _counters(second), list(seen)))
        seen.clear()

    await attempt("plain", "p1")
    with first.llm_call_sync("outer"):
        await attempt("the first's slot held", "p2")
    token = HELD_LLM_SLOTS.set({first.serial: _given_back(first)})
    try:
        await attempt("the first's slot given back", "p3")
    finally:
        HELD_LLM_SLOTS.reset(token)
    waits.fail = 1
    await attempt("the second's wait fails", "p4")
    await attempt("the last call of the budget", "p5")
    await attempt("past the budget", "p6")
    return records


@pytest.mark.parametrize("form", ["invoke", "stream", "astream"])
async def test_a_limited_models_every_form_keeps_the_same_books_as_ainvoke(form: str) -> None:
    awaited = await _model_script("ainvoke")

    assert await _model_script(form) == awaited
    by_step = {r[0]: r[1:] for r in awaited}
    assert by_step["the first's slot held"][3] == [(True, 1, 1)]  # joined: still the one slot
    assert by_step["the first's slot held"][1][1] == {"outer": 1, "p1": 1}  # ... charged once
    assert by_step["the first's slot given back"][1][1] == {"given-back": 1, "outer": 1, "p1": 1}
    assert by_step["the second's wait fails"][:2] == ("WaitFailed", (4, {"given-back": 1, "outer": 1, "p1": 1,
                                                                         "p4": 1}, 0, 0))
    assert by_step["past the budget"][0] == "LLMBudgetExceeded"
    assert by_step["past the budget"][2] == (4, {"p1": 1, "p2": 1, "p3": 1, "p5": 1}, 0, 0)
