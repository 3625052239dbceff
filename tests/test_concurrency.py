"""The concurrency controller: every limit holds, 0 means unlimited, and no path leaks a slot."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import BaseModel, ValidationError

from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy, limit_model
from soothe_planner.errors import ConfigError, LLMBudgetExceeded
from soothe_planner.limited_model import is_limited, limiting_controllers, unwrap_model
from soothe_planner.testing import FunctionChatModel, ScriptedCall, ScriptedChatModel

# A bug in the limiter shows up as a hang; these bound every wait so it becomes a failure instead.
GUARD_S = 10.0


class InFlight:
    """Counts calls inside the model itself: an independent witness of the controller's numbers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.max = 0
        self.done = 0

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.max = max(self.max, self.now)

    def exit(self) -> None:
        with self.lock:
            self.now -= 1
            self.done += 1


def slow_async_model(witness: InFlight, delay_s: float = 0.003) -> FunctionChatModel:
    async def reply(call: ScriptedCall) -> str:
        witness.enter()
        try:
            # Varying sleeps make calls finish out of order, so hand-over is exercised.
            await asyncio.sleep(delay_s * (1 + call.index % 3) / 2)
            return f"reply {call.index}"
        finally:
            witness.exit()

    return FunctionChatModel(reply)


def slow_sync_model(witness: InFlight, delay_s: float = 0.002) -> FunctionChatModel:
    def reply(call: ScriptedCall) -> str:
        witness.enter()
        try:
            time.sleep(delay_s)
            return "ok"
        finally:
            witness.exit()

    return FunctionChatModel(reply)


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


class SyncOnlyModel(BaseChatModel):
    """Implements only ``_generate``: LangChain's ``ainvoke`` runs it in a worker thread."""

    @property
    def _llm_type(self) -> str:
        return "sync-only"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content="sync"))])


async def test_async_call_falling_back_to_sync_generate_takes_one_slot() -> None:
    # With a limit of 1, a second slot taken by the thread fallback would deadlock.
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    model = controller.wrap_model(SyncOnlyModel())

    replies = await asyncio.wait_for(asyncio.gather(*(model.ainvoke("q") for _ in range(5))), GUARD_S)

    assert [r.content for r in replies] == ["sync"] * 5
    assert controller.total_llm_calls == 5
    assert controller.peak_llm_calls == 1


async def test_async_stream_bridged_to_sync_stream_takes_one_slot() -> None:
    # ScriptedChatModel implements _astream itself; a class with only _stream is bridged by LangChain.
    class SyncStreamOnly(ScriptedChatModel):
        _astream = BaseChatModel._astream

    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    model = controller.wrap_model(SyncStreamOnly(["one two three four"] * 3))

    async def consume() -> str:
        return "".join([str(c.content) async for c in model.astream("q")])

    texts = await asyncio.wait_for(asyncio.gather(*(consume() for _ in range(3))), GUARD_S)

    assert texts == ["one two three four"] * 3
    assert controller.total_llm_calls == 3


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


def test_sync_stream_holds_its_slot_until_exhausted_or_closed() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    model = controller.wrap_model(ScriptedChatModel(["alpha beta gamma delta", "one two three"]))

    # LangChain adds an empty closing chunk after the provider's stream ended: not part of the call.
    seen = [controller.in_flight_llm_calls for chunk in model.stream("q") if chunk.content]
    assert len(seen) > 2 and set(seen) == {1}
    assert controller.in_flight_llm_calls == 0

    stream = model.stream("q")
    next(stream)
    assert controller.in_flight_llm_calls == 1
    stream.close()
    assert controller.in_flight_llm_calls == 0
    assert controller.total_llm_calls == 2


async def test_async_stream_holds_its_slot_until_exhausted_or_closed() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    model = controller.wrap_model(ScriptedChatModel(["alpha beta gamma delta", "one two three"]))

    seen = [controller.in_flight_llm_calls async for chunk in model.astream("q") if chunk.content]
    assert len(seen) > 2 and set(seen) == {1}
    assert controller.in_flight_llm_calls == 0

    stream = model.astream("q")
    await anext(stream)
    assert controller.in_flight_llm_calls == 1
    await stream.aclose()  # type: ignore[attr-defined]
    assert controller.in_flight_llm_calls == 0


async def test_calls_made_between_stream_chunks_take_their_own_slot() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=2))
    model = controller.wrap_model(ScriptedChatModel(["alpha beta gamma delta", "inner"]))

    inner_peak = 0
    async for _ in model.astream("q"):
        if not inner_peak:
            await model.ainvoke("while streaming")
            inner_peak = controller.peak_llm_calls
    assert inner_peak == 2
    assert controller.total_llm_calls == 2


class Answer(BaseModel):
    answer: str


@pytest.mark.parametrize("method", ["function_calling", "json_schema", "json_mode"])
async def test_structured_output_through_the_wrapper_counts_once_per_call(method: str) -> None:
    controller = ConcurrencyController()
    model = controller.wrap_model(ScriptedChatModel([{"answer": "a"}, {"answer": "b"}]))
    structured = model.with_structured_output(Answer, method=method)

    first = await structured.ainvoke("q")
    second = structured.invoke("q")

    assert (first, second) == (Answer(answer="a"), Answer(answer="b"))
    assert controller.total_llm_calls == 2


async def test_bind_tools_through_the_wrapper_counts_once_per_call() -> None:
    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return key

    controller = ConcurrencyController()
    model = controller.wrap_model(ScriptedChatModel([{"key": "x"}, "plain"]))
    bound = model.bind_tools([lookup])

    message = await bound.ainvoke("q")
    bound.invoke("q")

    assert message.tool_calls[0]["name"] == "lookup"
    assert controller.total_llm_calls == 2


