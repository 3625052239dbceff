"""The step executor: typed tool calls, model steps, agents, subagents and remote graphs, scheduled as eager dataflow."""

from __future__ import annotations

from soothe_planner.execution.agent import react_agent
from soothe_planner.execution.references import (
    BadReferenceError,
    render_task,
    resolve_args,
    resolve_references,
)
from soothe_planner.execution.scheduler import StepExecutor, journal_key
from soothe_planner.execution.steps import StepCalls, step_kind
from soothe_planner.execution.tool_sources import ToolSource, as_tools

__all__ = [
    "BadReferenceError",
    "StepCalls",
    "StepExecutor",
    "ToolSource",
    "as_tools",
    "journal_key",
    "react_agent",
    "render_task",
    "resolve_args",
    "resolve_references",
    "step_kind",
]
