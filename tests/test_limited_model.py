"""A wrapped model: every LangChain path to the provider takes exactly one LLM slot, and gives it back."""

from __future__ import annotations

import asyncio
import json
import warnings
from typing import Any

import httpx
import pytest
from langchain_core.caches import InMemoryCache
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from limits_support import GUARD_S
from pydantic import BaseModel

from soothe_planner.concurrency import (
    ConcurrencyController,
    ConcurrencyPolicy,
    limit_model,
)
from soothe_planner.concurrency.controller import ADMISSION_PER_LLM_SLOT
from soothe_planner.concurrency.limited_model import is_limited, limiting_controllers, unwrap_model
from soothe_planner.errors import ConfigError, LLMBudgetExceeded
from soothe_planner.testing import FunctionChatModel, ScriptedCall, ScriptedChatModel


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


# -- pacing a flood of calls ---------------------------------------------------------------------


class StartCounter(BaseCallbackHandler):
    """Counts calls that have begun LangChain's preparation (``on_chat_model_start``)."""

    def __init__(self) -> None:
        self.started = 0

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.started += 1


async def test_a_flood_of_calls_is_prepared_a_few_at_a_time() -> None:
    limit = 2
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=limit))
    counter = StartCounter()
    entered = 0
    most_waiting = 0

    async def reply(call: ScriptedCall) -> str:
        nonlocal entered, most_waiting
        entered += 1
        # Calls that began preparing but have not reached the model yet (this one has).
        most_waiting = max(most_waiting, counter.started - entered)
        await asyncio.sleep(0.001)
        return "ok"

    model = controller.wrap_model(FunctionChatModel(reply))
    config: Any = {"callbacks": [counter]}
    await asyncio.wait_for(asyncio.gather(*(model.ainvoke(f"q{i}", config) for i in range(40))), GUARD_S)

    assert entered == counter.started == 40
    assert controller.total_llm_calls == 40
    assert controller.peak_llm_calls == limit
    # Without pacing all 40 would begin before the first finished.
    assert 0 < most_waiting <= ADMISSION_PER_LLM_SLOT * limit


async def test_admission_places_come_back_on_every_way_a_call_ends() -> None:
    # One LLM slot, so two admission places: leaked places would hang the final flood.
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    cached = controller.wrap_model(FunctionChatModel(lambda call: "cached", cache=InMemoryCache()))
    failing = controller.wrap_model(ScriptedChatModel([RuntimeError("provider down")] * 2))
    slow = controller.wrap_model(FunctionChatModel(_slow_reply))

    await cached.ainvoke("same")
    await cached.ainvoke("same")  # a cache hit never reaches the provider call
    for _ in range(2):
        with pytest.raises(RuntimeError, match="provider down"):
            await failing.ainvoke("q")
    waiting = [asyncio.create_task(slow.ainvoke(f"w{i}")) for i in range(4)]
    await asyncio.sleep(0.005)  # w0 is in its model, w1 waits for the slot, w2 and w3 for a place
    for task in waiting[1:]:
        task.cancel()
    await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), GUARD_S)
    replies = await asyncio.wait_for(asyncio.gather(*(slow.ainvoke(f"f{i}") for i in range(6))), GUARD_S)

    assert [r.content for r in replies] == ["slow"] * 6
    assert controller.total_llm_calls == 1 + 2 + 1 + 6  # cache miss, failures, w0, the flood
    assert controller.in_flight_llm_calls == 0


async def test_calls_refused_by_the_budget_give_their_admission_place_back() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1, max_total_llm_calls=1))
    model = controller.wrap_model(FunctionChatModel(_slow_reply))

    await model.ainvoke("the one call")
    results = await asyncio.wait_for(
        asyncio.gather(*(model.ainvoke(f"q{i}") for i in range(5)), return_exceptions=True), GUARD_S
    )

    # Five refusals through two places: each refused call gave its place back.
    assert all(isinstance(r, LLMBudgetExceeded) for r in results)
    assert controller.total_llm_calls == 1


async def _slow_reply(call: ScriptedCall) -> str:
    await asyncio.sleep(0.01)
    return "slow"


async def test_a_call_made_while_another_is_being_prepared_does_not_wait_for_a_place() -> None:
    # One slot, two places: both places held by outer calls whose start callback makes an
    # inner call; if the inner call queued for a place, neither could ever finish.
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    inner = controller.wrap_model(FunctionChatModel(lambda call: "inner"))

    class CallsOnStart(AsyncCallbackHandler):
        async def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
            await inner.ainvoke("from a callback")

    outer = controller.wrap_model(FunctionChatModel(lambda call: "outer"))
    config: Any = {"callbacks": [CallsOnStart()]}
    replies = await asyncio.wait_for(
        asyncio.gather(*(outer.ainvoke(f"q{i}", config) for i in range(5))), GUARD_S
    )

    assert [r.content for r in replies] == ["outer"] * 5
    assert controller.total_llm_calls == 10

