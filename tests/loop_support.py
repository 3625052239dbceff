"""Shared pieces for the StrangeLoop tests: a planner script keyed by phase, fake tools, event capture.

The planner's model is a ``FunctionChatModel`` answering by requested schema (``RouteIntake``,
``AssessStatus``, ``GeneratePlan``, ``ChooseContinuation``) from per-schema queues, so a test says
what each phase answers without depending on the exact interleaving of calls; running out of a
queue is an error, never a guess.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.tools import StructuredTool

from soothe_planner.errors import ScriptExhaustedError
from soothe_planner.models import PlannerSettings
from soothe_planner.planner import LLMPlanner
from soothe_planner.testing import FunctionChatModel, ScriptedCall

FAST = PlannerSettings(transport_backoff_s=0.0, retries=1, transport_retries=0)


def assess(status: str, progress: float = 0.5, summary: str = "evidence") -> dict[str, Any]:
    return {"status": status, "goal_progress": progress, "confidence": 0.8, "summary": summary}


def step(
    sid: str,
    *deps: str,
    tools: Sequence[str] = ("read",),
    description: str | None = None,
    subagent: str | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": sid,
        "description": description or f"do {sid}",
        "depends_on": list(deps),
        "tools": list(tools),
    }
    if subagent:
        out["subagent"] = subagent
    return out


def plan(*steps: dict[str, Any], mode: str = "dependency") -> dict[str, Any]:
    return {"plan_action": "new", "execution_mode": mode, "next_action": "proceed", "steps": list(steps)}


KEEP = {"plan_action": "keep", "execution_mode": "dependency", "next_action": "the plan stands", "steps": []}


class PhaseScript:
    """Replies by schema name; ``calls`` keeps every call in order."""

    def __init__(self, *, intake: str = "complex", answer: str = "", **queues: Sequence[Any]) -> None:
        self.queues: dict[str, list[Any]] = {k: list(v) for k, v in queues.items()}
        self.queues.setdefault("RouteIntake", [{"route": intake, "answer": answer}])
        self.calls: list[ScriptedCall] = []

    def __call__(self, call: ScriptedCall) -> Any:
        self.calls.append(call)
        queue = self.queues.get(call.schema_name or "text")
        if not queue:
            raise ScriptExhaustedError(f"no scripted reply left for {call.schema_name!r}")
        reply = queue.pop(0)
        return reply(call) if callable(reply) else reply

    def schemas(self) -> list[str | None]:
        return [c.schema_name for c in self.calls]

    def planner(self, settings: PlannerSettings = FAST, **kw: Any) -> LLMPlanner:
        return LLMPlanner(FunctionChatModel(self), settings=settings, **kw)


def read_tool(log: list[str] | None = None, *, name: str = "read", read_only: bool = True) -> StructuredTool:
    def run(text: str) -> str:
        if log is not None:
            log.append(text)
        return f"{name}({text})"

    return StructuredTool.from_function(
        run, name=name, description=f"{name} something", metadata={"read_only": read_only}
    )


def failing_tool(name: str = "boom", message: str = "disk on fire") -> StructuredTool:
    def run(text: str) -> str:
        raise RuntimeError(message)

    return StructuredTool.from_function(
        run, name=name, description="always fails", metadata={"read_only": True}
    )


def gated_tool(name: str, gate: asyncio.Event, *, read_only: bool = True) -> StructuredTool:
    async def run(text: str) -> str:
        await asyncio.wait_for(gate.wait(), 10.0)
        return f"{name} done"

    return StructuredTool.from_function(
        coroutine=run, name=name, description=name, metadata={"read_only": read_only}
    )


def side_effect_tool(
    path: Path,
    name: str = "act",
    *,
    read_only: bool = True,
    before_return: Callable[[str], None] | None = None,
) -> StructuredTool:
    """Appends ``done <text>`` to ``path`` each time it runs (one line per run), then returns."""

    def run(text: str) -> str:
        with path.open("a", encoding="utf-8") as fh:
            fh.write(f"done {text.splitlines()[0]}\n")
            fh.flush()
        if before_return is not None:
            before_return(text)
        return f"{name} ok: {text.splitlines()[0]}"

    return StructuredTool.from_function(run, name=name, description="acts", metadata={"read_only": read_only})


async def collect(
    graph: Any, inp: Any, config: dict[str, Any], **kw: Any
) -> tuple[list[dict[str, Any]], list[str]]:
    """Run to the end (or an interrupt); return the custom events and the updated node names, in order."""
    events: list[dict[str, Any]] = []
    nodes: list[str] = []
    async for mode, chunk in graph.astream(inp, config, stream_mode=["updates", "custom"], **kw):
        if mode == "custom":
            events.append(chunk)
        else:
            nodes.extend(chunk)
    return events, nodes


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [e["event"] for e in events]


async def approval(graph: Any, config: Any) -> Any:
    """The resume that approves the plan the pause shows, naming its digest as an approval must."""
    from langgraph.types import Command

    snapshot = await graph.aget_state(config)
    return Command(resume={"approved": True, "sha256": snapshot.interrupts[0].value["sha256"]})
