"""How is a run's machinery — models, planner, executor, limiter, the graph, checkpointer — built from a config?

One function per part, each taking the config plus an optional explicit object that wins over it
(``resolve_planner(config, model=my_model)``). Everything that could fail for a reason the user
can fix fails here, before any work starts, as a ``ConfigError`` naming the key and the way out:
a missing API key names its environment variable; a tool spec that does not import names the
spec; a read-only tool that does not exist is an error, not a silently ignored key.

The planner's and the executor's LLM calls must share ONE ``ConcurrencyController`` (the limiter
is a process-tree-wide cap). ``resolve_controller`` keeps one controller per config object, so
``resolve_planner(c)`` and ``resolve_executor(c)`` called separately share it; ``resolve_run(c)``
gives each run ``resolve_controller(c).for_run()`` — the same LLM slots, a budget of its own. A
copy of the config (``model_copy``) or a config loaded again gets a controller of its own.
Weighed: a process-wide controller would make two configs with different limits share one; a
controller per call was the bug (two limiters, each allowing the full limit). Models are built
(``chat_models.py``) once per string and shared the same way, so the embedded server starts once
and a scripted model's replies are consumed in one order.

The StrangeLoop graph is built from a config in one place, ``ResolvedRun.graph`` (``build_graph``
is it in one call): the command line, the LangGraph server's ``make_graph`` and library callers
all go through it, so every key means the same everywhere — ``run.approval``, ``run.synthesize``,
``run.intake``, ``execution.workspace`` and ``failure_policy``, ``planner.max_iterations`` and
``max_plan_steps``, and ``tracing.langfuse`` (a ``RunTracer`` on the graph, so a server's runs are
traced as the CLI's are). Only persistence differs by caller: the CLI opens its checkpointer and
store, a server injects its own.

A config's graph keys the approval seal (``resolve_seal_key``): HMAC-SHA-256 under
``SOOTHE_SEAL_KEY`` if that variable is set, else under a random key kept in ``seal.key`` in the
state folder (the folder of ``checkpoint.path``, ``.soothe/`` beside the config by default),
created with mode 0600 on first use. The key is always given to the graph, because a run's
context may turn the gate on, and read when first needed. A key file that others may read or
write is refused: the key is what stops a person who can edit the checkpoint from re-sealing a
changed plan.

The public functions scrub their ``ConfigError`` messages of every value that came from an
environment variable (``SootheConfig.redact_text``): a message that quotes a model string must
not quote the key someone pasted into it.
"""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from soothe_planner.config.chat_models import (
    SCRIPTED_MODEL_ENV,
    ModelPool,
    resolve_chat_model,
    uses_openai_compatible_server,
)
from soothe_planner.config.redaction import redacted
from soothe_planner.errors import ConfigError
from soothe_planner.tools import ControlFile, make_builtin_tools

if TYPE_CHECKING:
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph

    from soothe_planner.concurrency import ConcurrencyController
    from soothe_planner.config.schema import SootheConfig
    from soothe_planner.execution import StepExecutor
    from soothe_planner.graph import Persistence, SealKey
    from soothe_planner.planner import LLMPlanner

__all__ = [
    "SCRIPTED_MODEL_ENV",
    "ModelPool",
    "ResolvedRun",
    "build_graph",
    "loop_options",
    "resolve_chat_model",
    "resolve_checkpointer",
    "resolve_controller",
    "resolve_executor",
    "resolve_loop_planner",
    "resolve_persistence",
    "resolve_planner",
    "resolve_run",
    "resolve_seal_key",
    "resolve_tools",
]

SEAL_KEY_FILE = "seal.key"
"""The approval seal's key file, in the state folder (``SOOTHE_SEAL_KEY`` wins when it is set)."""

# --------------------------------------------------------------------------- planner


def resolve_controller(config: SootheConfig) -> ConcurrencyController:
    """The one limiter of everything resolved from this config object (see the module docstring)."""
    from soothe_planner.concurrency import ConcurrencyController

    # Kept on the config object itself, tagged with its id: a model_copy carries private attributes
    # over, and a copy (say with another workspace) is another run with its own limiter and count.
    kept = config._controller
    if kept is not None and kept[0] == id(config):
        return kept[1]
    controller = ConcurrencyController(config.concurrency)
    config._controller = (id(config), controller)
    return controller


