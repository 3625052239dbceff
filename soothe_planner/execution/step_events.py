"""How does a step's progress reach whoever listens: the caller's sink and LangGraph's stream?

Each step sends ``step_started`` when it begins (or when its journaled result is replayed) and
``step_completed`` once the plan manager recorded its result, built through the types in
``soothe_planner.events``: the output as an excerpt of ``OUTPUT_EXCERPT_CHARS``, and how the step
ran (its kind, the tools a model's output made it call) when the runner reported it. Outside a
graph run there is no stream writer, and the events go to the caller's ``on_event`` only.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from soothe_planner.events import StepCompletedEvent, StepStartedEvent
from soothe_planner.execution.steps import StepOutput
from soothe_planner.models import PlanStep, StepResult

__all__ = ["OUTPUT_EXCERPT_CHARS", "EventSink", "StepEvents", "stream_writer"]

EventSink = Callable[[dict[str, Any]], Any]
OUTPUT_EXCERPT_CHARS = 500


def stream_writer() -> Callable[[Any], None] | None:
    try:
        from langgraph.config import get_stream_writer

        return get_stream_writer()
    except Exception:  # outside a graph run there is no writer: events go to on_event only
        return None


class StepEvents:
    """Sends step events to the caller's sink and to LangGraph's custom stream, if there is one."""

    def __init__(self, sink: EventSink | None, writer: Callable[[Any], None] | None, thread_id: str | None) -> None:
        self.sink = sink
        self.writer = writer
        self.thread_id = thread_id
        self._produced: dict[str, StepOutput] = {}

    def note(self, step_id: str, produced: StepOutput) -> None:
        """How a step ran, kept for its ``step_completed`` event (sent once the manager recorded it)."""
        self._produced[step_id] = produced

    async def _send(self, event: StepStartedEvent | StepCompletedEvent) -> None:
        if self.writer is not None:
            self.writer(event)
        if self.sink is not None:
            out = self.sink(dict(event))
            if inspect.isawaitable(out):
                await out

    async def started(self, step: PlanStep, attempt: int, *, replayed: bool = False) -> None:
        await self._send(
            StepStartedEvent(event="step_started", step_id=step.id, description=step.description, attempt=attempt,
                             replayed=replayed, thread_id=self.thread_id)
        )

    async def completed(self, result: StepResult, *, replayed: bool = False) -> None:
        produced = self._produced.pop(result.step_id, None)
        out = result.output if len(result.output) <= OUTPUT_EXCERPT_CHARS else result.output[:OUTPUT_EXCERPT_CHARS] + "…"
        event = StepCompletedEvent(
            event="step_completed", step_id=result.step_id, success=result.success, error_type=result.error_type,
            error=result.error, duration_ms=result.duration_ms, attempt=result.attempt, output=out,
            replayed=replayed, thread_id=self.thread_id,
        )
        if produced is not None:
            # How the step ran, and which tools a model's output made it call (recovered_from_text:
            # written as text and run by the step runner, not by the model adapter).
            event["kind"] = produced.kind
            event["tool_calls"] = list(produced.called)
            event["recovered_from_text"] = produced.from_text
        await self._send(event)
