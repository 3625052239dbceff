"""How does the StrangeLoop run on a LangGraph server (``langgraph dev`` / LangGraph Platform)?

``langgraph.json`` at the repository root points the server at ``make_graph``, which builds the
loop from a YAML config: the file named by ``SOOTHE_CONFIG``, else ``config/default.yaml`` in the
working directory, else the built-in defaults. The graph is compiled *without* a checkpointer or
store: the server injects its own persistence (PostgreSQL in production), and the executor's step
journal uses the server's store, so a worker that dies mid-``execute`` resumes without re-running
completed steps. The graph is built where the CLI builds its own (``ResolvedRun.graph``), so every
key of the config means the same here: ``run.intake: false`` skips the routing call, and
``tracing.langfuse`` traces each run the server starts (one trace per thread, as the CLI's).

Inputs are the same as in-process: ``goal_input(goal, thread_id=...)`` as JSON (at least
``{"goal": ...}``); set ``"intake": "complex"`` to skip the routing call. The run config should
carry ``recursion_limit`` from ``run_config``; the approval gate (``run.approval: true``) pauses
with an interrupt, resumed with ``Command(resume={"approved": true})`` from any client, including
``langgraph.pregel.remote.RemoteGraph``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langgraph.graph.state import CompiledStateGraph

__all__ = ["CONFIG_ENV", "make_graph"]

CONFIG_ENV = "SOOTHE_CONFIG"
DEFAULT_CONFIG = Path("config") / "default.yaml"


def _config_path() -> Path | None:
    named = os.environ.get(CONFIG_ENV)
    if named:
        return Path(named)
    return DEFAULT_CONFIG if DEFAULT_CONFIG.is_file() else None


def make_graph(config: Any = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The StrangeLoop compiled from the configured YAML (``config``: the server's run config, unused)."""
    from soothe_planner.config import SootheConfig, load_config, resolve_run

    path = _config_path()
    cfg = load_config(path) if path is not None else SootheConfig()
    return resolve_run(cfg).graph()
