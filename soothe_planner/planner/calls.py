"""How one planner question gets a usable answer out of any chat model — or an honest failure.

Every phase (assess, generate, revise, reflect, continuation, intake) goes through ``Caller``:

1. **Structured output** with the configured method, ``include_raw=True`` so a failure still
   leaves us the model's text. ``auto`` picks ``function_calling`` for ``ChatOpenAI`` pointed at
   a non-OpenAI ``base_url`` (local servers such as llama.cpp answer ``json_schema`` with HTTP 500)
   and for every non-OpenAI model; ``json_schema`` for ``ChatOpenAI`` on the OpenAI API.
2. **Salvage**: when that output does not parse, the raw tool-call arguments or content go
   through the lenient parser (``parsing.py``) — no extra call.
3. **One raw call**, unstructured, parsed by the lenient parser — for models or servers whose
   structured output is broken rather than merely wrong.
4. **Bounded re-asks** (``settings.retries``) on a copy of the conversation, each showing the model
   its failed output and the exact error. A well-formed answer that broke a rule (a cycle, an
   unknown step) is re-asked in structured mode and skips step 3: the format worked, the content
   did not.

Transport errors (timeouts, connection errors, rate limits, 5xx) are a different failure: they
are retried with exponential backoff on their own budget, never mixed with re-asks, and
``ValueError``/``TypeError``/``KeyError`` are never retried. When the transport stays down the
call fails at once — re-asking a dead server is pointless. Errors this package raises on purpose
(a spent call budget, an exhausted test script) propagate untouched.

Every fallback is logged on ``soothe_planner.planner`` and counted in ``stats``; nothing is
swallowed. Every call takes one slot from the ``ConcurrencyController`` (here, not through a
wrapped model; the slot is re-entrant, so a model the same controller wrapped takes no second one)
and carries its phase in the run config for tracing: ``run_name`` and a tag are the phase, metadata
holds ``soothe_phase``, ``thread_id`` and ``iteration``. The fallback calls of every phase are named
``plan-raw`` and ``plan-reask``, with the phase they serve in ``soothe_parent_phase``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel, ValidationError

from soothe_planner.concurrency import ConcurrencyController
from soothe_planner.errors import GenerationAttempt, PlanGenerationError, PlannerError, PlanParseError
from soothe_planner.models import PlannerSettings
from soothe_planner.planner.output_caps import OutputCaps
from soothe_planner.planner.prompts import escape_data, template, trim_text
from soothe_planner.planner.prompts.profiles import schema_for

__all__ = ["Caller", "Tally", "counting_calls", "is_transport_error", "raw_text_of", "resolve_method"]

logger = logging.getLogger("soothe_planner.planner")

R = TypeVar("R")
Method = Literal["json_schema", "function_calling", "json_mode"]
_OPENAI_DEFAULT_BASES = {"", "https://api.openai.com/v1", "https://api.openai.com/v1/"}
_REASK_OUTPUT_CHARS = 4000
_MAX_BOUND = 32


def _transport_types() -> tuple[type[BaseException], ...]:
    kinds: list[type[BaseException]] = [TimeoutError, ConnectionError]
    try:
        import httpx

        kinds += [httpx.TransportError]  # connect/read/write errors and httpx timeouts
    except ImportError:  # pragma: no cover - httpx ships with langchain-openai
        pass
    try:
        import openai

        kinds += [openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError]
    except ImportError:  # pragma: no cover
        pass
    return tuple(kinds)


_TRANSPORT = _transport_types()


def is_transport_error(exc: BaseException) -> bool:
    """A failure of the wire, worth retrying the same request — never a bug in the request."""
    if isinstance(exc, ValueError | TypeError | KeyError):
        return False
    return isinstance(exc, _TRANSPORT)


def resolve_method(model: Any, configured: str) -> Method:
    """The structured-output method for ``model`` (see the module docstring for ``auto``)."""
    if configured != "auto":
        return configured  # type: ignore[return-value]
    try:
        from langchain_openai import ChatOpenAI
    except ImportError:  # pragma: no cover
        return "function_calling"
    # a controller-limited model is a subclass of its own class, so isinstance still holds
    if isinstance(model, ChatOpenAI):
        base = str(getattr(model, "openai_api_base", None) or "")
        return "json_schema" if base in _OPENAI_DEFAULT_BASES else "function_calling"
    return "function_calling"


def raw_text_of(message: Any) -> str:
    """What the model wrote: first tool call's arguments (as JSON) or the message text."""
    if not isinstance(message, AIMessage):
        return "" if message is None else str(message)
    if message.tool_calls:
        return json.dumps(message.tool_calls[0].get("args", {}), ensure_ascii=False)
    if message.invalid_tool_calls:
        return str(message.invalid_tool_calls[0].get("args") or "")
    return message.text if isinstance(message.text, str) else str(message.content)