def test_react_agent_over_a_wrapped_model_counts_every_model_turn() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    scripted = ScriptedChatModel([{"a": 1, "b": 2}, {"a": 3, "b": 4}, "the sums are 3 and 7"])
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the prebuilt agent is deprecated upstream, still supported
        from langgraph.prebuilt import create_react_agent

        agent = create_react_agent(controller.wrap_model(scripted), [add])

    result = agent.invoke({"messages": [("user", "add")]}, config={"metadata": {"soothe_phase": "execute"}})

    assert result["messages"][-1].content == "the sums are 3 and 7"
    assert controller.total_llm_calls == 3 == len(scripted.calls)
    assert controller.calls_by_phase == {"execute": 3}


def test_chat_openai_is_limited_for_every_structured_output_method() -> None:
    from langchain_openai import ChatOpenAI

    def reply(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        message: dict[str, Any] = {"role": "assistant", "content": '{"answer": "json"}'}
        if body.get("tools"):
            call = {
                "id": "c1",
                "type": "function",
                "function": {"name": "Answer", "arguments": '{"answer": "tool"}'},
            }
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return httpx.Response(
            200,
            json={
                "id": "r",
                "object": "chat.completion",
                "created": 0,
                "model": "m",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            },
        )

    openai_model = ChatOpenAI(
        model="gpt-test", api_key="test", http_client=httpx.Client(transport=httpx.MockTransport(reply))
    )
    controller = ConcurrencyController()
    model = controller.wrap_model(openai_model)

    assert isinstance(model, ChatOpenAI) and type(model).__name__ == "ChatOpenAI"
    results = [
        model.with_structured_output(Answer, method=m).invoke("q", config={"metadata": {"soothe_phase": m}})
        for m in ("function_calling", "json_schema", "json_mode")
    ]
    assert results == [Answer(answer="tool"), Answer(answer="json"), Answer(answer="json")]
    assert controller.calls_by_phase == {"function_calling": 1, "json_schema": 1, "json_mode": 1}
    openai_model.invoke("unwrapped")
    assert controller.total_llm_calls == 3  # the original stays unlimited


async def test_phase_is_taken_from_config_metadata_on_every_entry_point() -> None:
    controller = ConcurrencyController()
    model = controller.wrap_model(ScriptedChatModel(["x y z w"] * 6))

    def cfg(phase: str) -> Any:
        return {"metadata": {"soothe_phase": phase}}

    model.invoke("q", config=cfg("invoke"))
    await model.ainvoke("q", config=cfg("ainvoke"))
    list(model.stream("q", config=cfg("stream")))
    [c async for c in model.astream("q", config=cfg("astream"))]
    model.batch(["q"], config=cfg("batch"))
    model.invoke("q")

    assert controller.calls_by_phase == {
        "invoke": 1,
        "ainvoke": 1,
        "stream": 1,
        "astream": 1,
        "batch": 1,
        "unknown": 1,
    }


async def test_wrapping_twice_takes_one_slot_and_two_controllers_stack() -> None:
    run = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    own = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    scripted = ScriptedChatModel(["a", "b"])
    once = run.wrap_model(scripted)

    assert run.wrap_model(once) is once
    assert limit_model(once, run) is once
    both = own.wrap_model(once)
    assert limiting_controllers(both) == (run, own)

    await asyncio.wait_for(both.ainvoke("q"), GUARD_S)  # limit 1 each: a double slot would hang
    async with run.llm_call("outer"):
        await asyncio.wait_for(once.ainvoke("q"), GUARD_S)  # already inside a slot: no second one

    assert run.total_llm_calls == 2 and own.total_llm_calls == 1
    assert run.calls_by_phase == {"unknown": 1, "outer": 1}
    assert is_limited(both) and not is_limited(unwrap_model(both))
    assert len(scripted.calls) == 2  # copies share the script and the call log


def test_wrapping_something_that_is_not_a_chat_model_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="BaseChatModel"):
        ConcurrencyController().wrap_model(object())  # type: ignore[arg-type]


def test_copies_of_a_wrapped_model_stay_limited() -> None:
    controller = ConcurrencyController()
    model = controller.wrap_model(ScriptedChatModel(["a", "b"]))

    model.model_copy().invoke("q")
    model.bind(stop=["x"]).invoke("q")

    assert controller.total_llm_calls == 2


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


async def test_cancelling_wrapped_calls_mid_flight_frees_their_slots() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=2))
    release = asyncio.Event()

    async def reply(call: ScriptedCall) -> str:
        await release.wait()
        return "late"

    model = controller.wrap_model(FunctionChatModel(reply))
    tasks = [asyncio.create_task(model.ainvoke("q")) for _ in range(6)]
    while controller.in_flight_llm_calls < 2:
        await asyncio.sleep(0)
    for task in tasks[:4]:
        task.cancel()
    await asyncio.gather(*tasks[:4], return_exceptions=True)
    release.set()
    done = await asyncio.wait_for(asyncio.gather(*tasks[4:]), GUARD_S)

    assert [m.content for m in done] == ["late", "late"]
    assert controller.in_flight_llm_calls == 0


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


async def test_abandoned_async_stream_is_released_when_the_loop_finalises_it() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    model = controller.wrap_model(ScriptedChatModel(["alpha beta gamma delta", "next"]))

    async for _ in model.astream("q"):
        break  # no aclose(): Python's async-generator finalizer closes it on the loop
    for _ in range(100):
        if controller.in_flight_llm_calls == 0:
            break
        await asyncio.sleep(0)

    assert controller.in_flight_llm_calls == 0
    assert (await asyncio.wait_for(model.ainvoke("q"), GUARD_S)).content == "next"


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
