"""The step executor: tools, subagents and remote graphs, scheduled as eager dataflow."""

from __future__ import annotations

from soothe_planner.execution.references import BadReferenceError, render_task, resolve_references
from soothe_planner.execution.scheduler import StepExecutor, journal_key
from soothe_planner.execution.tool_sources import ToolSource, as_tools

__all__ = [
    "BadReferenceError",
    "StepExecutor",
    "ToolSource",
    "as_tools",
    "journal_key",
    "render_task",
    "resolve_references",
]
