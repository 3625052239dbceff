"""How does a run show up in Langfuse, and how does it stay out of the way when tracing is off?

One run is one trace. ``trace_run()`` builds a single ``langfuse.langchain.CallbackHandler`` for the
run and ``TraceHandle.config_for()`` puts it at the graph root, so every node, LLM call and step of
that run nests under one root span named after the run (``soothe-run: <goal excerpt>``). The handler
is per run and carries its own trace context, so two runs in one process never share a parent, even
when they run concurrently in one event loop. (Attaching a handler to a model instance instead would
make every call its own trace.)

What a trace carries:

- **trace id** derived from the thread id (``trace_id_for``), so a run resumed after a crash or an
  approval interrupt lands in the same trace as its first half; sampling (``sample_rate``) decides
  by trace id, so both halves are kept or dropped together;
- **session id** = the thread id, **user id** and **tags** from the configuration, environment and
  release on the client;
- **generations named by phase**: the planner tags each call with ``soothe_phase`` metadata
  (``plan-assess``, ``plan-generate``, ``plan-reask``, ``revise``, ``reflect``, ``continuation``,
  ``intake``, ``answer``); LangChain hands metadata down to nested runs, so the model call inside a
  structured-output chain is named after the phase too, with its token usage, and the chain's
  plumbing is folded away (the handler's adjustments live in ``_trace_handler.py``);
- **one span per step** (``trace_step``): ``step:<id>`` with the step's status; a failed step is an
  ``ERROR``-level span carrying the error text.

Off means off: when ``enabled`` is false, or either key is missing from the environment, there is
no handler, no client, no network and no log line beyond one notice per process for the
"enabled but no keys" mistake. Keys come only from ``LANGFUSE_PUBLIC_KEY`` and
``LANGFUSE_SECRET_KEY``; they never enter a config file, a span attribute or run metadata.

Weighed: langfuse as an optional extra (``soothe-planner[langfuse]``) or a core dependency. It
stays core: tracing is a documented feature that a YAML switch turns on, and a switch that needs a
second install step fails at the worst moment (mid-run, in production). Its cost is paid only when
used: ``langfuse`` is imported lazily, on the first traced run, so a package without it still
imports and the disabled path never touches it. A missing ``langfuse`` with tracing on is a
``ConfigError`` that says how to install it.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig

from soothe_planner.errors import ConfigError
from soothe_planner.tracing.handler import PHASE_KEY, make_handler

if TYPE_CHECKING:
    from langfuse import Langfuse

    from soothe_planner.models import StepResult

__all__ = [
    "TRACED_RUN_KEY",
    "LangfuseSettingsLike",
    "StepTrace",
    "TraceHandle",
    "client_for",
    "open_handle",
    "run_name_for",
    "trace_id_for",
    "trace_run",
    "trace_step",
]

logger = logging.getLogger(__name__)

PUBLIC_KEY_ENV = "LANGFUSE_PUBLIC_KEY"
SECRET_KEY_ENV = "LANGFUSE_SECRET_KEY"
RUN_PREFIX = "soothe-run"
# Langfuse propagates trace attributes only when they are short US-ASCII strings (<= 200 chars).
_MAX_ATTR = 200
_GOAL_EXCERPT = 60

_warned_missing_keys = False


class LangfuseSettingsLike(Protocol):
    """The fields of ``SootheConfig.tracing.langfuse`` this module reads (keys are not among them)."""

    enabled: bool
    base_url: str | None
    tags: Sequence[str]
    user_id: str | None
    environment: str | None
    release: str | None
    sample_rate: float


def trace_id_for(thread_id: str, run_key: str | None = None) -> str:
    """The trace id of a run: 32 hex chars, the same every time for the same thread (and key).

    Computed as Langfuse's ``create_trace_id(seed=...)`` does (SHA-256 of the seed, first 16 bytes),
    without importing langfuse. ``run_key`` separates several runs on one thread (e.g. follow-up
    turns) when each should be its own trace; a resumed run passes the same key as its first half.
    """
    seed = f"soothe-planner:{thread_id}" if run_key is None else f"soothe-planner:{thread_id}:{run_key}"
    return hashlib.sha256(seed.encode("utf-8")).digest()[:16].hex()


def run_name_for(goal: str, *, resumed: bool = False) -> str:
    """The root span's name: ``soothe-run: <goal excerpt>`` (``soothe-run (resumed): ...`` on resume)."""
    text = " ".join(goal.split())
    if len(text) > _GOAL_EXCERPT:
        text = text[: _GOAL_EXCERPT - 3].rstrip() + "..."
    prefix = f"{RUN_PREFIX} (resumed)" if resumed else RUN_PREFIX
    return f"{prefix}: {text}" if text else prefix


def _ascii(value: str) -> str:
    return value.encode("ascii", "replace").decode("ascii")[:_MAX_ATTR]


