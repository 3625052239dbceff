"""The command line: parse, load config, call the library, render.

The front door of ``soothe_planner.cli``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).

The terminal renderings (``terminal.py``) are named here but imported at first use: they need the
data model and the DAG, and with them pydantic and LangChain, which ``soothe-planner --help``,
``--version`` and a usage mistake never touch. The console script imports this package, so an
eager import here would be paid on every start.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from soothe_planner.cli.app import (
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_PAUSED,
    EXIT_USAGE,
    cli,
    main,
)

_TERMINAL = ("RunView", "plan_json", "plan_mermaid", "plan_table", "render_report", "report_dict", "steps_table")

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


def __getattr__(name: str) -> Any:
    if name not in _TERMINAL:
        raise AttributeError(f"module 'soothe_planner.cli' has no attribute {name!r}")
    value = getattr(import_module("soothe_planner.cli.terminal"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # static analysers see the eager imports
    from soothe_planner.cli.terminal import (
        RunView,
        plan_json,
        plan_mermaid,
        plan_table,
        render_report,
        report_dict,
        steps_table,
    )
