"""The public test double: scripted replies go through LangChain's real structured-output path."""

from __future__ import annotations

import asyncio
import math
import socket
import threading
from typing import Any

import httpx
import openai
import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.tools import tool
from pydantic import BaseModel, Field, ValidationError
from typing_extensions import TypedDict

from soothe_planner.errors import ScriptExhaustedError
from soothe_planner.testing import FunctionChatModel, RecordingChatModel, ScriptedCall, ScriptedChatModel

METHODS = ["function_calling", "json_schema", "json_mode"]


class Verdict(BaseModel):
    status: str
    confidence: float = Field(ge=0, le=1)


class VerdictDict(TypedDict):
    status: str
    confidence: float


@pytest.mark.parametrize("method", METHODS)
def test_dict_reply_is_parsed_into_the_schema_by_each_method(method: str) -> None:
    reply = {"status": "done", "confidence": 0.9}
    model = ScriptedChatModel([reply])

    parsed = model.with_structured_output(Verdict, method=method).invoke("is it done?")

    assert parsed == Verdict(**reply)


@pytest.mark.parametrize("method", METHODS)
async def test_pydantic_reply_is_parsed_by_each_method_async(method: str) -> None:
    reply = Verdict(status="continue", confidence=0.25)
    model = ScriptedChatModel([reply])

    parsed = await model.with_structured_output(Verdict, method=method).ainvoke("q")

    assert parsed == reply


@pytest.mark.parametrize("method", METHODS)
def test_json_text_reply_is_parsed_like_a_provider_reply(method: str) -> None:
    model = ScriptedChatModel(['{"status": "replan", "confidence": 0.5}'])

    parsed = model.with_structured_output(Verdict, method=method).invoke("q")

    assert parsed == Verdict(status="replan", confidence=0.5)


@pytest.mark.parametrize("method", METHODS)
def test_typed_dict_schema_gives_a_plain_dict(method: str) -> None:
    model = ScriptedChatModel([{"status": "done", "confidence": 1.0}])

    parsed = model.with_structured_output(VerdictDict, method=method).invoke("q")

    assert parsed == {"status": "done", "confidence": 1.0}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize(
    "bad_reply",
    [{"status": "done", "confidence": 7}, {"confidence": 0.1}, "I think it is done!"],
    ids=["out-of-range", "missing-field", "prose"],
)
def test_invalid_reply_gives_parsing_error_with_include_raw(method: str, bad_reply: Any) -> None:
    model = ScriptedChatModel([bad_reply])

    result = model.with_structured_output(Verdict, method=method, include_raw=True).invoke("q")

    assert set(result) == {"raw", "parsed", "parsing_error"}
    assert result["parsed"] is None
    assert isinstance(result["raw"], AIMessage)
    # function_calling with prose yields no tool call at all: the parser returns None, no error.
    if not (method == "function_calling" and isinstance(bad_reply, str)):
        assert isinstance(result["parsing_error"], ValidationError | OutputParserException)


@pytest.mark.parametrize("method", METHODS)
def test_valid_reply_with_include_raw_has_no_parsing_error(method: str) -> None:
    model = ScriptedChatModel([{"status": "done", "confidence": 0.9}])

    result = model.with_structured_output(Verdict, method=method, include_raw=True).invoke("q")

    assert result["parsed"] == Verdict(status="done", confidence=0.9)
    assert result["parsing_error"] is None


@pytest.mark.parametrize("method", ["json_schema", "json_mode"])
def test_invalid_reply_without_include_raw_raises_from_the_parser(method: str) -> None:
    model = ScriptedChatModel(["{not json"])

    with pytest.raises(OutputParserException):
        model.with_structured_output(Verdict, method=method).invoke("q")


def test_unknown_structured_output_method_is_rejected() -> None:
    with pytest.raises(ValueError, match="'xml'"):
        ScriptedChatModel([]).with_structured_output(Verdict, method="xml")


def rate_limit_error() -> openai.RateLimitError:
    request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
    return openai.RateLimitError("slow down", response=httpx.Response(429, request=request), body=None)


@pytest.mark.parametrize(
    "error",
    [
        httpx.ReadTimeout("read timed out"),
        rate_limit_error(),
        TimeoutError("deadline"),
    ],
    ids=["httpx-timeout", "openai-rate-limit", "timeout"],
)
async def test_exception_replies_are_raised_sync_async_and_structured(error: BaseException) -> None:
    model = ScriptedChatModel([error, error, error, "recovered"])

    with pytest.raises(type(error)):
        model.invoke("q")
    with pytest.raises(type(error)):
        await model.ainvoke("q")
    with pytest.raises(type(error)):
        await model.with_structured_output(Verdict).ainvoke("q")
    assert (await model.ainvoke("q")).content == "recovered"


