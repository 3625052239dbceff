"""The test chat models: ``RecordingChatModel`` records every call and renders its replies through
LangChain's parsers; ``ScriptedChatModel`` takes them from a script, ``FunctionChatModel`` from a
function (see the package docstring for what was weighed).
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from operator import itemgetter
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import JsonOutputParser, PydanticOutputParser
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable, RunnableMap, RunnablePassthrough
from langchain_core.runnables.config import ensure_config
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, PrivateAttr

from soothe_planner.errors import ScriptExhaustedError
from soothe_planner.testing.calls import Method, Reply, ScriptedCall
from soothe_planner.testing.rendering import (
    chunks,
    is_reply_function,
    render_object,
    render_text,
    run_awaitable,
    usage,
)

__all__ = ["FunctionChatModel", "RecordingChatModel", "ScriptedChatModel"]

_REQUEST_KEY = "scripted_request"


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
        if is_reply_function(reply):
            reply = reply(call)
            if inspect.isawaitable(reply):
                reply = run_awaitable(reply)
        return reply

    async def _resolve_async(self, reply: Reply, call: ScriptedCall) -> Reply:
        if is_reply_function(reply):
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
            message = render_object(reply, call)
        elif isinstance(reply, str):
            message = render_text(reply, call)
        else:
            raise TypeError(
                f"scripted reply #{call.index + 1} has unsupported type {type(reply).__name__}; "
                "use str, dict, a pydantic object, AIMessage, an exception or a callable"
            )
        if message.usage_metadata is None:
            message.usage_metadata = usage(call.messages, message)
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
        yield from chunks(self._render(reply, call))

    async def _astream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        call = self._record(messages, run_manager, kwargs)
        reply = await self._resolve_async(self._next_reply(call), call)
        for chunk in chunks(self._render(reply, call)):
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
