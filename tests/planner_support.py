"""What the planner tests share: a goal, a context, reply builders and a scripted planner."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.execution import StepExecutor
from soothe_planner.graph import build_strange_loop, goal_input, offered_context, run_config
from soothe_planner.models import (
    AgentDecision,
    LoopState,
    PlanContext,
    PlannerSettings,
    StepAction,
    StepResult,
)
from soothe_planner.planner import LLMPlanner
from soothe_planner.testing import ScriptedChatModel
from soothe_planner.tools import make_builtin_tools

GOAL = "summarise the project's README"
CTX = PlanContext(available_capabilities=["read_file", "search"], thread_id="t1")
FAST = PlannerSettings(transport_backoff_s=0.0)


def assess(status: str, progress: float = 0.5, summary: str = "evidence read") -> dict[str, Any]:
    return {"status": status, "goal_progress": progress, "confidence": 0.8, "summary": summary}


def plan(*steps: dict[str, Any], action: str = "new") -> dict[str, Any]:
    return {
        "plan_action": action,
        "execution_mode": "dependency",
        "next_action": "proceed",
        "steps": list(steps),
    }


def step(sid: str, *deps: str, tools: tuple[str, ...] = ("read_file",)) -> dict[str, Any]:
    return {"id": sid, "description": f"do {sid}", "depends_on": list(deps), "tools": list(tools)}


def manager(*actions: StepAction) -> PlanManager:
    pm = PlanManager(GOAL, allowed_capabilities=["read_file", "search"])
    if actions:
        pm.ingest(AgentDecision(steps=list(actions)), 0)
    return pm


def state(iteration: int = 1, **kw: Any) -> LoopState:
    return LoopState(goal=GOAL, thread_id="t1", iteration=iteration, **kw)


def planner(
    *replies: Any, settings: PlannerSettings = FAST, **kw: Any
) -> tuple[LLMPlanner, ScriptedChatModel]:
    model = ScriptedChatModel(responses=list(replies))
    return LLMPlanner(model, settings=settings, **kw), model


COMPACT = FAST.model_copy(update={"prompt_profile": "compact", "structured_output_method": "function_calling",
                                  "small_model_rules": True, "declare_deliverable": False})
"""The small-model profile as the shipped embedded config runs it."""


def typed_step(sid: str, tool: str, args: dict[str, Any], *deps: str) -> dict[str, Any]:
    """One step of a compact plan reply: a tool and its args."""
    return {"id": sid, "tool": tool, "args": args, "depends_on": list(deps)}


def tool_context(ws: Path) -> tuple[PlanContext, StepExecutor]:
    """The built-in tools over ``ws``, offered to the planner as a run offers them, and their executor."""
    executor = StepExecutor(tools=list(make_builtin_tools(ws).values()))
    return offered_context(executor, PlanContext(thread_id="t1", workspace=str(ws))), executor


async def run_compact(model: ScriptedChatModel, tools: StepExecutor, ctx: PlanContext, goal: str, *,
                      thread_id: str = "t1", **loop: Any) -> dict[str, Any]:
    """One run of the StrangeLoop with a compact planner on ``model``, whose steps run ``tools``'
    tools with ``model`` as the agent model; no intake, no final-answer call unless ``loop`` asks."""
    executor = StepExecutor(tools=list(tools.tools.values()), agent_model=model)
    graph = build_strange_loop(LLMPlanner(model, settings=COMPACT), executor, context=ctx,
                               **{"synthesize": False, "intake": False, **loop})
    return await graph.ainvoke(goal_input(goal, thread_id=thread_id), run_config(thread_id))


def act(sid: str, *deps: str) -> StepAction:
    """A model step ``sid`` waiting for ``deps``."""
    return StepAction(id=sid, description=f"do {sid}", depends_on=list(deps))


def ok(sid: str, attempt: int = 1) -> StepResult:
    """``sid`` succeeded (its ``attempt``-th try)."""
    return StepResult(step_id=sid, success=True, output=f"{sid} done", attempt=attempt)


def bad(sid: str, attempt: int = 1) -> StepResult:
    """``sid`` failed with a tool error (its ``attempt``-th try)."""
    return StepResult(step_id=sid, success=False, error="boom", error_type="tool_error", attempt=attempt)