def test_running_past_the_script_raises_naming_its_length() -> None:
    model = ScriptedChatModel(["only", "two"])
    model.invoke("1")
    model.invoke("2")

    with pytest.raises(ScriptExhaustedError, match="only 2 replies") as info:
        model.invoke("three?")

    assert "call #3" in str(info.value)
    assert model.remaining == 0


async def test_running_past_the_script_raises_on_async_and_stream_paths() -> None:
    model = ScriptedChatModel([])
    with pytest.raises(ScriptExhaustedError):
        await model.ainvoke("q")
    with pytest.raises(ScriptExhaustedError):
        [c async for c in model.astream("q")]
    with pytest.raises(ScriptExhaustedError):
        list(model.stream("q"))


def test_calls_record_messages_schema_method_tools_and_metadata() -> None:
    @tool
    def search(query: str) -> str:
        """Search."""
        return query

    model = ScriptedChatModel([{"status": "a", "confidence": 0}] * 3 + [{"query": "x"}, "plain"])
    for method in METHODS:
        model.with_structured_output(Verdict, method=method).invoke(
            [SystemMessage("sys"), HumanMessage("assess")], config={"metadata": {"soothe_phase": "assess"}}
        )
    model.bind_tools([search]).invoke("find")
    model.invoke("hello")

    calls = model.calls
    assert [(c.method, c.schema_name) for c in calls] == [
        ("function_calling", "Verdict"),
        ("json_schema", "Verdict"),
        ("json_mode", "Verdict"),
        ("tools", None),
        (None, None),
    ]
    assert calls[0].tools == ["Verdict"] and calls[3].tools == ["search"] and calls[4].tools == []
    assert calls[0].metadata == {"soothe_phase": "assess"}
    assert [m.text for m in calls[1].messages] == ["sys", "assess"]
    assert calls[1].last_text == "assess"
    assert [c.index for c in calls] == [0, 1, 2, 3, 4]


def test_callable_reply_sees_the_call_and_its_result_is_rendered() -> None:
    def answer(call: ScriptedCall) -> dict[str, Any]:
        return {"status": call.last_text, "confidence": 0.5}

    model = ScriptedChatModel([answer])

    assert model.with_structured_output(Verdict).invoke("done") == Verdict(status="done", confidence=0.5)


async def test_async_callable_reply_is_awaited() -> None:
    async def answer(call: ScriptedCall) -> str:
        await asyncio.sleep(0)
        return f"echo {call.last_text}"

    model = ScriptedChatModel([answer, answer])

    assert (await model.ainvoke("a")).content == "echo a"
    assert (await asyncio.to_thread(model.invoke, "b")).content == "echo b"


def test_ai_message_reply_is_returned_as_is_with_its_tool_calls() -> None:
    scripted = AIMessage(content="", tool_calls=[{"name": "search", "args": {"query": "q"}, "id": "t1"}])
    model = ScriptedChatModel([scripted])

    message = model.invoke("q")

    assert message.tool_calls == scripted.tool_calls
    assert scripted.response_metadata == {}  # the script itself is not mutated


def test_bind_tools_picks_the_tool_named_by_reply_or_tool_choice() -> None:
    @tool
    def search(query: str) -> str:
        """Search."""
        return query

    @tool
    def fetch(url: str) -> str:
        """Fetch."""
        return url

    model = ScriptedChatModel([{"name": "fetch", "args": {"url": "u"}}, {"query": "q"}, {"url": "x"}])
    both = model.bind_tools([search, fetch])

    assert both.invoke("q").tool_calls[0]["name"] == "fetch"
    assert model.bind_tools([search, fetch], tool_choice="search").invoke("q").tool_calls[0]["args"] == {
        "query": "q"
    }
    with pytest.raises(ValueError, match="which of the tools"):
        both.invoke("q")


def test_text_streams_in_several_chunks_and_tool_calls_in_one() -> None:
    model = ScriptedChatModel(["a fairly long streamed answer", {"status": "done", "confidence": 1}])

    chunks = [c for c in model.stream("q") if c.content]
    assert len(chunks) >= 3
    assert "".join(str(c.content) for c in chunks) == "a fairly long streamed answer"

    tool_chunks = [c for c in model.bind_tools([Verdict]).stream("q") if c.tool_call_chunks]
    assert len(tool_chunks) == 1
    merged = tool_chunks[0]
    assert isinstance(merged, AIMessageChunk)
    assert merged.tool_calls[0]["args"] == {"status": "done", "confidence": 1}


