"""The StrangeLoop as a LangGraph graph: plan → execute → assess until the goal is done.

::

    START → intake ─trivial→ answer → finish → END
              └→ plan_assess ─done→ goal_completion → finish
                    ├─failed / max_iterations→ finish   (status "failed", last plan result kept)
                    └→ plan_generate → validate → [approve] → execute → record_iteration → plan_assess

``build_strange_loop`` is wiring only: the nodes are methods of ``LoopNodes`` (``loop_nodes.py``,
over the planner's nodes in ``nodes.py``), and the edges are the table ``_WIRING`` below — each node
with where it goes next, a fixed node or a router and the targets it may choose. The planner is
any ``LoopPlannerProtocol`` implementation; it is checked against the protocol (signatures, not
only names) before anything is compiled.

What was weighed:

- **Plan mode.** Nothing with side effects runs while planning: the planner calls no tool, it
  only names them. So the planner is offered every configured tool — each marked read-only or
  not, with its argument schema — plus subagents and remote graphs, and a plan may name a write
  tool the configuration lists (a goal such as "write X into FILE" needs a typed ``write_file``
  step). The plan manager's allow-list is that set; a tool outside it is refused before anything
  runs, and write steps run only after validation (and approval, when the gate is on).
- **Crash and resume.** Checkpoints are written at node boundaries; the ``execute`` node may run
  for long. Each finished step is written through to the graph's store (the step journal, see
  ``execution/scheduler.py``) before its dependents start, and a rerun of ``execute`` after a kill
  replays journaled results instead of running those steps again. Compile with a durable store
  (``persistence.py`` pairs one with each checkpointer) and run with ``durability="sync"`` when a
  lost checkpoint would cost a paid model call.
- **Recursion limit.** LangGraph 1.2's default is huge; ``run_config`` sets it from
  ``max_iterations`` (nodes per iteration, plus slack for re-asks and rejected approvals), so a
  loop that never converges stops with ``GraphRecursionError`` rather than running on. The compiled
  graph carries the same limit for ``max_iterations`` as a default. A run whose recursion limit
  is lower than its iteration cap needs (``run_config(thread, 3)`` on a graph built for 10) has
  its cap lowered at intake to what the limit allows, so the loop's own check ends it — status
  ``failed``, "max_iterations (3) reached" — instead of LangGraph raising mid-iteration and
  leaving the checkpoint ``running``.
- **A bounded goal.** A goal goes into every prompt of its run and into every checkpoint, so one
  over ``MAX_GOAL_CHARS`` is refused — by ``goal_input``, and at intake for any other input
  shape (the run ends ``failed`` naming the limit) — rather than paid for on every call. Long
  material belongs in a workspace file the goal names.
- **A ceiling for the input's cap.** ``iteration_ceiling`` (a server sets it from its
  ``server.max_iterations``) fails a run whose input asks for more iterations, naming the key, as
  the server's factory refuses the same value in a run's context.
- **Options are explicit.** What the graph needs besides the planner (``max_iterations``,
  ``max_plan_steps``, intake routing, callbacks such as a run tracer) are arguments, not guesses
  about a planner's settings; ``config.build_graph`` fills them from a YAML config, so every entry
  point builds the same graph from the same config.
- **One goal per run.** The intake node starts each run's loop clean (``request.py``), so a
  follow-up on the same thread starts a fresh DAG, whether the input is ``goal_input(...)``, a bare
  ``{"goal": ...}`` or a chat turn (``{"messages": [...]}``). It gives each goal run an id that
  scopes the step journal.
- **Typed for clients.** The graph declares its input (``LoopInput``), output (``LoopGraphState``)
  and context (``RunContext``) schemas, so a LangGraph server shows them; the context's keys
  (approval, the iteration and step caps) are read per run by the nodes.
- **Sync and async.** Every node has both forms: the async method, and a sync one that runs it on
  the package's sync bridge (``concurrency/bridge.py``), so ``graph.invoke`` works in a script or a
  notebook. The nodes are wrapped in LangGraph's own ``RunnableCallable`` (its private module:
  the one node wrapper that takes both forms without adding a traced run of its own).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableConfig
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from soothe_planner.concurrency import ConcurrencyPolicy, run_sync
from soothe_planner.deliverable import Deliverable, parse_deliverable
from soothe_planner.execution import StepExecutor
from soothe_planner.models import FailurePolicy, PlanContext, clean_text
from soothe_planner.protocols import LoopPlannerProtocol, protocol_mismatches

from .approval import SealKey
from .loop_nodes import LoopNodes
from .nodes import run_options
from .state import LoopGraphState, LoopInput, RunContext, StrangeLoopState

__all__ = [
    "MAX_GOAL_CHARS",
    "NODES_PER_ITERATION",
    "StrangeLoopState",
    "build_strange_loop",
    "check_goal",
    "goal_input",
    "iterations_within",
    "offered_context",
    "recursion_limit_for",
    "run_config",
]

MAX_GOAL_CHARS = 32_000
"""The longest goal a run takes (about 8k tokens): it is sent in every prompt and kept in every checkpoint."""

NODES_PER_ITERATION = 8
"""plan_assess, plan_generate, validate, approve, execute, record_iteration, plus one re-ask round."""


def check_goal(goal: str) -> str:
    """``goal`` unchanged, or ``ValueError`` if it is over ``MAX_GOAL_CHARS``."""
    if len(goal) > MAX_GOAL_CHARS:
        raise ValueError(
            f"the goal is {len(goal)} characters, over the {MAX_GOAL_CHARS}-character limit for a goal "
            "(it is sent in every prompt); put long material in a workspace file and name the file in the goal"
        )
    return goal


def recursion_limit_for(max_iterations: int) -> int:
    """Graph steps a run of ``max_iterations`` may take: every node of each iteration, plus slack."""
    if max_iterations < 1:
        raise ValueError(f"max_iterations must be >= 1, got {max_iterations}")
    return NODES_PER_ITERATION * (max_iterations + 1) + 8


def run_config(thread_id: str, max_iterations: int = 10, **configurable: Any) -> dict[str, Any]:
    """The run config for a thread: its id and a recursion limit derived from ``max_iterations``."""
    return {
        "configurable": {"thread_id": thread_id, **configurable},
        "recursion_limit": recursion_limit_for(max_iterations),
    }


def goal_input(
    goal: str,
    *,
    thread_id: str = "default",
    max_iterations: int | None = None,
    prior_goals: Sequence[str] = (),
    recent_messages: Sequence[str] = (),
    deliverable: Deliverable | Mapping[str, Any] | str | None = None,
) -> dict[str, Any]:
    """The graph input for one goal (a ``LoopInput``); the intake node starts the loop clean.

    The request keys are all set, so nothing of the thread's last request carries over: its
    route (``intake``), its prior goals, its recent messages and its deliverable.

    ``deliverable``: what the goal must hand back, when the caller knows it (a ``Deliverable``,
    its dict, or the CLI's spelling ``"file:REPORT.md"``); otherwise the model declares it. A bad
    one is a ``ValueError`` naming the value and the rule, before anything runs.
    """
    if isinstance(deliverable, str):
        deliverable = parse_deliverable(deliverable)
    elif isinstance(deliverable, Mapping):
        deliverable = Deliverable.model_validate(deliverable)
    data: dict[str, Any] = {
        "goal": check_goal(clean_text(goal)),  # a goal from argv may hold lone surrogates (undecodable bytes)
        "thread_id": thread_id,
        "prior_goals": list(prior_goals),
        "recent_messages": list(recent_messages),
        "intake": None,
        "deliverable": deliverable.model_dump(mode="json") if deliverable is not None else None,
    }
    if max_iterations is not None:
        data["max_iterations"] = max_iterations
    return data


def offered_context(executor: StepExecutor, base: PlanContext | None = None, *, plan_mode: bool = True) -> PlanContext:
    """The context offered to the planner: every tool (marked read-only or not, with its argument
    schema) plus subagents and remote graphs, then what ``base`` offers besides.

    ``plan_mode`` is kept for callers: planning runs no tool in either mode, so both offer the same.
    """
    base = base or PlanContext()
    caps = executor.capabilities()
    names = {c.name for c in caps}
    extra = [c for c in base.available_capabilities if c.name not in names]
    return base.model_copy(update={"available_capabilities": [*caps, *extra]})


Node = Callable[[Any], Awaitable[dict[str, Any]]]
Router = Callable[[Any], str]
Next = str | tuple[Router | str, list[str]]


def _wiring(nodes: LoopNodes) -> dict[str, Next]:
    """Each node, in the order it is added, with where it goes next: a node, or ``(router, targets)``.

    A router given by name is a method of ``nodes``; its name is what a trace shows for the edge.
    """
    table: dict[str, Next] = {
        "intake": ("after_intake", ["answer", "plan_assess", END]),
        "answer": "finish",
        "plan_assess": ("after_assess", ["goal_completion", "plan_generate", END]),
        "plan_generate": ("after_generate", ["validate", END]),
        "validate": ("after_validate", ["execute", "plan_generate", END, "approve"]),
        "approve": ("after_approve", ["execute", "plan_generate", END]),
        "execute": ("after_execute", ["record_iteration", END]),
        "record_iteration": "plan_assess",
        "goal_completion": "finish",
        "finish": END,
    }
    return table


def iterations_within(recursion_limit: int) -> int:
    """The most iterations a run with ``recursion_limit`` can finish (the inverse of ``recursion_limit_for``)."""
    return max(1, (recursion_limit - 8) // NODES_PER_ITERATION - 1)


def _bounded_intake(intake: Node, default_cap: int, ceiling: int | None) -> Node:
    """``intake``, holding the run's iteration cap to the ceiling and to what its recursion limit allows."""

    async def run(state: Any) -> dict[str, Any]:
        asked = state.get("max_iterations")
        if ceiling is not None and isinstance(asked, int) and asked > ceiling:
            error = f"input max_iterations = {asked}: above this server's ceiling of {ceiling} (server.max_iterations)"
            return {"status": "failed", "error": error, "max_iterations": ceiling}
        update = await intake(state)
        if update.get("status") == "failed":
            return update
        goal = update.get("goal")
        if isinstance(goal, str) and len(goal) > MAX_GOAL_CHARS:
            try:
                check_goal(goal)
            except ValueError as exc:
                shown = goal[:200] + "…"  # the state keeps no second copy of the whole goal
                return {**update, "goal": shown, "served_goal": shown, "status": "failed", "error": str(exc)}
        cap = asked or run_options().get("max_iterations") or default_cap
        try:
            from langgraph.config import get_config

            limit = get_config().get("recursion_limit")
        except (RuntimeError, KeyError, LookupError):  # called outside a graph run
            limit = None
        if isinstance(limit, int) and limit < recursion_limit_for(cap):
            update["max_iterations"] = min(cap, iterations_within(limit))
        return update

    return run


def _both_forms(name: str, node: Callable[[Any], Any]) -> RunnableCallable:
    """The node as LangGraph runs it: the async method, and a sync form over the sync bridge."""

    def sync(state: Any) -> Any:
        return run_sync(node(state))

    return RunnableCallable(sync, node, name=name, trace=False)


def build_strange_loop(
    planner: LoopPlannerProtocol,
    executor: StepExecutor,
    *,
    checkpointer: Any = None,
    store: Any = None,
    policy: ConcurrencyPolicy | None = None,
    approval: bool = False,
    context: PlanContext | None = None,
    failure_policy: str | FailurePolicy = "block",
    synthesize: bool = False,
    plan_mode: bool = True,
    intake: bool = True,
    max_iterations: int = 10,
    max_plan_steps: int = 8,
    callbacks: Sequence[BaseCallbackHandler] = (),
    name: str = "strange_loop",
    model_name: str | None = None,
    seal_key: bytes | SealKey | None = None,
    iteration_ceiling: int | None = None,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the StrangeLoop over any ``LoopPlannerProtocol`` implementation and ``executor``.

    ``checkpointer``/``store``: persistence (``persistence.py`` opens matching pairs; the store
    holds the step journal). ``policy``: ``step_parallelism="sequential"`` forces one step at a
    time; by default the executor's controller policy applies. ``approval``: pause for a human
    after validation (see ``approval.py``). ``intake=False``: no routing call, every goal gets
    the full loop. ``max_iterations``: the cap when the input names none, and the compiled
    default recursion limit. ``max_plan_steps``: the goal DAG's step cap. ``callbacks``: handlers
    attached at the graph's root for every run (e.g. a per-run tracer). ``model_name``: the
    model string the planner runs on, if it came from one (a run context naming another model is
    refused rather than ignored). ``seal_key``: the key of the approval seal (HMAC-SHA-256),
    or a ``SealKey`` read on first use; without one the seal is a plain SHA-256 (``approval.py``). ``iteration_ceiling``: the most iterations an input may ask for
    (a server's). Run with ``run_config(thread_id, max_iterations)``; a
    ``RunContext`` (``context=``) may change approval and the caps per run. A planner that does not implement the protocol
    (a missing method, or one that cannot take the protocol's arguments) is a ``TypeError`` here.
    """
    problems = protocol_mismatches(planner, LoopPlannerProtocol)
    if problems:
        raise TypeError("the planner does not implement LoopPlannerProtocol: " + "; ".join(problems))
    nodes = LoopNodes(
        planner,
        executor,
        context=offered_context(executor, context, plan_mode=plan_mode),
        policy=policy or executor.controller.policy,
        approval=approval,
        synthesize=synthesize,
        failure_policy=failure_policy,
        max_iterations=max_iterations,
        max_plan_steps=max_plan_steps,
        intake=intake,
        model_name=model_name,
        seal_key=seal_key,
    )
    g: StateGraph[Any, Any, Any, Any] = StateGraph(
        StrangeLoopState, context_schema=RunContext, input_schema=LoopInput, output_schema=LoopGraphState
    )
    table = _wiring(nodes)
    for node in table:
        body: Node = getattr(nodes, node)
        if node == "intake":
            body = _bounded_intake(body, max_iterations, iteration_ceiling)
        g.add_node(node, _both_forms(node, nodes.metered(node, body)))
    g.add_edge(START, "intake")
    for node, following in table.items():
        if isinstance(following, str):
            g.add_edge(node, following)
        else:
            router, targets = following
            # Every way out passes "finish", which writes the outcome into the chat.
            path_map: dict[Hashable, str] = {t: ("finish" if t == END else t) for t in targets}
            g.add_conditional_edges(node, getattr(nodes, router) if isinstance(router, str) else router, path_map)
    compiled = g.compile(checkpointer=checkpointer, store=store, name=name)
    # A default, so a caller who forgets run_config() still gets a bounded loop; a recursion_limit
    # in the caller's config wins.
    defaults: RunnableConfig = {"recursion_limit": recursion_limit_for(max_iterations)}
    if callbacks:
        defaults["callbacks"] = list(callbacks)
    limited: CompiledStateGraph[Any, Any, Any, Any] = compiled.with_config(defaults)
    return limited