def _text_in_error(exc: Exception) -> str:
    """The model text a parsing error carries, if any (pydantic keeps the input it rejected)."""
    if isinstance(exc, OutputParserException) and exc.llm_output:
        return str(exc.llm_output)
    if isinstance(exc, ValidationError):
        for error in exc.errors():
            if error.get("type") == "json_invalid" or error.get("loc") == ():
                value = error.get("input")
                if isinstance(value, str):
                    return value
    return ""


def _precompute_tracing_schema(runnable: Any) -> None:
    """Give the binding's tracing metadata the JSON schema instead of the pydantic class.

    ``with_structured_output`` binds ``ls_structured_output_format={"schema": <class>, ...}``, and
    LangChain turns that class into a JSON schema again on every call, only to attach it to trace
    metadata (several ms a call for a plan schema). The schema of a class never changes, so it is
    converted once here; LangChain's per-call conversion of an already-converted schema is cheap.
    Only the layout ``with_structured_output(include_raw=True)`` builds is touched (a sequence
    whose first step maps ``raw`` to the bound model); anything else is left exactly as it is.
    """
    from langchain_core.utils.function_calling import convert_to_json_schema

    first = getattr(runnable, "first", None)
    bound = getattr(first, "steps__", {}).get("raw") if first is not None else None
    kwargs = getattr(bound, "kwargs", None)
    if not isinstance(kwargs, dict):
        return
    fmt = kwargs.get("ls_structured_output_format")
    if not isinstance(fmt, dict) or not (isinstance(fmt.get("schema"), type) and issubclass(fmt["schema"], BaseModel)):
        return
    try:
        schema = convert_to_json_schema(fmt["schema"])
    except ValueError:  # LangChain would have dropped the metadata on this error too
        return
    kwargs["ls_structured_output_format"] = {**fmt, "schema": schema}


@dataclass
class Tally:
    """LLM calls made on behalf of one public operation (``PlanResult.llm_calls``)."""

    calls: int = 0


_OUTER_TALLY: ContextVar[Tally | None] = ContextVar("soothe_outer_tally", default=None)


@contextmanager
def counting_calls() -> Iterator[Tally]:
    """Count every request made in this context (per task, so concurrent runs do not mix)."""
    tally = Tally()
    token = _OUTER_TALLY.set(tally)
    try:
        yield tally
    finally:
        _OUTER_TALLY.reset(token)


@dataclass
class Outcome(Generic[R]):
    value: R
    route: str  # structured | salvaged | raw | reask
    raw_text: str
    attempts: list[GenerationAttempt]


class _Failed(Exception):
    """Internal: one attempt did not yield a valid value."""

    def __init__(self, kind: str, error: str, raw_text: str, *, semantic: bool, error_type: str) -> None:
        super().__init__(error)
        self.attempt_kind = kind
        self.error = error
        self.raw_text = raw_text
        self.semantic = semantic  # the output parsed; its content broke a rule
        self.error_type = error_type


