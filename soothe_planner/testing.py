"""How do you test code that talks to a chat model without a model, through the real code path?

``ScriptedChatModel`` is a real ``BaseChatModel`` fed a script of replies. Structured output goes
through LangChain's own machinery: a reply given as a dict or a pydantic object is *rendered* as
what the caller's structured-output method expects from a provider — a tool call for
``function_calling`` and ``bind_tools``, JSON text for ``json_schema`` and ``json_mode`` — and is
then parsed by LangChain's production parsers. So a wrong field fails validation exactly where it
would with a real model, ``include_raw=True`` yields a real ``parsing_error``, and repair paths can
be tested with realistic garbage.

Reply kinds, in the order they are recognised:

- an exception instance: raised by the call (``httpx.ReadTimeout``, a rate-limit error, …);
- an ``AIMessage``: returned as is (copied), e.g. with hand-written ``tool_calls``;
- a pydantic object or a dict: rendered for the request (see above; a plain call gets JSON text;
  with several tools bound, a ``{"name": ..., "args": ...}`` dict or the model class names the tool);
- a ``str``: message text. A structured call gets it *raw*: JSON text for the JSON methods; for
  ``function_calling`` a tool call whose arguments are the string parsed as JSON when it is an
  object, else a message with that text and no tool call;
- a callable ``reply(call: ScriptedCall)`` (sync or async): its return value is the reply.

Every call is recorded in ``.calls`` as a ``ScriptedCall``. Calling past the end of the script
raises ``ScriptExhaustedError``: a test that makes more calls than it planned fails loudly rather
than looping. Token usage is reported as ``ceil(characters / 4)`` so tracing and benchmarks have
numbers to count. ``FunctionChatModel(fn)`` answers every call with ``fn(call)``, for dynamic
scripts (benchmarks, fault injection).

Both are ``RecordingChatModel``s — the recording and the rendering, with the source of replies
left to the subclass — and neither is the other. A function model used to be a scripted model
whose ``remaining`` raised and whose ``reset`` did nothing: code written against a
``ScriptedChatModel`` broke on it. ``remaining`` and ``reset`` now exist only where there is a
script; code that only reads ``.calls`` takes a ``RecordingChatModel``.

What was weighed: LangChain's stock fakes raise ``NotImplementedError`` for ``bind_tools`` and
``with_structured_output``, and mocks skip the parsers; both would leave the production path
untested. The JSON methods are built from LangChain's public parsers the way provider packages
build them, since ``BaseChatModel`` only implements ``function_calling``.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.runnables.config import ensure_config
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, PrivateAttr

from soothe_planner.errors import ScriptExhaustedError

__all__ = ["FunctionChatModel", "RecordingChatModel", "Reply", "ScriptedCall", "ScriptedChatModel"]

Reply = Any
"""One scripted reply: str | dict | BaseModel | AIMessage | BaseException | callable(call) -> reply."""

Method = Literal["function_calling", "json_schema", "json_mode", "tools"]

_REQUEST_KEY = "scripted_request"
_CHARS_PER_TOKEN = 4
_CHOICE_WORDS = {"any", "auto", "required", "none"}


@dataclass
class ScriptedCall:
    """One call the model received.

    ``method`` is the structured-output method (``function_calling``, ``json_schema``,
    ``json_mode``), ``"tools"`` for plain ``bind_tools``, or ``None`` for a plain call;
    ``schema_name`` names the requested schema; ``metadata`` is the call's ``RunnableConfig``
    metadata (for a streaming call, only what an enclosing chain or graph node passes down:
    LangChain gives ``_stream`` no run manager).
    """

    index: int
    messages: list[BaseMessage]
    schema_name: str | None = None
    method: Method | None = None
    tools: list[str] = field(default_factory=list)
    tool_choice: Any = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def last_text(self) -> str:
        """The text of the last message (usually the prompt's question)."""
        return self.messages[-1].text if self.messages else ""

    @property
    def prompt_text(self) -> str:
        """All message texts joined, for assertions about what the model was shown."""
        return "\n".join(m.text for m in self.messages)


class _CallLog:
    """Shared by copies of one model (``bind``, ``model_copy``, a limited copy): one log, one script."""

    def __init__(self, responses: Sequence[Reply] = ()) -> None:
        self.lock = threading.Lock()
        self.calls: list[ScriptedCall] = []
        self.responses = list(responses)
        self.position = 0


class RecordingChatModel(BaseChatModel):
    """A test chat model that records every call and renders replies through LangChain's parsers.

    Where the replies come from is the subclass's business (``_next_reply``): a script
    (``ScriptedChatModel``) or a function (``FunctionChatModel``).
    """

    model_name: str = "scripted"
    _state: _CallLog = PrivateAttr()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._state = _CallLog()

    @property
    def _llm_type(self) -> str:
        return "recording"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_name": self.model_name}

    @property
    def calls(self) -> list[ScriptedCall]:
        """Every call received so far, in order, by this model and its copies."""
        return self._state.calls

    def _next_reply(self, call: ScriptedCall) -> Reply:
        raise NotImplementedError(f"{type(self).__name__} does not say where its replies come from")

    def _record(
        self,
        messages: list[BaseMessage],
        run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None,
        kwargs: dict[str, Any],
    ) -> ScriptedCall:
        request = kwargs.pop(_REQUEST_KEY, None) or {}
        tools = [t["function"]["name"] for t in kwargs.get("tools") or [] if "function" in t]
        method: Method | None = request.get("method") or ("tools" if tools else None)
        if run_manager is not None:
            source = run_manager.metadata or {}
        else:
            # LangChain calls ``_stream`` without a run manager; inside a graph node or a chain the
            # enclosing config is still in the context.
            source = ensure_config(None).get("metadata") or {}
        metadata = {k: v for k, v in source.items() if not k.startswith(("ls_", "lc_"))}
        with self._state.lock:
            call = ScriptedCall(
                index=len(self._state.calls),
                messages=list(messages),
                schema_name=request.get("schema_name"),
                method=method,
                tools=tools,
                tool_choice=kwargs.get("tool_choice"),
                metadata=metadata,
            )
            self._state.calls.append(call)
        return call

    # -- resolving and rendering a reply -------------------------------------------------------

    def _resolve_sync(self, reply: Reply, call: ScriptedCall) -> Reply:
        if _is_reply_function(reply):
            reply = reply(call)
            if inspect.isawaitable(reply):
                reply = _run_awaitable(reply)
        return reply

    async def _resolve_async(self, reply: Reply, call: ScriptedCall) -> Reply:
        if _is_reply_function(reply):
            reply = reply(call)
            if inspect.isawaitable(reply):
                reply = await reply
        return reply

    def _render(self, reply: Reply, call: ScriptedCall) -> AIMessage:
        if isinstance(reply, BaseException):
            raise reply
        if isinstance(reply, AIMessage):
            message = reply.model_copy(deep=True)
        elif isinstance(reply, BaseModel | dict):
            message = _render_object(reply, call)
        elif isinstance(reply, str):
            message = _render_text(reply, call)
        else:
            raise TypeError(
                f"scripted reply #{call.index + 1} has unsupported type {type(reply).__name__}; "
                "use str, dict, a pydantic object, AIMessage, an exception or a callable"
            )
        if message.usage_metadata is None:
            message.usage_metadata = _usage(call.messages, message)
        message.response_metadata = {
            **message.response_metadata,
            "model_name": self.model_name,
            "finish_reason": "tool_calls" if message.tool_calls else "stop",
        }
        return message

    # -- BaseChatModel -------------------------------------------------------------------------

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call = self._record(messages, run_manager, kwargs)
        reply = self._resolve_sync(self._next_reply(call), call)
        return ChatResult(generations=[ChatGeneration(message=self._render(reply, call))])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        call = self._record(messages, run_manager, kwargs)
        reply = await self._resolve_async(self._next_reply(call), call)
        return ChatResult(generations=[ChatGeneration(message=self._render(reply, call))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        call = self._record(messages, run_manager, kwargs)
        reply = self._resolve_sync(self._next_reply(call), call)
        yield from _chunks(self._render(reply, call))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        call = self._record(messages, run_manager, kwargs)
        reply = await self._resolve_async(self._next_reply(call), call)
        for chunk in _chunks(self._render(reply, call)):
            yield chunk

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        structured = kwargs.get("ls_structured_output_format")
        request: dict[str, Any] = {"method": "tools"}
        if structured is not None:
            request = {"method": "function_calling", "schema_name": formatted[0]["function"]["name"]}
        return self.bind(tools=formatted, tool_choice=tool_choice, **{_REQUEST_KEY: request}, **kwargs)

    def with_structured_output(
        self,
        schema: dict[str, Any] | type | None,
        *,
        method: str = "function_calling",
        include_raw: bool = False,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        kwargs.pop("strict", None)
        if method == "function_calling":
            if schema is None:
                raise ValueError("method='function_calling' needs a schema to name the tool")
            return super().with_structured_output(schema, include_raw=include_raw, **kwargs)
        if method not in ("json_schema", "json_mode"):
            raise ValueError(
                f"structured output method {method!r} is not one of 'function_calling', "
                "'json_schema', 'json_mode'"
            )
        if kwargs:
            raise ValueError(f"unsupported with_structured_output arguments: {sorted(kwargs)}")
        if schema is None and method == "json_schema":
            raise ValueError("method='json_schema' needs a schema; use method='json_mode' for free-form JSON")
        # json_mode may go without a schema, as with provider models: the reply is any JSON object.
        tool = convert_to_openai_tool(schema) if schema is not None else None
        name = tool["function"]["name"] if tool is not None else None
        is_model = isinstance(schema, type) and issubclass(schema, BaseModel)
        parser: Runnable[Any, Any] = (
            PydanticOutputParser(pydantic_object=schema) if is_model else JsonOutputParser()
        )
        response_format: dict[str, Any] = (
            {"type": "json_object"}
            if tool is None or method == "json_mode"
            else {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": tool["function"]["parameters"]},
            }
        )
        llm = self.bind(
            response_format=response_format,
            ls_structured_output_format={"kwargs": {"method": method}, "schema": schema},
            **{_REQUEST_KEY: {"method": method, "schema_name": name}},
        )
        if not include_raw:
            return llm | parser
        parse = RunnablePassthrough.assign(parsed=itemgetter("raw") | parser, parsing_error=lambda _: None)
        give_up = RunnablePassthrough.assign(parsed=lambda _: None)
        return RunnableMap(raw=llm) | parse.with_fallbacks([give_up], exception_key="parsing_error")


class ScriptedChatModel(RecordingChatModel):
    """A chat model that answers from a script; see the module docstring for the reply kinds."""

    def __init__(self, responses: Sequence[Reply] = (), **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._state = _CallLog(responses)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    @property
    def remaining(self) -> int:
        """Replies not used yet."""
        with self._state.lock:
            return len(self._state.responses) - self._state.position

    def reset(self, responses: Sequence[Reply] = ()) -> None:
        """Start over with a new script and an empty call log."""
        with self._state.lock:
            self._state.responses = list(responses)
            self._state.position = 0
            self._state.calls.clear()

    def _next_reply(self, call: ScriptedCall) -> Reply:
        state = self._state
        with state.lock:
            if state.position >= len(state.responses):
                raise ScriptExhaustedError(
                    f"{type(self).__name__} got call #{call.index + 1} "
                    f"({call.method or 'plain'}{f' {call.schema_name}' if call.schema_name else ''}) "
                    f"but its script has only {len(state.responses)} replies; add replies to the script "
                    f"(last message: {call.last_text[:120]!r})"
                )
            reply = state.responses[state.position]
            state.position += 1
            return reply


class FunctionChatModel(RecordingChatModel):
    """A chat model that answers every call with ``fn(call)`` (sync or async); never runs out.

    It has no script, so it has no ``remaining`` and no ``reset``: it is not a ``ScriptedChatModel``.
    """

    _fn: Callable[[ScriptedCall], Reply | Awaitable[Reply]] = PrivateAttr()

    def __init__(self, fn: Callable[[ScriptedCall], Reply | Awaitable[Reply]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._fn = fn

    @property
    def _llm_type(self) -> str:
        return "scripted-function"

    def _next_reply(self, call: ScriptedCall) -> Reply:
        return self._fn


# -- rendering helpers ---------------------------------------------------------------------------


def _is_reply_function(reply: Reply) -> bool:
    # A pydantic class is callable too, but a class is never a reply.
    return callable(reply) and not isinstance(reply, type | BaseModel | BaseException | AIMessage)


def _run_awaitable(awaitable: Awaitable[Reply]) -> Reply:
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


def _render_object(reply: BaseModel | dict[str, Any], call: ScriptedCall) -> AIMessage:
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


def _render_text(text: str, call: ScriptedCall) -> AIMessage:
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


def _usage(messages: Sequence[BaseMessage], message: AIMessage) -> Any:
    input_tokens = _tokens(sum(len(m.text) for m in messages))
    out_chars = len(message.text) + sum(len(json.dumps(tc["args"])) for tc in message.tool_calls)
    output_tokens = _tokens(out_chars)
    return {
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "total_tokens": input_tokens + output_tokens,
    }


def _chunks(message: AIMessage) -> Iterator[ChatGenerationChunk]:
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
