"""How does the StrangeLoop run on a LangGraph server (``langgraph dev`` / LangGraph Platform)?

``langgraph.json`` at the repository root points the server at ``make_graph``, an async factory
the server calls for every run (and to read the graph's schemas). It builds the loop from a YAML
config: the file named by ``SOOTHE_CONFIG``, else ``soothe.yaml`` in the working directory (what
``soothe-planner init`` writes), else ``config/default.yaml`` there (the repository's), else the
config shipped in the package. The graph is built where the CLI builds its own
(``ResolvedRun.graph``), so every key of the config means the same here. The graph is compiled
*without* a checkpointer or store: the server injects its own persistence (PostgreSQL in
production), and the executor's step journal uses the server's store, so a worker that dies
mid-``execute`` resumes without re-running completed steps.

What is built once per server process, and what per run:

- **Once** (the first call, per config): the config, the tools, the models (one instance per
  model string, so the embedded model server starts once) and the root ``ConcurrencyController``. Every run's
  controller is ``root.for_run()``: it shares the root's LLM-call slots, so
  ``global_max_llm_calls`` caps the model calls in flight across all runs of the process.
- **Per run**: the budget (``max_total_llm_calls``), the goal/step/subagent slots, and the
  run's own choices from its context (``RunContext``: ``model``, ``approval``,
  ``max_iterations``, ``max_plan_steps``; a server mirrors the context into ``configurable``,
  where this factory reads it). A model string the process has not used yet is built then, once.

**The operator decides what a client may change** (``server:`` in the config, ``ServerConfig``).
A client is whoever can reach the server's API, and the run it starts spends the operator's keys
and reads the operator's files. So a context key not in ``server.client_context`` is refused
(by default only ``max_iterations`` and ``max_plan_steps``: a client cannot turn the approval gate
off, nor pick a model), a cap above its ceiling (``server.max_iterations`` /
``server.max_plan_steps``, by default the planner's own values: a client may lower them, never
raise them) is refused, and a model must be ``models.default`` or listed in
``server.client_models``. A scripted model is never a client's to name: ``scripted:PATH`` opens a
file on the server, and its errors would tell a client which paths exist. Each refusal is a
``ValueError`` naming the key and the rule, raised before anything is built for the run.

Nothing blocks the server's event loop: reading the config, checking paths, importing tools and
building models happen in a worker thread (``asyncio.to_thread``), and the process-wide parts are
built under a lock there. A LangGraph dev server refuses blocking calls on its loop
(``BlockingError``); ``--allow-blocking`` is not needed.

Across replicas (several server processes behind one deployment): each process has its own root
controller, and the budget is per run wherever the run executes (it is in the run's checkpoint).
With ``concurrency.backend: process`` (the default) the in-flight cap is per process — N replicas
may have N × ``global_max_llm_calls`` calls in flight. With ``concurrency.backend: postgres`` the
root controller's LLM slots are leased rows in the checkpoints' database
(``concurrency/shared.py``), so one cap holds across every replica sharing it.

Inputs: ``goal_input(goal, thread_id=...)`` as JSON (at least ``{"goal": ...}``), or a chat turn
``{"messages": [{"role": "user", "content": ...}]}``; set ``"intake": "complex"`` to skip the
routing call. An input's ``max_iterations`` is held to the same ceiling as the context's. The
approval gate (``run.approval: true``, or ``{"approval": true}`` in the run's context where
``server.client_context`` lists ``approval``) pauses with LangGraph's human-in-the-loop request
(``graph/approval.py``), which Agent Chat UI and Agent Inbox render and answer (accept, edit,
response, ignore); ``Command(resume={"approved": true, "sha256": ...})`` (the interrupt's digest:
an approval names the plan it approves) works too, from any client, including
``langgraph.pregel.remote.RemoteGraph``.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph.graph.state import CompiledStateGraph

# Imported with the module, which the server loads at start-up: the first run then does not pay
# for importing LangChain's and the package's modules on its way to a graph.
from soothe_planner.config import (
    CONFIG_FILE_NAME,
    SCRIPTED_MODEL_ENV,
    ModelPool,
    ModelsConfig,
    SootheConfig,
    find_config,
    resolve_controller,
    resolve_run,
    resolve_tools,
    split_model_spec,
)
from soothe_planner.graph import parse_run_context

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import BaseTool

    from soothe_planner.concurrency import ConcurrencyController
    from soothe_planner.graph import RunContext

__all__ = ["CONFIG_ENV", "check_client_context", "graph_for_run", "make_graph"]

CONFIG_ENV = "SOOTHE_CONFIG"
DEFAULT_CONFIG = Path("config") / "default.yaml"


@dataclass
class _Process:
    """What a server process builds once per config: the config, its models and the root controller."""

    config: SootheConfig
    pool: ModelPool
    controller: ConcurrencyController
    tools: list[BaseTool]
    lock: threading.Lock = field(default_factory=threading.Lock)


_processes: dict[tuple[str | None, str | None], _Process] = {}
_processes_lock = threading.Lock()


def _config_path() -> Path | None:
    named = os.environ.get(CONFIG_ENV)
    if named:
        return Path(named)
    for candidate in (Path(CONFIG_FILE_NAME), DEFAULT_CONFIG):
        if candidate.is_file():
            return candidate
    return None  # the shipped config


def _process() -> _Process:
    key = (os.environ.get(CONFIG_ENV), os.environ.get(SCRIPTED_MODEL_ENV))
    with _processes_lock:
        found = _processes.get(key)
        if found is None:
            config = find_config(_config_path())
            found = _Process(config, ModelPool(config), resolve_controller(config), resolve_tools(config))
            _processes[key] = found
        return found


def check_client_context(config: SootheConfig, options: RunContext) -> None:
    """Refuse what the operator's ``server:`` section does not let a client set (see the module docstring)."""
    rules = config.server
    for key in options:
        if key not in rules.client_context:
            allowed = ", ".join(rules.client_context) or "none"
            raise ValueError(
                f"run context {key}: a client may not set it on this server (the operator allows: {allowed}; "
                "server.client_context in the config)"
            )
    for key in ("max_iterations", "max_plan_steps"):
        value = options.get(key)
        if value is None:
            continue
        ceiling = getattr(rules, key) or getattr(config.planner, key)
        if value > ceiling:
            raise ValueError(
                f"run context {key} = {value}: above this server's ceiling of {ceiling} "
                f"(server.{key} in the config)"
            )
    model = options.get("model")
    if model is None or model == config.models.default:
        return
    if split_model_spec(model.strip())[0] == "scripted":
        raise ValueError("run context model: a client may never name a scripted model (it reads a file on the server)")
    if model not in rules.client_models:
        raise ValueError(
            f"run context model = {model!r}: not a model this server lets a client name "
            f"(allowed: the server's default model, {', '.join(rules.client_models) or 'no other'}; "
            "server.client_models in the config)"
        )