@redacted
def resolve_planner(
    config: SootheConfig,
    model: BaseChatModel | None = None,
    *,
    controller: ConcurrencyController | None = None,
    pool: ModelPool | None = None,
) -> LLMPlanner:
    """An ``LLMPlanner`` for ``config``. An explicit ``model`` wins over ``models.default``."""
    from soothe_planner.planner import LLMPlanner

    pool = pool or ModelPool(config)
    settings = config.planner
    if model is None:
        model = pool.get()
        # The embedded server (and many OpenAI-compatible ones) answers json_schema with HTTP 500;
        # a forced tool call is grammar-enforced there and works.
        if settings.structured_output_method == "auto" and uses_openai_compatible_server(config):
            settings = settings.model_copy(update={"structured_output_method": "function_calling"})
    assess = pool.get(config.models.assess) if config.models.assess else None
    return LLMPlanner(
        model,
        assess_model=assess,
        settings=settings,
        controller=controller or resolve_controller(config),
    )


@redacted
def resolve_loop_planner(
    config: SootheConfig,
    model: BaseChatModel | None = None,
    *,
    controller: ConcurrencyController | None = None,
    pool: ModelPool | None = None,
) -> LLMPlanner:
    """The StrangeLoop's planner (``LLMPlanner`` implements both protocols)."""
    return resolve_planner(config, model, controller=controller, pool=pool)


# --------------------------------------------------------------------------- tools and executor


