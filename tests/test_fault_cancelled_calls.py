"""A cancelled call whose provider work runs in a worker thread keeps its LLM slot until that work returns.

A model that implements only the sync ``_generate`` is run by LangChain in a worker thread for
``ainvoke``. Cancelling the task (a caller's timeout, a step timeout) cannot stop the thread: the
provider call goes on. If the slot were given back at the cancellation, the next call would run
beside it and the limit would be a fiction — four calls at once at a limit of one, directly and
through the planner's ``call_timeout_s`` retries. The model here blocks on an event and counts
how many of its calls are inside the provider at once.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
from soothe_planner.models import PlanContext, PlannerSettings
from soothe_planner.planner import LLMPlanner

GUARD_S = 10.0  # only guards against a hang


class BlockingSyncModel(BaseChatModel):
    """Sync-only: every call waits for ``gate``; ``peak`` is the most calls inside the provider at once."""

    _gate: threading.Event = PrivateAttr(default_factory=threading.Event)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    _inside: list[int] = PrivateAttr(default_factory=lambda: [0, 0, 0])  # now, peak, started

    @property
    def _llm_type(self) -> str:
        return "blocking-sync"

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        with self._lock:
            self._inside[0] += 1
            self._inside[2] += 1
            self._inside[1] = max(self._inside[1], self._inside[0])
        try:
            self._gate.wait(GUARD_S)
        finally:
            with self._lock:
                self._inside[0] -= 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok"))])

    def open_gate(self) -> None:
        self._gate.set()

    @property
    def now(self) -> int:
        return self._inside[0]

    @property
    def peak(self) -> int:
        return self._inside[1]

    @property
    def started(self) -> int:
        return self._inside[2]


async def _until(condition: Any, timeout: float = GUARD_S) -> bool:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.01)
    return True


async def test_cancelled_calls_keep_their_slot_until_the_worker_thread_returns() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    raw = BlockingSyncModel()
    model = controller.wrap_model(raw)
    first = asyncio.create_task(model.ainvoke("hi"))
    assert await _until(lambda: raw.now == 1)
    first.cancel()
    await asyncio.gather(first, return_exceptions=True)
    # the provider call goes on in its thread: its slot is still taken
    assert raw.now == 1 and controller.in_flight_llm_calls == 1
    later = [asyncio.create_task(model.ainvoke("hi")) for _ in range(3)]
    await asyncio.sleep(0.3)  # time enough for a freed slot to be taken
    assert raw.peak == 1 and raw.started == 1, "a call ran beside the cancelled one"
    for task in later[:2]:
        task.cancel()  # cancelled while waiting for the slot: they never reach the provider
    raw.open_gate()
    assert (await asyncio.wait_for(later[2], GUARD_S)).content == "ok"
    await asyncio.gather(*later[:2], return_exceptions=True)
    assert raw.peak == 1 and raw.started == 2
    assert await _until(lambda: controller.in_flight_llm_calls == 0), "a slot was never given back"
    assert controller.total_llm_calls == 2  # the cancelled-while-waiting calls were refunded


async def test_call_timeout_retries_never_run_beside_the_abandoned_call() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    raw = BlockingSyncModel()
    settings = PlannerSettings(call_timeout_s=0.2, transport_retries=3, transport_backoff_s=0.0)
    planner = LLMPlanner(raw, settings=settings, controller=controller)
    answer = asyncio.create_task(planner.answer("What is 2 + 2?", PlanContext()))
    await asyncio.sleep(1.2)  # past the first timeout and, before the fix, every retry's
    assert raw.peak == 1 and raw.started == 1, f"{raw.started} provider calls started, {raw.peak} at once"
    raw.open_gate()
    assert await asyncio.wait_for(answer, GUARD_S) == "ok"
    assert raw.peak == 1
    assert await _until(lambda: controller.in_flight_llm_calls == 0)


@pytest.mark.parametrize("limit", [1, 2])
async def test_slots_come_back_after_normal_sync_calls_in_threads(limit: int) -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=limit))
    raw = BlockingSyncModel()
    raw.open_gate()
    model = controller.wrap_model(raw)
    results = await asyncio.wait_for(asyncio.gather(*(model.ainvoke("x") for _ in range(6))), GUARD_S)
    assert [r.content for r in results] == ["ok"] * 6
    assert raw.peak <= limit and controller.in_flight_llm_calls == 0 and controller.total_llm_calls == 6
    # and from a plain thread, too
    assert (await asyncio.to_thread(model.invoke, "x")).content == "ok"
    assert controller.in_flight_llm_calls == 0 and controller.total_llm_calls == 7