def test_usage_metadata_approximates_four_characters_per_token() -> None:
    prompt = "x" * 10
    reply = "y" * 9
    model = ScriptedChatModel([reply, reply])

    message = model.invoke(prompt)
    streamed = None
    for chunk in model.stream(prompt):
        streamed = chunk if streamed is None else streamed + chunk

    expected = {"input_tokens": math.ceil(10 / 4), "output_tokens": math.ceil(9 / 4)}
    assert message.usage_metadata is not None and streamed is not None and streamed.usage_metadata is not None
    for usage in (message.usage_metadata, streamed.usage_metadata):
        assert usage["input_tokens"] == expected["input_tokens"]
        assert usage["output_tokens"] == expected["output_tokens"]
        assert usage["total_tokens"] == sum(expected.values())


def test_reset_replaces_the_script_and_clears_the_log() -> None:
    model = ScriptedChatModel(["a"])
    model.invoke("q")
    model.reset(["b", "c"])

    assert model.calls == [] and model.remaining == 2
    assert model.invoke("q").content == "b"


def test_bound_copies_share_the_script_and_the_call_log() -> None:
    model = ScriptedChatModel(["a", "b", "c"])

    model.bind(stop=["!"]).invoke("q")
    model.model_copy().invoke("q")

    assert len(model.calls) == 2 and model.remaining == 1


def test_script_is_consumed_exactly_once_under_threads() -> None:
    model = ScriptedChatModel([str(i) for i in range(40)])
    seen: list[str] = []
    lock = threading.Lock()

    def call() -> None:
        text = str(model.invoke("q").content)
        with lock:
            seen.append(text)

    threads = [threading.Thread(target=call) for _ in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert sorted(seen, key=int) == [str(i) for i in range(40)]
    assert model.remaining == 0


async def test_function_model_answers_every_call_and_never_runs_out() -> None:
    model = FunctionChatModel(lambda call: f"#{call.index}")

    replies = [(await model.ainvoke("q")).content for _ in range(5)]

    assert replies == ["#0", "#1", "#2", "#3", "#4"]
    assert len(model.calls) == 5


def test_a_function_model_does_not_take_on_the_script_contract() -> None:
    # whatever holds a ScriptedChatModel may ask how many replies remain and reset the script; a
    # function model has no script, so it is not one (it used to be, with a `remaining` that raised)
    model = FunctionChatModel(lambda call: "ok")
    assert not isinstance(model, ScriptedChatModel)
    assert not hasattr(model, "remaining") and not hasattr(model, "reset")
    scripted = ScriptedChatModel(["a", "b"])
    for double in (model, scripted):
        assert isinstance(double, RecordingChatModel)
        double.invoke("q")
        assert len(double.calls) == 1 and double.calls[0].last_text == "q"
    assert scripted.remaining == 1


def test_unsupported_reply_type_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="unsupported type int"):
        ScriptedChatModel([42]).invoke("q")


# -- the root conftest's isolation ---------------------------------------------------------------


def test_connecting_to_a_remote_host_is_blocked_naming_the_host() -> None:
    with pytest.raises(RuntimeError, match=r"10\.255\.255\.1"):
        socket.create_connection(("10.255.255.1", 443), timeout=0.1)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        with pytest.raises(RuntimeError, match=r"api\.openai\.com"):
            sock.connect(("api.openai.com", 443))
        with pytest.raises(RuntimeError, match=r"only use 127\.0\.0\.1"):
            sock.connect_ex(("192.0.2.1", 80))
    finally:
        sock.close()


def test_loopback_connections_are_allowed() -> None:
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        port = server.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            pass
        with socket.create_connection(("localhost", port), timeout=1):
            pass
    finally:
        server.close()


def test_tracing_keys_are_unset_and_strict_msgpack_is_on() -> None:
    import os

    assert not [k for k in os.environ if k.startswith("LANGFUSE_")]
    assert os.environ["LANGGRAPH_STRICT_MSGPACK"] == "true"


def test_streaming_call_inside_a_chain_records_the_enclosing_metadata() -> None:
    from langchain_core.runnables import RunnableLambda

    model = ScriptedChatModel(["streamed text here"])

    def node(question: str) -> str:
        return "".join(str(c.content) for c in model.stream(question))

    RunnableLambda(node).invoke("q", config={"metadata": {"soothe_phase": "answer"}})

    assert model.calls[0].metadata == {"soothe_phase": "answer"}


def test_json_mode_without_a_schema_returns_the_json_object() -> None:
    model = ScriptedChatModel([{"anything": [1, 2]}])

    assert model.with_structured_output(None, method="json_mode").invoke("q") == {"anything": [1, 2]}
    assert model.calls[0].method == "json_mode" and model.calls[0].schema_name is None