def _import_tool(spec: str) -> BaseTool:
    module_name, _, attr_path = spec.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise ConfigError(
            f"execution.tools: cannot import module {module_name!r} for tool spec {spec!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"execution.tools: {module_name!r} has no attribute {attr_path!r} (tool spec {spec!r})")
        obj = getattr(obj, part)
    if isinstance(obj, BaseTool):
        return obj
    if callable(obj) and not isinstance(obj, type):
        try:
            return StructuredTool.from_function(obj)
        except Exception as exc:
            raise ConfigError(
                f"execution.tools: {spec!r} is a function that cannot become a tool ({exc}); "
                "give it a docstring and type hints, or export a BaseTool"
            ) from None
    raise ConfigError(f"execution.tools: {spec!r} is a {type(obj).__name__}, not a BaseTool or a function")


def small_model_config(config: SootheConfig) -> bool:
    """Whether a run of ``config`` gets the small-model rules and the built-ins' aids for them:
    ``planner.small_model_rules`` when set, else whether the model is the embedded one (which
    declares them; the tools are built before the model, so its string is read here)."""
    flag = config.planner.small_model_rules
    return flag if flag is not None else config.models.default.startswith("local")


def _builtin(config: SootheConfig, cache: dict[str, BaseTool], name: str) -> BaseTool:
    if not cache:
        # the files a later `resume` trusts: a tool that rewrote them could change what runs next;
        # the checkpoint and the seal's key are not read either (a step's output would copy them)
        protected: list[str | Path] = [config.source] if config.source else []
        if config.checkpoint.backend == "sqlite":
            protected.append(ControlFile(config.checkpoint.path, secret=True))
        protected.append(ControlFile(Path(config.checkpoint.path).parent / SEAL_KEY_FILE, secret=True))
        try:
            cache.update(make_builtin_tools(config.execution.workspace, protected_files=protected,
                                            small_model_aids=small_model_config(config)))
        except ToolException:
            raise ConfigError(
                f"execution.workspace: {str(config.execution.workspace)!r} is not an existing folder"
            ) from None
    return cache[name]


@redacted
def resolve_tools(config: SootheConfig) -> list[BaseTool]:
    """The tools named by ``execution.tools``, in order; a spec that does not resolve is a ``ConfigError``."""
    cache: dict[str, BaseTool] = {}
    out: list[BaseTool] = []
    for spec in config.execution.tools:
        if spec.startswith("builtin:"):
            out.append(_builtin(config, cache, spec.removeprefix("builtin:")))
        else:
            out.append(_import_tool(spec))
    return out


def _subagents(
    config: SootheConfig, tools: list[BaseTool], pool: ModelPool, controller: ConcurrencyController,
    default_model: BaseChatModel,
) -> dict[str, Any]:
    from soothe_planner.execution import react_agent

    by_name = {t.name: t for t in tools}
    cache: dict[str, BaseTool] = {}
    agents: dict[str, Any] = {}
    for name, sub in config.execution.subagents.items():
        subset: list[BaseTool] = []
        for ref in sub.tools:
            if ref.startswith("builtin:"):
                subset.append(_builtin(config, cache, ref.removeprefix("builtin:")))
            elif ":" in ref:
                subset.append(_import_tool(ref))
            elif ref in by_name:
                subset.append(by_name[ref])
            else:
                raise ConfigError(
                    f"execution.subagents.{name}.tools: no tool named {ref!r} in execution.tools "
                    f"(have: {', '.join(sorted(by_name)) or 'none'})"
                )
        model = pool.get(sub.model) if sub.model else default_model
        agent = react_agent(controller.wrap_model(model), subset, name=name, prompt=sub.description)
        agent.description = sub.description  # type: ignore[attr-defined]
        agents[name] = agent
    return agents


@redacted
def resolve_executor(
    config: SootheConfig,
    model: BaseChatModel | None = None,
    *,
    controller: ConcurrencyController | None = None,
    pool: ModelPool | None = None,
    tools: Sequence[BaseTool] | None = None,
) -> StepExecutor:
    """A ``StepExecutor`` with the configured tools, subagents, timeout and read-only flags.

    ``tools``: ``resolve_tools(config)`` done already (a server resolves them once per process:
    building a tool's argument schema costs more than the rest of a run's parts together).
    """
    from soothe_planner.execution import StepExecutor

    pool = pool or ModelPool(config)
    controller = controller or resolve_controller(config)
    tools = list(tools) if tools is not None else resolve_tools(config)
    names = {t.name for t in tools}
    unknown = [n for n in config.execution.read_only_tools if n not in names]
    if unknown:
        raise ConfigError(
            f"execution.read_only_tools: {', '.join(map(repr, unknown))} not among the tools "
            f"({', '.join(sorted(names)) or 'none'})"
        )
    agent_model = model if model is not None else pool.get()
    return StepExecutor(
        tools=tools,
        subagents=_subagents(config, tools, pool, controller, agent_model),
        agent_model=agent_model,
        controller=controller,
        step_timeout_s=config.execution.step_timeout_s,
        read_only=config.execution.read_only_tools,
        calls=config.execution.step_calls,
        recover_text_tool_calls=config.execution.recover_text_tool_calls,
        **_final_reply_check(config, agent_model),
    )


def _final_reply_check(config: SootheConfig, model: Any) -> dict[str, Any]:
    """The small-model rules' check of a final answer step's reply (``small_model.echo.echo_reask``),
    its re-ask sampled like the planner's re-asks (``planner.reask_temperature``), as executor
    arguments; none without the rules: on with ``planner.small_model_rules``, or where unset, when
    the model declares the rules or the config's model is the embedded one."""
    from soothe_planner.planner import echo_reask, reask_temperature, small_model_rules_on

    if not (small_model_rules_on(config.planner, model) or small_model_config(config)):
        return {}
    return {"final_reply_check": echo_reask, "reask_temperature": reask_temperature(config.planner, True)}


# --------------------------------------------------------------------------- a whole run


def resolve_seal_key(config: SootheConfig) -> SealKey:
    """The approval seal's key for ``config`` (see the module docstring), read on first use.

    Always given to the graph, because the gate may be turned on per run (a run's context); read
    here already when ``run.approval`` is on, so an unusable key file fails before any work.
    """
    from soothe_planner.graph import SealKey

    key = SealKey(Path(config.checkpoint.path).parent / SEAL_KEY_FILE)
    if config.run.approval:
        key.get()
    return key


def loop_options(config: SootheConfig) -> dict[str, Any]:
    """What ``build_strange_loop`` takes from a config, besides the planner, executor and persistence."""
    from soothe_planner.models import PlanContext

    return {
        "approval": config.run.approval,
        "synthesize": config.run.synthesize,
        "intake": config.run.intake,
        "context": PlanContext(workspace=str(config.execution.workspace)),
        "failure_policy": config.execution.failure_policy,
        "max_iterations": config.planner.max_iterations,
        "max_plan_steps": config.planner.max_plan_steps,
        "seal_key": resolve_seal_key(config),
    }


@dataclass
class ResolvedRun:
    """The parts of one run, sharing one controller and one model per model string."""

    config: SootheConfig
    controller: ConcurrencyController
    planner: LLMPlanner
    executor: StepExecutor
    model_name: str | None = None
    """The model string the run is built on (``None`` when an explicit model object was given)."""

    def graph(
        self, *, checkpointer: Any = None, store: Any = None, iteration_ceiling: int | None = None
    ) -> CompiledStateGraph[Any, Any, Any, Any]:
        """The StrangeLoop over these parts, with every option the config sets (the one place that builds it).

        ``checkpointer``/``store``: the run's persistence (``resolve_persistence``); leave both out
        where a server injects its own. With ``tracing.langfuse`` on, each run of the graph is a trace.
        ``iteration_ceiling``: the most iterations an input may ask for (a server's clients).
        """
        from soothe_planner.graph import build_strange_loop
        from soothe_planner.tracing import run_tracer

        tracer = run_tracer(self.config.tracing.langfuse)
        return build_strange_loop(
            self.planner,
            self.executor,
            checkpointer=checkpointer,
            store=store,
            callbacks=[tracer] if tracer is not None else (),
            model_name=self.model_name,
            iteration_ceiling=iteration_ceiling,
            **loop_options(self.config),
        )


@redacted
def resolve_run(
    config: SootheConfig,
    model: BaseChatModel | None = None,
    *,
    controller: ConcurrencyController | None = None,
    pool: ModelPool | None = None,
    tools: Sequence[BaseTool] | None = None,
) -> ResolvedRun:
    """Planner and executor for ``config``, sharing one ``ConcurrencyController`` and one model.

    ``controller``: the run's controller (default: ``resolve_controller(config).for_run()``, its
    own budget over the config's one set of LLM slots; a server passes one that shares its
    process-wide slots the same way). ``pool``: models already built,
    shared between runs (default: a new pool for this run). ``tools``: the resolved
    ``execution.tools``, shared between runs (default: resolved for this run).
    """
    pool = pool if pool is not None else ModelPool(config)
    controller = controller if controller is not None else resolve_controller(config).for_run()
    if model is not None:
        pool.built[config.models.default] = model
    planner = resolve_loop_planner(config, model, controller=controller, pool=pool)
    executor = resolve_executor(config, model, controller=controller, pool=pool, tools=tools)
    name = None if model is not None else config.models.default
    return ResolvedRun(config=config, controller=controller, planner=planner, executor=executor, model_name=name)


def build_graph(
    config: SootheConfig, model: BaseChatModel | None = None, *, checkpointer: Any = None, store: Any = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """``resolve_run(config, model).graph(...)``: the StrangeLoop for a config in one call."""
    return resolve_run(config, model).graph(checkpointer=checkpointer, store=store)


# --------------------------------------------------------------------------- checkpointer


@asynccontextmanager
async def resolve_persistence(config: SootheConfig) -> AsyncIterator[Persistence]:
    """The configured checkpointer and step-journal store, opened as a pair for the ``async with`` block."""
    from soothe_planner.graph import open_persistence

    ck = config.checkpoint
    dsn = ck.dsn.get_secret_value() if ck.dsn else None
    try:
        cm = open_persistence(ck.backend, path=ck.path, dsn=dsn)
        opened = await cm.__aenter__()
    except ConfigError as exc:
        if config.redact_text(str(exc)) == str(exc):
            raise
        raise ConfigError(config.redact_text(str(exc))) from None  # a path from ${VAR} is never printed
    except OSError as exc:
        raise ConfigError(f"checkpoint: cannot open the {ck.backend} backend: {exc.strerror or exc}") from None
    except Exception as exc:
        # a driver's message may quote the DSN, password included: name the failure kind only
        raise ConfigError(f"checkpoint: cannot open the {ck.backend} backend ({type(exc).__name__})") from None
    try:
        yield opened
    except BaseException as exc:
        if not await cm.__aexit__(type(exc), exc, exc.__traceback__):
            raise
    else:
        await cm.__aexit__(None, None, None)


@asynccontextmanager
async def resolve_checkpointer(config: SootheConfig) -> AsyncIterator[BaseCheckpointSaver[Any]]:
    """The configured checkpointer alone (``resolve_persistence`` also gives the step-journal store)."""
    async with resolve_persistence(config) as persistence:
        yield persistence.checkpointer
