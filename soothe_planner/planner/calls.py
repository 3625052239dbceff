"""How one planner question gets a usable answer out of any chat model — or an honest failure.

Every phase (assess, generate, revise, reflect, continuation, intake) goes through ``Caller``. A
question with a schema climbs the repair ladder (``ladder.py``: structured output, salvage, one
raw call, bounded re-asks); a plain-text question is one request. ``Caller`` owns the wire:

- **The method.** ``auto`` picks ``function_calling`` for ``ChatOpenAI`` pointed at a non-OpenAI
  ``base_url`` (local servers such as llama.cpp answer ``json_schema`` with HTTP 500) and for every
  non-OpenAI model; ``json_schema`` for ``ChatOpenAI`` on the OpenAI API. The bound
  structured-output runnable is built once per (model, schema, method).
- **One slot per request.** Every request takes one slot from the ``ConcurrencyController`` (here,
  not through a wrapped model; the slot is re-entrant, so a model the same controller wrapped takes
  no second one), holds it for that request only, and has its own timeout.
- **Transport retries.** Timeouts, connection errors, rate limits and 5xx repeat the same request
  on their own budget (``transport.py``: tenacity, exponential backoff with jitter), never mixed
  with re-asks; the slot is given back while waiting. ``ValueError``/``TypeError``/``KeyError``
  are never retried, and errors this package raises on purpose (a spent call budget, an exhausted
  test script) propagate untouched.
- **Tracing.** Each request carries its phase in the run config: ``run_name`` and a tag are the
  phase, metadata holds ``soothe_phase``, ``thread_id`` and ``iteration``. The fallback calls of
  every phase are named ``plan-raw`` and ``plan-reask``, with the phase they serve in
  ``soothe_parent_phase``.

Every fallback and retry is logged on ``soothe_planner.planner`` and counted in ``stats``
(``PlannerStats``); nothing is swallowed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import BaseModel
from tenacity import RetryCallState

from soothe_planner.concurrency import ConcurrencyController
from soothe_planner.errors import GenerationAttempt, PlanGenerationError, PlannerError
from soothe_planner.models import PlannerSettings
from soothe_planner.planner.ladder import Ladder, Outcome, raw_text_of
from soothe_planner.planner.output_caps import OutputCaps
from soothe_planner.planner.prompts.profiles import schema_for
from soothe_planner.planner.request_path import OUTER_TALLY, Method, Tally, counting_calls
from soothe_planner.planner.small_model import sampled
from soothe_planner.planner.stats import PlannerStats
from soothe_planner.planner.transport import is_transport_error, transport_retrying

__all__ = ["Caller", "Outcome", "Tally", "counting_calls", "is_transport_error", "raw_text_of", "resolve_method"]

logger = logging.getLogger("soothe_planner.planner")

R = TypeVar("R")
_OPENAI_DEFAULT_BASES = {"", "https://api.openai.com/v1", "https://api.openai.com/v1/"}
_MAX_BOUND = 32


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


class Caller:
    """One robust call path for every phase. Holds the settings, the controller and the stats."""

    def __init__(
        self, settings: PlannerSettings, controller: ConcurrencyController, stats: PlannerStats,
        *, reask_temperature: float | None = None,
    ) -> None:
        self.settings = settings
        self.controller = controller
        self.stats = stats
        self.reask_temperature = reask_temperature
        # with_structured_output derives a JSON schema from the pydantic class on every call (a few
        # ms); the bound runnable is the same for a given model, schema and method, so keep it. The
        # model is held in the value so its id cannot be reused while the entry lives.
        self._bound: dict[tuple[int, type[BaseModel], str], tuple[BaseChatModel, Runnable[Any, Any]]] = {}
        self.caps = OutputCaps(settings.max_output_tokens_per_call)


    def reask_model(self, model: BaseChatModel, attempt: int) -> BaseChatModel:
        """``model`` for re-ask ``attempt`` after a content refusal: sampled at ``reask_temperature``
        with a seed per attempt (a run stays reproducible), or itself when unset or not settable."""
        return sampled(model, self.reask_temperature, attempt + 1)

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
        """One request, repeated on transport errors (``transport.py``) with the slot given back between tries."""
        config = self.run_config(phase, thread_id=thread_id, iteration=iteration, parent=parent)
        retrying = transport_retrying(
            self.settings.transport_retries, self.settings.transport_backoff_s,
            before_sleep=self._note_transport_retry(phase),
        )
        async for attempt in retrying:
            with attempt:
                return await self._request(runnable, messages, config, phase, tally)
        raise AssertionError("unreachable: the retry loop returns or raises")  # pragma: no cover

    async def _request(
        self, runnable: Runnable[Any, Any], messages: Sequence[BaseMessage], config: RunnableConfig, phase: str,
        tally: Tally,
    ) -> Any:
        """One HTTP request's worth: one LLM slot, held for this request only, and its timeout."""
        async with self.controller.llm_call(phase):
            tally.calls += 1
            outer = OUTER_TALLY.get()
            if outer is not None:
                outer.calls += 1
            return await asyncio.wait_for(
                runnable.ainvoke(list(messages), config=config), timeout=self.settings.call_timeout_s
            )

    def _note_transport_retry(self, phase: str) -> Callable[[RetryCallState], None]:
        retries = self.settings.transport_retries

        def note(state: RetryCallState) -> None:
            self.stats.transport_retry += 1
            exc = state.outcome.exception() if state.outcome is not None else None
            delay = state.next_action.sleep if state.next_action is not None else 0.0
            logger.warning(
                "%s: transport error %s: %s; retry %d of %d in %.2fs",
                phase, type(exc).__name__, exc, state.attempt_number, retries, delay,
            )

        return note

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
        """A valid ``R`` from the model, up the repair ladder (``ladder.py``).

        ``convert`` turns a structured answer into ``R``; ``parse_text`` does the same from text
        (lenient; raises ``PlanParseError``); ``validate`` returns rule violations (re-asked).
        Raises ``PlanGenerationError`` carrying every attempt.
        """
        model = self.caps.model_for(model, phase)
        schema = schema_for(schema, self.settings.prompt_profile)
        ladder = Ladder(
            self, model, schema, list(messages), method=resolve_method(model, self.settings.structured_output_method),
            phase=phase, convert=convert, parse_text=parse_text, validate=validate, tally=tally,
            thread_id=thread_id, iteration=iteration,
        )
        return await ladder.climb()

    async def written(
        self,
        model: BaseChatModel,
        messages: Sequence[BaseMessage],
        *,
        phase: str,
        parse_text: Callable[[str], R],
        validate: Callable[[R], list[str]] | None = None,
        reask_template: str = "reask",
        tally: Tally,
        thread_id: str | None = None,
        iteration: int | None = None,
    ) -> Outcome[R]:
        """A valid ``R`` read from text the model writes by design (a plan in the calls syntax):
        one text call, then the re-asks in text; ``PlanGenerationError`` carrying every attempt."""
        model = self.caps.model_for(model, phase)
        ladder: Ladder[R] = Ladder(
            self, model, BaseModel, list(messages), method=resolve_method(model, self.settings.structured_output_method),
            phase=phase, convert=_no_structured_answer, parse_text=parse_text, validate=validate, tally=tally,
            thread_id=thread_id, iteration=iteration, text_first=True, reask_template=reask_template,
        )
        return await ladder.climb()


def _no_structured_answer(obj: BaseModel) -> Any:
    raise AssertionError("a question answered in text has no structured answer to convert")