class Caller:
    """One robust call path for every phase. Holds the settings, the controller and the stats."""

    def __init__(self, settings: PlannerSettings, controller: ConcurrencyController, stats: Counter[str]) -> None:
        self.settings = settings
        self.controller = controller
        self.stats = stats
        # with_structured_output derives a JSON schema from the pydantic class on every call (a few
        # ms); the bound runnable is the same for a given model, schema and method, so keep it. The
        # model is held in the value so its id cannot be reused while the entry lives.
        self._bound: dict[tuple[int, type[BaseModel], str], tuple[BaseChatModel, Runnable[Any, Any]]] = {}
        self.caps = OutputCaps(settings.max_output_tokens_per_call)

    def bound(self, model: BaseChatModel, schema: type[BaseModel], method: Method) -> Runnable[Any, Any]:
        """``model.with_structured_output(schema, method=..., include_raw=True)``, built once."""
        key = (id(model), schema, method)
        hit = self._bound.get(key)
        if hit is not None and hit[0] is model:
            return hit[1]
        runnable = model.with_structured_output(schema, method=method, include_raw=True)
        _precompute_tracing_schema(runnable)
        if len(self._bound) >= _MAX_BOUND:  # many short-lived models through one planner: start over
            self._bound.clear()
        self._bound[key] = (model, runnable)
        return runnable

    # ------------------------------------------------------------------ the wire

    def run_config(self, phase: str, *, thread_id: str | None, iteration: int | None, parent: str | None = None) -> RunnableConfig:
        metadata: dict[str, Any] = {"soothe_phase": phase, "thread_id": thread_id, "iteration": iteration}
        if parent and parent != phase:
            metadata["soothe_parent_phase"] = parent
        return RunnableConfig(run_name=phase, tags=["soothe", phase], metadata=metadata)

    async def invoke(
        self,
        runnable: Runnable[Any, Any],
        messages: Sequence[BaseMessage],
        *,
        phase: str,
        tally: Tally,
        thread_id: str | None,
        iteration: int | None,
        parent: str | None = None,
    ) -> Any:
        """One request with its slot, timeout and transport retries."""
        config = self.run_config(phase, thread_id=thread_id, iteration=iteration, parent=parent)
        retries = self.settings.transport_retries
        for attempt in range(retries + 1):
            try:
                async with self.controller.llm_call(phase):
                    tally.calls += 1
                    outer = _OUTER_TALLY.get()
                    if outer is not None:
                        outer.calls += 1
                    return await asyncio.wait_for(
                        runnable.ainvoke(list(messages), config=config), timeout=self.settings.call_timeout_s
                    )
            except PlannerError:
                raise
            except Exception as exc:
                if not is_transport_error(exc) or attempt >= retries:
                    raise
                delay = self.settings.transport_backoff_s * (2**attempt)
                self.stats["transport_retry"] += 1
                logger.warning(
                    "%s: transport error %s: %s; retry %d of %d in %.2fs",
                    phase, type(exc).__name__, exc, attempt + 1, retries, delay,
                )
                await asyncio.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover

    async def text(
        self, model: BaseChatModel, messages: Sequence[BaseMessage], *, phase: str, tally: Tally,
        thread_id: str | None = None, iteration: int | None = None,
    ) -> str:
        """A plain-text answer (no schema); transport failures raise ``PlanGenerationError``."""
        model = self.caps.model_for(model, phase)
        try:
            message = await self.invoke(model, messages, phase=phase, tally=tally, thread_id=thread_id, iteration=iteration)
        except PlannerError:
            raise
        except Exception as exc:
            attempt = GenerationAttempt(phase=phase, kind="raw", error=f"{type(exc).__name__}: {exc}",
                                        error_type="transport" if is_transport_error(exc) else type(exc).__name__)
            raise PlanGenerationError(phase, [attempt]) from exc
        return raw_text_of(message)

    # ------------------------------------------------------------------ the robust structured call

    async def structured(
        self,
        model: BaseChatModel,
        schema: type[BaseModel],
        messages: Sequence[BaseMessage],
        *,
        phase: str,
        convert: Callable[[BaseModel], R],
        parse_text: Callable[[str], R],
        validate: Callable[[R], list[str]] | None = None,
        tally: Tally,
        thread_id: str | None = None,
        iteration: int | None = None,
    ) -> Outcome[R]:
        """A valid ``R`` from the model, through the ladder in the module docstring.

        ``convert`` turns a structured answer into ``R``; ``parse_text`` does the same from text
        (lenient; raises ``PlanParseError``); ``validate`` returns rule violations (re-asked).
        Raises ``PlanGenerationError`` carrying every attempt.
        """
        base = list(messages)  # re-asks extend copies; the caller's list is never touched
        method = resolve_method(model, self.settings.structured_output_method)
        model = self.caps.model_for(model, phase)
        schema = schema_for(schema, self.settings.prompt_profile)
        attempts: list[GenerationAttempt] = []
        check = validate or (lambda _v: [])
        ctx = {"tally": tally, "thread_id": thread_id, "iteration": iteration, "parent": phase}

        def accept(value: R, kind: str, raw: str) -> R:
            errors = check(value)
            if errors:
                raise _Failed(kind, "; ".join(errors), raw, semantic=True, error_type="validation")
            return value

        def from_text(text: str, kind: str) -> R:
            try:
                value = parse_text(text)
            except PlanParseError as exc:
                raise _Failed(kind, str(exc.reason), text, semantic=False, error_type="parse") from exc
            except Exception as exc:  # a pydantic error from the wire model, etc.
                raise _Failed(kind, f"{type(exc).__name__}: {exc}", text, semantic=False, error_type="parse") from exc
            return accept(value, kind, text)

        async def structured_attempt(kind: str, msgs: list[BaseMessage], call_phase: str) -> tuple[R, str]:
            try:
                runnable = self.bound(model, schema, method)
            except (NotImplementedError, ValueError, TypeError) as exc:
                raise _Failed(kind, f"structured output unavailable: {exc}", "", semantic=False,
                              error_type="unsupported") from exc
            try:
                out = await self.invoke(runnable, msgs, phase=call_phase, **ctx)  # type: ignore[arg-type]
            except PlannerError:
                raise
            except Exception as exc:
                if is_transport_error(exc):
                    raise
                if not isinstance(exc, ValidationError | OutputParserException):
                    raise _Failed(kind, f"{type(exc).__name__}: {exc}", "", semantic=False,
                                  error_type="unsupported") from exc
                # some clients validate inside the call (openai's parse() for json_schema): the
                # format worked, the content did not — the text is in the error, salvage it
                out = {"raw": None, "parsed": None, "parsing_error": exc, "text": _text_in_error(exc)}
            raw = out.get("text") or raw_text_of(out.get("raw")) if isinstance(out, dict) else ""
            parsed = out.get("parsed") if isinstance(out, dict) else out
            perr = out.get("parsing_error") if isinstance(out, dict) else None
            if perr is None and isinstance(parsed, BaseModel):
                try:
                    value = convert(parsed)
                except PlanParseError as exc:  # the repairs refused it (a cycle, a duplicate id, ...)
                    raise _Failed(kind, str(exc.reason), raw, semantic=True, error_type="validation") from exc
                except Exception as exc:  # the wire object does not make a runtime one: a content error
                    raise _Failed(kind, f"{type(exc).__name__}: {exc}", raw, semantic=True,
                                  error_type="validation") from exc
                return accept(value, kind, raw), raw
            reason = f"{type(perr).__name__}: {perr}" if perr is not None else "the model returned no structured answer"
            attempts.append(GenerationAttempt(phase=phase, kind="structured" if kind == "structured" else "reask",
                                              error=reason, raw_text=raw, error_type="parse"))
            if not raw.strip():
                raise _Failed("salvage", "nothing to salvage: the model wrote no text", raw, semantic=False,
                              error_type="parse")
            value = from_text(raw, "salvage")
            self.stats["salvaged"] += 1
            logger.info("%s: structured output failed to parse (%s); salvaged from the raw output", phase, reason)
            return value, raw

        async def raw_attempt(kind: str, msgs: list[BaseMessage], call_phase: str) -> tuple[R, str]:
            try:
                message = await self.invoke(model, msgs, phase=call_phase, **ctx)  # type: ignore[arg-type]
            except PlannerError:
                raise
            except Exception as exc:
                if is_transport_error(exc):
                    raise
                raise _Failed(kind, f"{type(exc).__name__}: {exc}", "", semantic=False, error_type="error") from exc
            raw = raw_text_of(message)
            return from_text(raw, kind), raw

        def record(f: _Failed) -> None:
            attempts.append(GenerationAttempt(phase=phase, kind=f.attempt_kind, error=f.error,  # type: ignore[arg-type]
                                              raw_text=f.raw_text, error_type=f.error_type))
            logger.warning("%s: %s attempt failed (%s): %s", phase, f.attempt_kind, f.error_type, f.error)

        def transport_failure(exc: Exception, kind: str) -> PlanGenerationError:
            attempts.append(GenerationAttempt(phase=phase, kind=kind, error=f"{type(exc).__name__}: {exc}",  # type: ignore[arg-type]
                                              error_type="transport"))
            self.stats["failed"] += 1
            logger.error("%s: transport failed after %d retries: %s", phase, self.settings.transport_retries, exc)
            return PlanGenerationError(phase, attempts)

        async def guarded(kind: str, call: Awaitable[tuple[R, str]]) -> tuple[R, str] | _Failed:
            """One attempt: its value, or the failure to record. Transport ends the phase; bugs propagate."""
            try:
                return await call
            except _Failed as f:
                return f
            except PlannerError:
                raise
            except Exception as exc:
                if not is_transport_error(exc):
                    raise  # a bug in a validator or converter: never disguised as a model failure
                raise transport_failure(exc, kind) from exc

        reask_mode = "structured"
        got = await guarded("structured", structured_attempt("structured", base, phase))
        if not isinstance(got, _Failed):
            value, raw = got
            route = "salvaged" if attempts else "structured"
            if route == "structured":
                self.stats["structured_ok"] += 1
            return Outcome(value, route, raw, attempts)
        record(got)
        last = got

        if not last.semantic:
            # the format failed, not the content: one unstructured call, read by the lenient parser
            if last.error_type == "unsupported":
                reask_mode = "raw"
            self.stats["raw_fallback"] += 1
            logger.warning("%s: falling back to one raw call (%s)", phase, last.error)
            got = await guarded("raw", raw_attempt("raw", base, "plan-raw"))
            if not isinstance(got, _Failed):
                value, raw = got
                self.stats["raw_ok"] += 1
                return Outcome(value, "raw", raw, attempts)
            record(got)
            last = got

        for n in range(self.settings.retries):
            shown = trim_text(last.raw_text or "(empty)", _REASK_OUTPUT_CHARS)
            reask = template("reask").substitute(output=escape_data(shown), error=last.error)
            msgs = [*base, HumanMessage(content=reask)]
            self.stats["reask"] += 1
            logger.warning("%s: re-ask %d of %d after: %s", phase, n + 1, self.settings.retries, last.error)
            attempt = structured_attempt if reask_mode == "structured" else raw_attempt
            got = await guarded("reask", attempt("reask", msgs, "plan-reask"))
            if not isinstance(got, _Failed):
                value, raw = got
                self.stats["reask_ok"] += 1
                return Outcome(value, "reask", raw, attempts)
            got.attempt_kind = "reask" if got.attempt_kind != "salvage" else "salvage"
            record(got)
            last = got
        self.stats["failed"] += 1
        logger.error("%s: no usable answer after %d attempt(s)", phase, len(attempts))
        raise PlanGenerationError(phase, attempts)