@dataclass
class TraceHandle:
    """What a traced (or untraced) run needs: callbacks for the graph root, metadata, the trace's URL.

    A disabled handle has no callbacks and ``config_for`` returns the config unchanged, so callers
    never branch on whether tracing is on.
    """

    enabled: bool
    run_name: str
    session_id: str
    trace_id: str | None = None
    callbacks: list[BaseCallbackHandler] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    tags: list[str] = field(default_factory=list)
    _client: Langfuse | None = field(default=None, repr=False)
    _url: str | None = field(default=None, repr=False)
    _url_resolved: bool = field(default=False, repr=False)

    def config_for(self, config: RunnableConfig | None = None) -> RunnableConfig:
        """``config`` plus this run's handler, run name, tags and trace metadata (never mutated)."""
        merged: RunnableConfig = RunnableConfig(**(config or {}))
        if not self.enabled:
            return merged
        existing = merged.get("callbacks")
        if existing is None:
            merged["callbacks"] = list(self.callbacks)
        elif isinstance(existing, list):
            merged["callbacks"] = [*existing, *self.callbacks]
        else:  # a callback manager: LangChain lets us add handlers to it, inherited by children
            manager = existing.copy()
            for handler in self.callbacks:
                manager.add_handler(handler, inherit=True)
            merged["callbacks"] = manager
        merged["run_name"] = self.run_name
        # Tags travel as Langfuse trace metadata, not LangChain run tags: run tags are copied onto
        # every nested observation, trace tags belong to the trace once.
        merged["metadata"] = {**(merged.get("metadata") or {}), **self.metadata}
        return merged

    @property
    def url(self) -> str | None:
        """The trace's URL in the Langfuse UI, or None (tracing off, or the server did not say).

        Langfuse URLs name the project, which only the server knows: the first call asks it once.
        """
        if not self.enabled or self._client is None or self.trace_id is None:
            return None
        if not self._url_resolved:
            self._url_resolved = True
            try:
                self._url = self._client.get_trace_url(trace_id=self.trace_id)
            except Exception as exc:  # the URL is a convenience; the trace itself is already sent
                logger.debug("could not resolve the Langfuse trace URL: %s", exc)
                self._url = None
        return self._url

    def summary(self) -> str | None:
        """One line for a CLI or notebook: the URL when known, else the trace id; None when off."""
        if not self.enabled:
            return None
        url = self.url
        if url:
            return f"Langfuse trace: {url}"
        return f"Langfuse trace id: {self.trace_id} (session {self.session_id})"

    def flush(self) -> None:
        """Send every finished span now (``trace_run`` does this on exit)."""
        if self._client is not None:
            self._client.flush()


def _settings_from(settings: Any) -> LangfuseSettingsLike | None:
    """Accept the ``tracing.langfuse`` block, or a whole config holding one, or None."""
    if settings is None:
        return None
    tracing = getattr(settings, "tracing", None)
    if tracing is not None and hasattr(tracing, "langfuse"):
        return tracing.langfuse
    return settings


def client_for(settings: Any) -> Langfuse | None:
    """The Langfuse client the settings (``tracing.langfuse`` or a whole config) ask for, or None when off.

    Off when disabled, or when either key is missing from the environment (one notice per process).
    """
    cfg = _settings_from(settings)
    return _client_from_env(cfg) if cfg is not None and cfg.enabled else None


def _client_from_env(cfg: LangfuseSettingsLike) -> Langfuse | None:
    global _warned_missing_keys
    public_key = os.environ.get(PUBLIC_KEY_ENV)
    secret_key = os.environ.get(SECRET_KEY_ENV)
    if not public_key or not secret_key:
        if not _warned_missing_keys:
            _warned_missing_keys = True
            logger.warning(
                "tracing.langfuse.enabled is true but %s/%s are not set; tracing is off for this "
                "process (set both keys in the environment to turn it on)",
                PUBLIC_KEY_ENV,
                SECRET_KEY_ENV,
            )
        return None
    try:
        from langfuse import Langfuse
    except ImportError as exc:  # langfuse is a core dependency, but an install can still lack it
        raise ConfigError(
            "tracing.langfuse.enabled is true but the 'langfuse' package is not installed; "
            "install it with `pip install langfuse` or set tracing.langfuse.enabled: false"
        ) from exc
    kwargs: dict[str, Any] = {"public_key": public_key, "secret_key": secret_key}
    if cfg.base_url:
        kwargs["base_url"] = cfg.base_url
    if cfg.environment:
        kwargs["environment"] = cfg.environment
    if cfg.release:
        kwargs["release"] = cfg.release
    if cfg.sample_rate is not None:
        kwargs["sample_rate"] = cfg.sample_rate
    return Langfuse(**kwargs)


