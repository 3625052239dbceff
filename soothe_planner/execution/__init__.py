"""The step executor: tools, subagents and remote graphs, scheduled as eager dataflow."""

from __future__ import annotations

from soothe_planner.execution.references import BadReferenceError, render_task, resolve_references
from soothe_planner.execution.scheduler import StepExecutor, journal_key

__all__ = ["BadReferenceError", "StepExecutor", "journal_key", "render_task", "resolve_references"]
