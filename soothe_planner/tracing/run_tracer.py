"""How does a graph built once trace each of its runs as its own trace?

``trace_run`` wraps one run from the outside: the caller knows the goal and the thread and puts a
handler in that run's config. A graph served by a LangGraph server is built once and run by the
server, so nobody is outside it to do that. ``RunTracer`` is the same tracing carried by the
graph: one handler attached at the graph's root (``build_strange_loop(callbacks=[...])``) that,
when a run of the graph starts, opens that run's handle exactly as ``trace_run`` would (the same
trace id from the thread, session, tags, user, root span name — ``open_handle`` builds both) and
passes every event of that run's tree to it. So the CLI and the server trace a config's runs the
same way.

What was weighed:

- **One handler for every run, or one per run.** A single Langfuse handler at the root would put
  every run of the process under one fixed trace context. The tracer keeps one handler per root
  run and routes each event by the root its run descends from.
- **A run the caller already traces** (its config carries ``trace_run``'s metadata) is left to the
  caller's handler, so wrapping a traced graph in ``trace_run`` never makes a second trace.
- **What the root is called.** The goal comes from the run's input (``goal_input``); a resumed run
  (a ``Command`` or no input) is ``soothe-run (resumed)`` and lands in the thread's trace.
- **No flush per run.** The client's exporter sends in the background and on exit; flushing at
  each run's end would block the server's event loop on the network.
- **Inline.** ``run_inline`` keeps the routing tables on the event loop's thread; a tracing error
  is logged by LangChain's callback manager, never raised into the run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from soothe_planner.tracing.runs import TRACED_RUN_KEY, TraceHandle, client_for, open_handle

if TYPE_CHECKING:
    from langfuse import Langfuse

    from soothe_planner.tracing.runs import LangfuseSettingsLike

__all__ = ["RunTracer", "run_tracer"]

_STARTS = ("on_chain_start", "on_chat_model_start", "on_llm_start", "on_tool_start", "on_retriever_start")
_ENDS = (
    "on_chain_end", "on_chain_error", "on_llm_end", "on_llm_error", "on_tool_end", "on_tool_error",
    "on_retriever_end", "on_retriever_error",
)  # fmt: skip
_DURING = ("on_llm_new_token", "on_text", "on_retry", "on_agent_action", "on_agent_finish", "on_custom_event")


def _routed(event: str) -> Callable[..., Any]:
    def method(self: RunTracer, *args: Any, **kwargs: Any) -> Any:
        return self._route(event, args, kwargs)

    method.__name__ = event
    return method


class RunTracer(BaseCallbackHandler):
    """Attached once at a graph's root: each top-level run of the graph becomes its own trace."""

    run_inline = True

    def __init__(self, client: Langfuse, settings: LangfuseSettingsLike | None = None) -> None:
        self._client = client
        self._settings = settings
        self._root_of: dict[UUID, UUID] = {}  # every open run of a traced tree -> its root run
        self._handles: dict[UUID, TraceHandle] = {}  # root run -> that run's handle
        self.last: TraceHandle | None = None  # the most recent run's handle (its trace id, its URL)

    def _open(self, run_id: UUID, inputs: Any, kwargs: dict[str, Any]) -> bool:
        metadata = dict(kwargs.get("metadata") or {})
        if TRACED_RUN_KEY in metadata:
            return False  # the caller traces this run with trace_run
        goal = inputs.get("goal") if isinstance(inputs, Mapping) else None
        thread = metadata.get("thread_id")
        handle = open_handle(
            self._client,
            self._settings,
            goal=goal if isinstance(goal, str) else "",
            thread_id=str(thread) if thread is not None else run_id.hex,
            resumed=not isinstance(goal, str),
        )
        self._handles[run_id] = self.last = handle
        self._root_of[run_id] = run_id
        kwargs["name"] = handle.run_name
        kwargs["metadata"] = {**metadata, **handle.metadata}
        return True

    def _route(self, event: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        run_id: UUID = kwargs["run_id"]
        if event in _STARTS:
            parent = kwargs.get("parent_run_id")
            if parent is None:
                if event != "on_chain_start" or not self._open(run_id, args[1] if len(args) > 1 else None, kwargs):
                    return None
            elif parent in self._root_of:
                self._root_of[run_id] = self._root_of[parent]
            else:
                return None
        root = self._root_of.get(run_id)
        if root is None:
            return None
        handler = self._handles[root].callbacks[0]
        try:
            return getattr(handler, event)(*args, **kwargs)
        finally:
            if event in _ENDS:
                del self._root_of[run_id]
                if run_id == root:
                    del self._handles[root]


# Every callback LangChain may send is routed the same way; one definition instead of sixteen.
for _event in (*_STARTS, *_ENDS, *_DURING):
    setattr(RunTracer, _event, _routed(_event))


def run_tracer(settings: Any, *, client: Langfuse | None = None) -> RunTracer | None:
    """A ``RunTracer`` for ``tracing.langfuse`` settings (or a whole config), or None when tracing is off.

    Off as ``trace_run`` is off: disabled, or a key missing from the environment. An explicit
    ``client`` (tests, notebooks with an in-memory exporter) turns it on.
    """
    from soothe_planner.tracing.runs import _settings_from

    cfg = _settings_from(settings)
    client = client or client_for(cfg)
    return RunTracer(client, cfg) if client is not None else None
