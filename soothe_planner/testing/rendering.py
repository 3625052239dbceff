"""How is a scripted reply made into what a provider would have sent for the call?

A dict or a pydantic object becomes a tool call for ``function_calling`` and ``bind_tools`` (with
several tools bound, the reply names its tool) and JSON text for the JSON methods; text becomes a
message, or a tool call when a structured call's text is a JSON object; a reply may be a function
of the call, sync or async. Token usage is ``ceil(characters / 4)``, and a stream is the message
in chunks. See the package docstring for the reply kinds.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Awaitable, Iterator, Sequence
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGenerationChunk
from pydantic import BaseModel

from soothe_planner.testing.calls import Reply, ScriptedCall

__all__ = ["chunks", "is_reply_function", "render_object", "render_text", "run_awaitable", "usage"]

_CHARS_PER_TOKEN = 4
_CHOICE_WORDS = {"any", "auto", "required", "none"}


def is_reply_function(reply: Reply) -> bool:
    # A pydantic class is callable too, but a class is never a reply.
    return callable(reply) and not isinstance(reply, type | BaseModel | BaseException | AIMessage)


def run_awaitable(awaitable: Awaitable[Reply]) -> Reply:
    try:
        asyncio.get_running_loop()
    except RuntimeError:

        async def _await() -> Reply:
            return await awaitable

        return asyncio.run(_await())
    raise TypeError(
        "an async reply function was called from a sync model call on a thread running an event "
        "loop; call the model with ainvoke/astream, or give a sync reply function"
    )


def _as_jsonable(reply: BaseModel | dict[str, Any]) -> dict[str, Any]:
    return reply.model_dump(mode="json") if isinstance(reply, BaseModel) else reply


def _tool_call(name: str, args: dict[str, Any], call: ScriptedCall, n: int = 0) -> dict[str, Any]:
    return {"name": name, "args": args, "id": f"call_{call.index}_{n}", "type": "tool_call"}


def render_object(reply: BaseModel | dict[str, Any], call: ScriptedCall) -> AIMessage:
    if call.method == "function_calling":
        assert call.schema_name is not None
        return AIMessage(content="", tool_calls=[_tool_call(call.schema_name, _as_jsonable(reply), call)])
    if call.method == "tools":
        name, args = _pick_tool(reply, call)
        return AIMessage(content="", tool_calls=[_tool_call(name, args, call)])
    # JSON methods and plain calls (a prompt that asks for JSON) both get the JSON text.
    return AIMessage(content=json.dumps(_as_jsonable(reply), ensure_ascii=False))


def _pick_tool(reply: BaseModel | dict[str, Any], call: ScriptedCall) -> tuple[str, dict[str, Any]]:
    choice = call.tool_choice
    if isinstance(choice, dict):
        choice = (choice.get("function") or {}).get("name") or choice.get("name")
    if isinstance(choice, str) and choice not in _CHOICE_WORDS and choice in call.tools:
        return choice, _as_jsonable(reply)
    if isinstance(reply, BaseModel) and type(reply).__name__ in call.tools:
        return type(reply).__name__, _as_jsonable(reply)
    if isinstance(reply, dict) and set(reply) == {"name", "args"} and reply["name"] in call.tools:
        return str(reply["name"]), dict(reply["args"])
    if len(call.tools) == 1:
        return call.tools[0], _as_jsonable(reply)
    raise ValueError(
        f"scripted reply #{call.index + 1} does not say which of the tools {call.tools} to call; "
        'script {"name": <tool>, "args": {...}} or an AIMessage with tool_calls'
    )


def render_text(text: str, call: ScriptedCall) -> AIMessage:
    if call.method == "function_calling":
        assert call.schema_name is not None
        try:
            args = json.loads(text)
        except ValueError:
            args = None
        if isinstance(args, dict):
            return AIMessage(content="", tool_calls=[_tool_call(call.schema_name, args, call)])
    return AIMessage(content=text)


def _tokens(chars: int) -> int:
    return math.ceil(chars / _CHARS_PER_TOKEN)


def usage(messages: Sequence[BaseMessage], message: AIMessage) -> Any:
    input_tokens = _tokens(sum(len(m.text) for m in messages))
    out_chars = len(message.text) + sum(len(json.dumps(tc["args"])) for tc in message.tool_calls)
    output_tokens = _tokens(out_chars)
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


def chunks(message: AIMessage) -> Iterator[ChatGenerationChunk]:
    """Split a rendered reply the way providers stream: text in a few pieces, tool calls whole."""
    meta = {"response_metadata": message.response_metadata, "id": message.id}
    if message.tool_calls or not isinstance(message.content, str) or len(message.content) < 3:
        chunks = [
            tool_call_chunk(name=tc["name"], args=json.dumps(tc["args"]), id=tc["id"], index=i)
            for i, tc in enumerate(message.tool_calls)
        ]
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content=message.content,
                tool_call_chunks=chunks,
                usage_metadata=message.usage_metadata,
                **meta,
            )
        )
        return
    text = message.content
    size = math.ceil(len(text) / 3)
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content=piece,
                usage_metadata=message.usage_metadata if last else None,
                **(meta if last else {"id": message.id}),
            )
        )
