"""What does one planner request need, whoever makes it?

The repair ladder (``ladder.py``) climbs through requests that the caller (``calls.py``) makes: the
caller builds ladders and a ladder calls back into it. This module holds what both speak of — the
structured-output ``Method``, the ``Tally`` of calls made for one public operation, and the
``RequestPath`` a ladder calls back into — so that neither of the two imports the other.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable
from pydantic import BaseModel

from soothe_planner.models import PlannerSettings
from soothe_planner.planner.stats import PlannerStats

__all__ = ["OUTER_TALLY", "Method", "RequestPath", "Tally", "counting_calls"]

Method = Literal["json_schema", "function_calling", "json_mode"]


@dataclass
class Tally:
    """LLM calls made on behalf of one public operation (``PlanResult.llm_calls``)."""

    calls: int = 0


OUTER_TALLY: ContextVar[Tally | None] = ContextVar("soothe_outer_tally", default=None)
"""The tally of the innermost ``counting_calls`` block, which every request counts in too."""


@contextmanager
def counting_calls() -> Iterator[Tally]:
    """Count every request made in this context (per task, so concurrent runs do not mix)."""
    tally = Tally()
    token = OUTER_TALLY.set(tally)
    try:
        yield tally
    finally:
        OUTER_TALLY.reset(token)


class RequestPath(Protocol):
    """What a ladder calls back into: one request at a time, on the caller's settings and stats."""

    settings: PlannerSettings
    stats: PlannerStats

    def bound(self, model: BaseChatModel, schema: type[BaseModel], method: Method) -> Runnable[Any, Any]:
        """``model`` bound to answer with ``schema`` by ``method``."""
        ...

    def reask_model(self, model: BaseChatModel, attempt: int) -> BaseChatModel:
        """The model a re-ask goes to (``model`` itself, or a copy at the re-ask temperature)."""
        ...

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
        """One request under a slot, with its transport retries, counted in ``tally``."""
        ...
