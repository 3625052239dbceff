"""The repair ladder: how one structured call climbs from structured output to re-asks, and what it records.

``Caller.structured`` (``calls.py``) builds one ``Ladder`` per call and climbs it; each rung is a
method, and the ladder holds the call's state — what is asked, and every failed attempt so far,
which the final ``PlanGenerationError`` carries:

1. ``structured_attempt``: structured output with the configured method, ``include_raw=True`` so a
   failure still leaves the model's text;
2. ``salvage``: when that output does not parse, its raw tool-call arguments or content go through
   the lenient parser (``parsing/``) — no extra call;
3. ``raw_fallback``: one unstructured call, parsed by the lenient parser — for models or servers
   whose structured output is broken rather than merely wrong;
4. ``reask``: bounded re-asks (``settings.retries``) on a copy of the conversation, each showing
   the model its failed output and the exact error. A well-formed answer that broke a rule (a
   cycle, an unknown step) is re-asked in structured mode and skips rung 3: the format worked, the
   content did not. A model with no structured output at all is re-asked in raw mode.

``guarded`` wraps every rung and tells three endings apart: a failed attempt (``Failed``,
recorded, the ladder goes on), a transport failure that outlived its retries (the phase ends at
once with a ``PlanGenerationError``: re-asking a dead server is pointless), and anything else (a bug
in a validator or converter, or an error this package raises on purpose), which propagates
untouched rather than being disguised as a model failure.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, NoReturn, TypeVar

from langchain_core.exceptions import OutputParserException
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel, ValidationError

from soothe_planner.errors import GenerationAttempt, PlanGenerationError, PlannerError, PlanParseError
from soothe_planner.models import clean_text
from soothe_planner.planner.prompts import escape_data, template, trim_text
from soothe_planner.planner.request_path import Method, RequestPath, Tally
from soothe_planner.planner.transport import is_transport_error

__all__ = ["Failed", "Ladder", "Outcome", "raw_text_of"]

logger = logging.getLogger("soothe_planner.planner")

R = TypeVar("R")
_REASK_OUTPUT_CHARS = 4000


def raw_text_of(message: Any) -> str:
    """What the model wrote: first tool call's arguments (as JSON) or the message text, cleaned.

    Cleaned of lone surrogates (``models.clean_text``): this text is parsed, quoted in re-asks and
    stored, and every one of those encodes it.
    """
    if not isinstance(message, AIMessage):
        return clean_text("" if message is None else str(message))
    if message.tool_calls:
        return clean_text(json.dumps(message.tool_calls[0].get("args", {}), ensure_ascii=False))
    if message.invalid_tool_calls:
        return clean_text(str(message.invalid_tool_calls[0].get("args") or ""))
    return clean_text(message.text if isinstance(message.text, str) else str(message.content))


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


@dataclass
class Outcome(Generic[R]):
    value: R
    route: str  # structured | salvaged | raw | reask | text
    raw_text: str
    attempts: list[GenerationAttempt]


class Failed(Exception):
    """Internal: one attempt did not yield a valid value."""

    def __init__(self, kind: str, error: str, raw_text: str, *, semantic: bool, error_type: str) -> None:
        super().__init__(error)
        self.attempt_kind = kind
        self.error = error
        self.raw_text = raw_text
        self.semantic = semantic  # the output parsed; its content broke a rule
        self.error_type = error_type


class Ladder(Generic[R]):
    """One structured call on its way down the ladder: what it asks, and every attempt so far."""

    def __init__(
        self,
        caller: RequestPath,
        model: BaseChatModel,
        schema: type[BaseModel],
        base: list[BaseMessage],  # re-asks extend copies; the caller's list is never touched
        *,
        method: Method,
        phase: str,
        convert: Callable[[BaseModel], R],
        parse_text: Callable[[str], R],
        validate: Callable[[R], list[str]] | None,
        tally: Tally,
        thread_id: str | None,
        iteration: int | None,
        text_first: bool = False,
        reask_template: str = "reask",
    ) -> None:
        self.caller = caller
        self.stats = caller.stats
        self.model = model
        self.schema = schema
        self.base = base
        self.phase = phase
        self.method = method
        self.convert = convert
        self.parse_text = parse_text
        self.validate = validate
        self.tally = tally
        self.thread_id = thread_id
        self.iteration = iteration
        self.text_first = text_first  # a question answered in text by design (a plan in the calls syntax)
        self.reask_template = reask_template
        self.attempts: list[GenerationAttempt] = []

    # -- the ladder, top to bottom ------------------------------------------------------------

    async def climb(self) -> Outcome[R]:
        """Structured, then (when the format failed) one raw call, then the re-asks; else the error."""
        if self.text_first:
            return await self.climb_text()
        got = await self.guarded("structured", self.structured_attempt("structured", self.base, self.phase))
        if not isinstance(got, Failed):
            return self.first_answer(*got)
        last = self.record(got)
        reask_mode: Literal["structured", "raw"] = "structured"
        if not last.semantic:
            # the format failed, not the content: one unstructured call, read by the lenient parser
            if last.error_type == "unsupported":
                reask_mode = "raw"
            fallback = await self.raw_fallback(last)
            if not isinstance(fallback, Failed):
                return fallback
            last = fallback
        for n in range(self.caller.settings.retries):
            answer = await self.reask(n, last, reask_mode)
            if not isinstance(answer, Failed):
                return answer
            last = answer
        return self.give_up()

    async def climb_text(self) -> Outcome[R]:
        """A question whose answer is text by design: one text call, then the re-asks in text."""
        got = await self.guarded("raw", self.raw_attempt("raw", self.base, self.phase))
        if not isinstance(got, Failed):
            self.stats.text_ok += 1
            return Outcome(got[0], "text", got[1], self.attempts)
        last = self.record(got)
        for n in range(self.caller.settings.retries):
            answer = await self.reask(n, last, "raw")
            if not isinstance(answer, Failed):
                return answer
            last = answer
        return self.give_up()

    # -- one request --------------------------------------------------------------------------

    async def _send(self, runnable: Runnable[Any, Any], msgs: list[BaseMessage], call_phase: str) -> Any:
        return await self.caller.invoke(
            runnable, msgs, phase=call_phase, tally=self.tally, thread_id=self.thread_id,
            iteration=self.iteration, parent=self.phase,
        )

    # -- reading an answer --------------------------------------------------------------------

    def accept(self, value: R, kind: str, raw: str) -> R:
        """``value`` if it breaks no rule; a broken rule is a content failure (re-asked in structured mode)."""
        errors = self.validate(value) if self.validate is not None else []
        if errors:
            raise Failed(kind, "; ".join(errors), raw, semantic=True, error_type="validation")
        return value

    def from_text(self, text: str, kind: str) -> R:
        """The lenient parser's reading of ``text``, checked against the rules."""
        try:
            value = self.parse_text(text)
        except PlanParseError as exc:
            raise Failed(kind, str(exc.reason), text, semantic=False, error_type="parse") from exc
        except Exception as exc:  # a pydantic error from the wire model, etc.
            raise Failed(kind, f"{type(exc).__name__}: {exc}", text, semantic=False, error_type="parse") from exc
        return self.accept(value, kind, text)

    def from_structured(self, parsed: BaseModel, kind: str, raw: str) -> R:
        """A parsed wire object made into ``R``; a refusal here is about content, not format."""
        try:
            value = self.convert(parsed)
        except PlanParseError as exc:  # the repairs refused it (a cycle, a duplicate id, ...)
            raise Failed(kind, str(exc.reason), raw, semantic=True, error_type="validation") from exc
        except Exception as exc:  # the wire object does not make a runtime one: a content error
            raise Failed(kind, f"{type(exc).__name__}: {exc}", raw, semantic=True, error_type="validation") from exc
        return self.accept(value, kind, raw)

    # -- the rungs ----------------------------------------------------------------------------

    async def structured_attempt(
        self, kind: str, msgs: list[BaseMessage], call_phase: str, model: BaseChatModel | None = None
    ) -> tuple[R, str]:
        """Structured output (rung 1, and each structured re-ask); a reply that does not parse is salvaged."""
        try:
            runnable = self.caller.bound(model or self.model, self.schema, self.method)
        except (NotImplementedError, ValueError, TypeError) as exc:
            raise Failed(kind, f"structured output unavailable: {exc}", "", semantic=False,
                          error_type="unsupported") from exc
        try:
            out = await self._send(runnable, msgs, call_phase)
        except PlannerError:
            raise
        except Exception as exc:
            if is_transport_error(exc):
                raise
            if not isinstance(exc, ValidationError | OutputParserException):
                raise Failed(kind, f"{type(exc).__name__}: {exc}", "", semantic=False,
                              error_type="unsupported") from exc
            # some clients validate inside the call (openai's parse() for json_schema): the
            # format worked, the content did not — the text is in the error, salvage it
            out = {"raw": None, "parsed": None, "parsing_error": exc, "text": _text_in_error(exc)}
        raw = out.get("text") or raw_text_of(out.get("raw")) if isinstance(out, dict) else ""
        parsed = out.get("parsed") if isinstance(out, dict) else out
        perr = out.get("parsing_error") if isinstance(out, dict) else None
        if perr is None and isinstance(parsed, BaseModel):
            return self.from_structured(parsed, kind, raw), raw
        reason = f"{type(perr).__name__}: {perr}" if perr is not None else "the model returned no structured answer"
        return self.salvage(kind, raw, reason), raw

    def salvage(self, kind: str, raw: str, reason: str) -> R:
        """Rung 2: the lenient parser on the text of a structured reply that did not parse (no call)."""
        self.attempts.append(GenerationAttempt(phase=self.phase, kind="structured" if kind == "structured" else "reask",
                                               error=reason, raw_text=raw, error_type="parse"))
        if not raw.strip():
            raise Failed("salvage", "nothing to salvage: the model wrote no text", raw, semantic=False,
                          error_type="parse")
        value = self.from_text(raw, "salvage")
        self.stats.salvaged += 1
        logger.info("%s: structured output failed to parse (%s); salvaged from the raw output", self.phase, reason)
        return value

    async def raw_attempt(
        self, kind: str, msgs: list[BaseMessage], call_phase: str, model: BaseChatModel | None = None
    ) -> tuple[R, str]:
        """An unstructured call read by the lenient parser (rung 3, and each re-ask in raw mode)."""
        try:
            message = await self._send(model or self.model, msgs, call_phase)
        except PlannerError:
            raise
        except Exception as exc:
            if is_transport_error(exc):
                raise
            raise Failed(kind, f"{type(exc).__name__}: {exc}", "", semantic=False, error_type="error") from exc
        raw = raw_text_of(message)
        return self.from_text(raw, kind), raw

    def first_answer(self, value: R, raw: str) -> Outcome[R]:
        route = "salvaged" if self.attempts else "structured"
        if route == "structured":
            self.stats.structured_ok += 1
        return Outcome(value, route, raw, self.attempts)

    async def raw_fallback(self, last: Failed) -> Outcome[R] | Failed:
        """Rung 3: the format failed, so one unstructured call."""
        self.stats.raw_fallback += 1
        logger.warning("%s: falling back to one raw call (%s)", self.phase, last.error)
        got = await self.guarded("raw", self.raw_attempt("raw", self.base, "plan-raw"))
        if isinstance(got, Failed):
            return self.record(got)
        self.stats.raw_ok += 1
        return Outcome(got[0], "raw", got[1], self.attempts)

    async def reask(self, n: int, last: Failed, mode: Literal["structured", "raw"]) -> Outcome[R] | Failed:
        """Rung 4, re-ask ``n``: a copy of the conversation that shows the model its output and the error."""
        retries = self.caller.settings.retries
        shown = trim_text(last.raw_text or "(empty)", _REASK_OUTPUT_CHARS)
        # The error quotes pieces of the answer (ids, descriptions): escaped, so it cannot open or close a fence.
        reask = template(self.reask_template).substitute(output=escape_data(shown), error=escape_data(last.error))
        msgs = [*self.base, HumanMessage(content=reask)]
        self.stats.reask += 1
        logger.warning("%s: re-ask %d of %d after: %s", self.phase, n + 1, retries, last.error)
        attempt = self.structured_attempt if mode == "structured" else self.raw_attempt
        # a content refusal re-asked of a greedy model mostly gets the same answer back: sampled, if set
        model = self.caller.reask_model(self.model, n) if last.semantic else self.model
        got = await self.guarded("reask", attempt("reask", msgs, "plan-reask", model))
        if isinstance(got, Failed):
            got.attempt_kind = "reask" if got.attempt_kind != "salvage" else "salvage"
            return self.record(got)
        self.stats.reask_ok += 1
        return Outcome(got[0], "reask", got[1], self.attempts)

    def give_up(self) -> NoReturn:
        self.stats.failed += 1
        logger.error("%s: no usable answer after %d attempt(s)", self.phase, len(self.attempts))
        raise PlanGenerationError(self.phase, self.attempts)

    # -- around every rung --------------------------------------------------------------------

    async def guarded(self, kind: str, call: Awaitable[tuple[R, str]]) -> tuple[R, str] | Failed:
        """One attempt: its value, or the failure to record. Transport ends the phase; bugs propagate."""
        try:
            return await call
        except Failed as f:
            return f
        except PlannerError:
            raise
        except Exception as exc:
            if not is_transport_error(exc):
                raise  # a bug in a validator or converter: never disguised as a model failure
            raise self.transport_failure(exc, kind) from exc

    def record(self, failed: Failed) -> Failed:
        self.attempts.append(GenerationAttempt(phase=self.phase, kind=failed.attempt_kind,  # type: ignore[arg-type]
                                               error=failed.error, raw_text=failed.raw_text,
                                               error_type=failed.error_type))
        logger.warning("%s: %s attempt failed (%s): %s", self.phase, failed.attempt_kind, failed.error_type,
                       failed.error)
        return failed

    def transport_failure(self, exc: Exception, kind: str) -> PlanGenerationError:
        self.attempts.append(GenerationAttempt(phase=self.phase, kind=kind, error=f"{type(exc).__name__}: {exc}",  # type: ignore[arg-type]
                                               error_type="transport"))
        self.stats.failed += 1
        logger.error("%s: transport failed after %d retries: %s", self.phase, self.caller.settings.transport_retries,
                     exc)
        return PlanGenerationError(self.phase, self.attempts)
