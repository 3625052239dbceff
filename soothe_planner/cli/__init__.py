"""The command line: parse, load config, call the library, render.

The front door of ``soothe_planner.cli``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from soothe_planner.cli.app import (
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PAUSED,
    EXIT_USAGE,
    cli,
    main,
)
from soothe_planner.cli.terminal import (
    RunView,
    plan_json,
    plan_mermaid,
    plan_table,
    render_report,
    report_dict,
    steps_table,
)

__all__ = [
    "EXIT_DONE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_PAUSED",
    "EXIT_USAGE",
    "RunView",
    "cli",
    "main",
    "plan_json",
    "plan_mermaid",
    "plan_table",
    "render_report",
    "report_dict",
    "steps_table",
]
