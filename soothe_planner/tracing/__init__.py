"""Langfuse tracing: one trace per run, a span per step, no-op when disabled.

The front door of ``soothe_planner.tracing``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from soothe_planner.tracing.handler import (
    PHASE_KEY,
    make_handler,
)
from soothe_planner.tracing.run_tracer import (
    RunTracer,
    run_tracer,
)
from soothe_planner.tracing.runs import (
    TRACED_RUN_KEY,
    LangfuseSettingsLike,
    StepTrace,
    TraceHandle,
    client_for,
    open_handle,
    run_name_for,
    trace_id_for,
    trace_run,
    trace_step,
)

__all__ = [
    "PHASE_KEY",
    "TRACED_RUN_KEY",
    "LangfuseSettingsLike",
    "RunTracer",
    "StepTrace",
    "TraceHandle",
    "client_for",
    "make_handler",
    "open_handle",
    "run_name_for",
    "run_tracer",
    "trace_id_for",
    "trace_run",
    "trace_step",
]
