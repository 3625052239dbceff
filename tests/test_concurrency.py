"""The concurrency controller: every limit holds, 0 means unlimited, the budget is exact, no slot leaks."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage
from limits_support import GUARD_S, InFlight, slow_async_model, slow_sync_model
from pydantic import ValidationError

from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
from soothe_planner.errors import LLMBudgetExceeded
from soothe_planner.testing import ScriptedChatModel

# -- the policy ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field",
    [
        "max_parallel_goals",
        "max_parallel_steps",
        "max_parallel_subagents",
        "global_max_llm_calls",
        "max_total_llm_calls",
    ],
)
def test_negative_limit_is_rejected_naming_the_field(field: str) -> None:
    with pytest.raises(ValidationError) as info:
        ConcurrencyPolicy(**{field: -1})
    assert field in str(info.value)


def test_unknown_step_parallelism_is_rejected() -> None:
    with pytest.raises(ValidationError, match="step_parallelism"):
        ConcurrencyPolicy(step_parallelism="eager")


# -- the LLM-call limiter ------------------------------------------------------------------------


async def test_200_concurrent_calls_never_exceed_global_max_of_3() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=3))
    witness = InFlight()
    model = controller.wrap_model(slow_async_model(witness))

    replies = await asyncio.wait_for(
        asyncio.gather(*(model.ainvoke(f"q{i}") for i in range(200))), GUARD_S * 3
    )

    assert len(replies) == 200 and all(isinstance(r, AIMessage) for r in replies)
    assert witness.done == 200
    assert witness.max == 3  # measured inside the model
    assert controller.peak_llm_calls == 3
    assert controller.total_llm_calls == 200
    assert controller.in_flight_llm_calls == 0


async def test_zero_global_max_means_unlimited_not_disabled() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=0))
    witness = InFlight()
    model = controller.wrap_model(slow_async_model(witness, delay_s=0.01))

    await asyncio.wait_for(asyncio.gather(*(model.ainvoke("q") for _ in range(20))), GUARD_S)

    assert witness.done == 20
    assert controller.peak_llm_calls > 3
    assert witness.max == controller.peak_llm_calls


def test_sync_invokes_from_worker_threads_share_the_limit() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=2))
    witness = InFlight()
    model = controller.wrap_model(slow_sync_model(witness))

    with ThreadPoolExecutor(max_workers=8) as pool:
        replies = list(pool.map(lambda i: model.invoke(f"q{i}"), range(24)))

    assert len(replies) == 24
    assert witness.max == 2
    assert controller.peak_llm_calls == 2
    assert controller.total_llm_calls == 24


async def test_threads_and_coroutines_share_one_limiter() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=2))
    witness = InFlight()
    sync_model = controller.wrap_model(slow_sync_model(witness))
    async_model = controller.wrap_model(slow_async_model(witness))

    calls = [asyncio.to_thread(sync_model.invoke, "t") for _ in range(8)]
    calls += [async_model.ainvoke("a") for _ in range(8)]
    await asyncio.wait_for(asyncio.gather(*calls), GUARD_S)

    assert witness.done == 16
    assert witness.max <= 2
    assert controller.peak_llm_calls == 2
    assert controller.in_flight_llm_calls == 0


async def test_budget_raises_before_the_call_reaches_the_model() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(max_total_llm_calls=2))
    scripted = ScriptedChatModel(["a", "b", "c"])
    model = controller.wrap_model(scripted)

    await model.ainvoke("1")
    await model.ainvoke("2")
    with pytest.raises(LLMBudgetExceeded) as info:
        await model.ainvoke("3")

    assert len(scripted.calls) == 2  # the third call never reached the model
    assert scripted.remaining == 1
    assert info.value.limit == 2 and info.value.used == 2
    assert "max_total_llm_calls" in str(info.value)
    with pytest.raises(LLMBudgetExceeded):
        model.invoke("4")  # the sync path checks the same budget
    assert len(scripted.calls) == 2
    assert controller.in_flight_llm_calls == 0


async def test_failed_calls_count_against_the_budget() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(max_total_llm_calls=1))
    model = controller.wrap_model(ScriptedChatModel([TimeoutError("slow"), "late"]))

    with pytest.raises(TimeoutError):
        await model.ainvoke("q")
    with pytest.raises(LLMBudgetExceeded):
        await model.ainvoke("q")
    assert controller.in_flight_llm_calls == 0


# -- cancellation --------------------------------------------------------------------------------


async def test_cancelled_waiters_do_not_leak_slots_even_after_being_handed_one() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    assert await controller.acquire_llm_slot("holder")
    entered: list[int] = []

    async def waiter(i: int) -> None:
        async with controller.llm_call("waiter"):
            entered.append(i)

    tasks = [asyncio.create_task(waiter(i)) for i in range(5)]
    for _ in range(3):
        await asyncio.sleep(0)  # let every waiter queue up
    # Hand the slot to waiter 0 and cancel it before it can run: it must pass the slot on.
    controller.release_llm_slot()
    tasks[0].cancel()
    tasks[2].cancel()  # cancelled while still queued
    results = await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), GUARD_S)

    assert isinstance(results[0], asyncio.CancelledError) and isinstance(results[2], asyncio.CancelledError)
    assert sorted(entered) == [1, 3, 4]
    assert controller.in_flight_llm_calls == 0
    assert controller.peak_llm_calls == 1
    # The cancelled waiters never made a call: their reservations were refunded.
    assert controller.calls_by_phase == {"holder": 1, "waiter": 3}
    async with controller.llm_call():
        assert controller.in_flight_llm_calls == 1


# -- goals, steps, subagents ---------------------------------------------------------------------


async def _peak_of(enter: Any, n: int) -> None:
    async def one() -> None:
        async with enter():
            await asyncio.sleep(0.001)

    await asyncio.wait_for(asyncio.gather(*(one() for _ in range(n))), GUARD_S)


@pytest.mark.parametrize(
    ("parallelism", "max_steps", "expected_peak"),
    [("sequential", 5, 1), ("dependency", 2, 2), ("dependency", 0, 8), ("max", 2, 8)],
)
async def test_step_slots_follow_step_parallelism(
    parallelism: str, max_steps: int, expected_peak: int
) -> None:
    controller = ConcurrencyController(
        ConcurrencyPolicy(step_parallelism=parallelism, max_parallel_steps=max_steps)
    )
    await _peak_of(controller.step, 8)
    assert controller.peak_steps == expected_peak
    assert controller.in_flight_steps == 0


async def test_zero_goal_limit_means_unlimited_goals_and_subagents_are_capped() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(max_parallel_goals=0, max_parallel_subagents=2))
    await _peak_of(controller.goal, 4)
    await _peak_of(controller.subagent, 6)
    assert controller.peak_goals == 4
    assert controller.peak_subagents == 2
    assert controller.in_flight_goals == controller.in_flight_subagents == 0


async def test_reset_peaks_starts_a_new_measurement() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=0))
    await _peak_of(controller.llm_call, 5)
    assert controller.peak_llm_calls == 5
    controller.reset_peaks()
    assert controller.peak_llm_calls == 0
    async with controller.llm_call():
        pass
    assert controller.peak_llm_calls == 1
    assert controller.stats()["llm_total"] == 6


def test_llm_call_sync_honours_limit_and_budget_from_threads() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=2, max_total_llm_calls=10))
    witness = InFlight()
    refused: list[BaseException] = []

    def work() -> None:
        try:
            with controller.llm_call_sync("thread"):
                witness.enter()
                time.sleep(0.002)
                witness.exit()
        except LLMBudgetExceeded as exc:
            refused.append(exc)

    with ThreadPoolExecutor(max_workers=6) as pool:
        list(pool.map(lambda _: work(), range(14)))

    assert witness.max == 2 and witness.done == 10
    assert len(refused) == 4
    assert controller.calls_by_phase == {"thread": 10}


@settings(max_examples=25, deadline=None)
@given(
    limit=st.integers(min_value=1, max_value=4),
    n=st.integers(min_value=1, max_value=12),
    cancel=st.sets(st.integers(min_value=0, max_value=11)),
    data=st.data(),
)
def test_limit_holds_and_no_slot_leaks_under_random_cancellation(
    limit: int, n: int, cancel: set[int], data: st.DataObject
) -> None:
    delays = data.draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))

    async def scenario() -> None:
        controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=limit))
        witness = InFlight()

        async def one(i: int) -> None:
            async with controller.llm_call():
                witness.enter()
                try:
                    for _ in range(delays[i]):
                        await asyncio.sleep(0)
                finally:
                    witness.exit()

        tasks = [asyncio.create_task(one(i)) for i in range(n)]
        await asyncio.sleep(0)
        for i in cancel:
            if i < n:
                tasks[i].cancel()
        await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), GUARD_S)

        assert witness.max <= limit
        assert controller.peak_llm_calls <= limit
        assert controller.in_flight_llm_calls == 0
        assert controller.total_llm_calls == witness.done

    asyncio.run(scenario())


async def test_a_freed_slot_wakes_a_waiter_on_the_same_loop_without_an_extra_round() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    assert await controller.acquire_llm_slot()
    entered = asyncio.Event()

    async def waiter() -> None:
        async with controller.llm_call():
            entered.set()

    task = asyncio.create_task(waiter())
    await asyncio.sleep(0)  # it queues for the slot
    controller.release_llm_slot()
    await asyncio.sleep(0)  # one round: the waiter, already woken, runs before this task resumes

    assert entered.is_set()
    await asyncio.wait_for(task, GUARD_S)
    assert controller.in_flight_llm_calls == 0 and controller.total_llm_calls == 2


# -- one process, many runs ------------------------------------------------------------------------


async def test_runs_of_one_process_share_the_llm_cap_and_keep_their_own_budgets() -> None:
    process = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=2, max_total_llm_calls=5))
    runs = [process.for_run() for _ in range(3)]
    witness = InFlight()
    base = slow_async_model(witness)
    models = [run.wrap_model(base) for run in runs]

    await asyncio.wait_for(
        asyncio.gather(*(m.ainvoke(f"q{i}") for m in models for i in range(5))), GUARD_S * 3
    )

    assert witness.done == 15
    assert witness.max == 2  # three runs, one cap: measured inside the model
    assert [run.total_llm_calls for run in runs] == [5, 5, 5]  # each run spent its own budget
    with pytest.raises(LLMBudgetExceeded):
        await models[0].ainvoke("one too many")
    assert await runs[1].for_run().wrap_model(base).ainvoke("a fresh run") is not None
    assert process.in_flight_llm_calls == 0 and process.peak_llm_calls == 2
