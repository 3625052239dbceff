"""What was one command asked to do, and how is what it prints kept free of hidden values?

``Options`` are a command's arguments and output flags wherever they were given; the exit codes
are the CLI's contract (see ``app.py``). A command loads its config through ``read_config``, which
keeps the config's ``redact_text`` for as long as the command runs, and everything it prints goes
through ``hidden``, so a value that came from ``${VAR}`` is shown as ``(hidden)``. Nothing here
imports pydantic or LangChain: ``--help`` and a usage mistake never pay for them.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from rich.console import Console

__all__ = [
    "EXIT_DONE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_PAUSED",
    "EXIT_USAGE",
    "EXTRA_OF",
    "Format",
    "Options",
    "Usage",
    "checked_goal",
    "console_for",
    "hidden",
    "hidden_values",
    "read_config",
    "redactors",
    "thread_id_of",
]

EXIT_DONE, EXIT_FAILED, EXIT_USAGE, EXIT_PAUSED, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

Format = Literal["table", "json", "mermaid"]


class Usage(Exception):
    """A usage mistake found after parsing (exit 2)."""


@dataclass(frozen=True)
class Options:
    """What one command was asked to do: its arguments and the output flags, wherever they were given."""

    json: bool = False
    debug: bool = False
    config: str = ""
    thread: str | None = None
    goal: str = ""
    deliver: str | None = None
    format: Format = "table"
    path: str = ""
    approve: bool = False
    reject_feedback: str | None = None
    directory: str = "."
    force: bool = False


redactors: list[Callable[[str], str]] = []
"""The loaded config's ``redact_text``, while a command runs (see the module docstring)."""

# The optional extras, by the top-level module a command found missing.
EXTRA_OF = {"numpy": "local", "llama_cpp": "local", "psycopg": "postgres", "tiktoken": "bench",
             "networkx": "bench", "sentence_transformers": "bench", "torch": "bench", "rapidfuzz": "bench"}


def read_config(path: str) -> Any:
    from soothe_planner.config import find_config

    config = find_config(path)
    redactors[:] = [config.redact_text]
    return config


def hidden(text: str) -> str:
    return redactors[0](text) if redactors else text


def hidden_values(value: Any) -> Any:
    """``value`` (a run's state, as read back) with every string passed through ``hidden``."""
    if isinstance(value, str):
        return hidden(value)
    if isinstance(value, dict):
        return {k: hidden_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [hidden_values(v) for v in value]
    return value


def thread_id_of(args: Options) -> str:
    """The ``--thread`` value, or a new id; a value that is not printable UTF-8 text is a usage error."""
    thread = args.thread
    if thread is None:
        return uuid.uuid4().hex[:12]
    try:
        thread.encode("utf-8")
    except UnicodeEncodeError:
        raise Usage(
            f"--thread {thread!r} is not valid UTF-8 text (it holds undecodable bytes); give a thread id in text"
        ) from None
    if not thread.strip() or not thread.isprintable():
        raise Usage(f"--thread {thread!r}: a thread id must be printable text, not empty or control characters")
    return thread


def checked_goal(goal: str) -> str:
    """``goal``, or a usage error if it is over the goal size limit."""
    from soothe_planner.graph import check_goal

    try:
        return check_goal(goal)
    except ValueError as exc:
        raise Usage(str(exc)) from None


def console_for(args: Options) -> Console:
    return Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 120)