def _run_config(config: SootheConfig, options: RunContext) -> SootheConfig:
    """``config`` with the run's choices applied, each section validated again."""
    if not options:
        return config
    update: dict[str, Any] = {}
    if "model" in options and options["model"] != config.models.default:
        base = Path(config.source).resolve().parent if config.source else Path.cwd()
        fields = config.models.model_dump(exclude={"default"})
        update["models"] = ModelsConfig.model_validate(
            {**fields, "default": options["model"]}, context={"base_dir": base}
        )
    planner = {k: options[k] for k in ("max_iterations", "max_plan_steps") if k in options}
    if planner:
        update["planner"] = type(config.planner).model_validate({**config.planner.model_dump(), **planner})
    if "approval" in options:
        update["run"] = config.run.model_copy(update={"approval": options["approval"]})
    return config.model_copy(update=update) if update else config


def graph_for_run(configurable: Mapping[str, Any] | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The StrangeLoop for one run, its ``RunContext`` read from ``configurable`` (blocking: off the loop)."""
    process = _process()
    options = parse_run_context(dict(configurable or {}))
    check_client_context(process.config, options)
    config = _run_config(process.config, options)
    with process.lock:  # models are built once per string, whichever run asks first
        pool = ModelPool(config, built=process.pool.built)
        run = resolve_run(config, controller=process.controller.for_run(), pool=pool, tools=process.tools)
    rules = process.config
    return run.graph(iteration_ceiling=rules.server.max_iterations or rules.planner.max_iterations)


async def make_graph(config: RunnableConfig | None = None) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The server's graph factory: ``graph_for_run`` in a worker thread (``config``: the run's config)."""
    configurable = dict((config or {}).get("configurable") or {})
    return await asyncio.to_thread(graph_for_run, configurable)