@contextmanager
def trace_run(
    settings: Any = None,
    *,
    goal: str,
    thread_id: str,
    resumed: bool = False,
    run_key: str | None = None,
    client: Langfuse | None = None,
) -> Iterator[TraceHandle]:
    """Trace one run of the loop; flush on exit.

    ``settings`` is ``SootheConfig.tracing.langfuse`` (or the whole config, or None). Tracing is on
    when an explicit ``client`` is given (tests, notebooks with an in-memory exporter), or when the
    settings say ``enabled`` and both keys are in the environment. Otherwise the handle is a no-op.

    Usage::

        with trace_run(config.tracing.langfuse, goal=goal, thread_id=tid) as trace:
            state = await graph.ainvoke(inputs, trace.config_for(run_config))
        print(trace.summary())
    """
    cfg = _settings_from(settings)
    if client is None and cfg is not None and cfg.enabled:
        client = _client_from_env(cfg)
    if client is None:
        yield TraceHandle(enabled=False, run_name=run_name_for(goal, resumed=resumed), session_id=thread_id)
        return
    handle = open_handle(client, cfg, goal=goal, thread_id=thread_id, resumed=resumed, run_key=run_key)
    try:
        yield handle
    finally:
        try:
            client.flush()
        except Exception as exc:  # a tracing outage must never fail the run it describes
            logger.warning("Langfuse flush failed: %s", exc)


TRACED_RUN_KEY = "soothe_thread_id"
"""Run metadata that marks a run already traced by ``trace_run`` (``RunTracer`` leaves it alone)."""


def open_handle(
    client: Langfuse,
    cfg: LangfuseSettingsLike | None,
    *,
    goal: str,
    thread_id: str,
    resumed: bool = False,
    run_key: str | None = None,
) -> TraceHandle:
    """The enabled handle of one run: its handler, trace id, name and trace metadata (one place)."""
    run_name = run_name_for(goal, resumed=resumed)
    trace_id = trace_id_for(thread_id, run_key)
    tags = [_ascii(t) for t in (cfg.tags if cfg is not None else ())]
    metadata: dict[str, Any] = {
        "langfuse_session_id": _ascii(thread_id),
        "langfuse_trace_name": _ascii(run_name),
        TRACED_RUN_KEY: thread_id,
        "soothe_resumed": resumed,
    }
    if tags:
        metadata["langfuse_tags"] = tags
    if cfg is not None and cfg.user_id:
        metadata["langfuse_user_id"] = _ascii(cfg.user_id)
    return TraceHandle(
        enabled=True,
        run_name=run_name,
        session_id=thread_id,
        trace_id=trace_id,
        callbacks=[make_handler(client, trace_id)],
        metadata=metadata,
        tags=tags,
        _client=client,
    )


# --------------------------------------------------------------------------- steps


@dataclass
class StepTrace:
    """The span of one step while it runs; ``finish(result)`` records its outcome."""

    step_id: str
    _manager: Any = None
    _done: bool = False

    @property
    def active(self) -> bool:
        return self._manager is not None

    async def finish(self, result: StepResult) -> None:
        """End the span with the step's status; a failed step ends at ERROR level with its error."""
        if self._manager is None or self._done:
            return
        self._done = True
        if result.success:
            await self._manager.on_chain_end(
                {"status": "completed", "output": result.output[:2000], "attempt": result.attempt}
            )
        else:
            await self._manager.on_chain_error(
                StepFailed(result.step_id, result.error_type or "failed", result.error or "")
            )


class StepFailed(Exception):
    """Marks a step's span as failed in a trace (never raised to callers)."""

    def __init__(self, step_id: str, error_type: str, error: str) -> None:
        super().__init__(f"step {step_id!r} {error_type}: {error}"[:2000])


@asynccontextmanager
async def trace_step(
    step_id: str, *, description: str = "", config: RunnableConfig | None = None
) -> AsyncIterator[StepTrace]:
    """A ``step:<id>`` span under the current graph node, for as long as the step runs.

    Works with any LangChain callback handler (Langfuse, LangSmith, a test recorder): it opens a
    child run on the callbacks of ``config`` (default: the config of the runnable being executed)
    and makes it the parent of whatever the step invokes. Without callbacks it costs nothing.
    """
    from langchain_core.runnables.config import (
        ensure_config,
        get_async_callback_manager_for_config,
        patch_config,
        var_child_runnable_config,
    )

    parent = ensure_config(config)
    if not parent.get("callbacks"):
        yield StepTrace(step_id)
        return
    name = f"step:{step_id}"
    # The phase rides in inherited metadata, so every call the step makes is named after it.
    parent = patch_config(parent)
    parent["metadata"] = {**(parent.get("metadata") or {}), PHASE_KEY: name}
    manager = get_async_callback_manager_for_config(parent)
    run_manager = await manager.on_chain_start(
        None, {"step_id": step_id, "description": description[:500]}, name=name
    )
    span = StepTrace(step_id, run_manager)
    child = patch_config(parent, callbacks=run_manager.get_child())
    token = var_child_runnable_config.set(child)
    try:
        yield span
    except BaseException as exc:
        if not span._done:
            span._done = True
            await run_manager.on_chain_error(exc)
        raise
    finally:
        var_child_runnable_config.reset(token)
        if not span._done:  # the caller never said how it went: close it without a verdict
            span._done = True
            await run_manager.on_chain_end({"status": "unknown"})
