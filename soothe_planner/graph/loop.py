"""The StrangeLoop as a LangGraph graph: plan → execute → assess until the goal is done.

::

    START → intake ─trivial→ answer → END
              └→ plan_assess ─done→ goal_completion → END
                    ├─failed / max_iterations→ END   (status "failed", last plan result kept)
                    └→ plan_generate → validate → [approve] → execute → record_iteration → plan_assess

The planner's nodes (``graph/nodes.py``) assess, generate, validate and record; this module adds
the ``execute`` node (the ``StepExecutor``'s eager dataflow runs *inside* it, because LangGraph's
``Send`` fan-out waits for the slowest branch of each superstep) and the optional ``approve`` gate
(``graph/approval.py``).

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
  loop that never converges stops with ``GraphRecursionError`` rather than running on.
- **One goal per run.** ``goal_input`` builds the input for a goal, resetting the per-goal keys of
  a thread's state, so a follow-up on the same thread starts a fresh DAG. The intake node gives
  each goal run an id that scopes the step journal.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import interrupt

from soothe_planner.concurrency import ConcurrencyPolicy
from soothe_planner.dag import PlanManager
from soothe_planner.errors import PlannerError
from soothe_planner.execution import StepExecutor
from soothe_planner.graph.approval import parse_reply, render_decision, seal_digest
from soothe_planner.graph.nodes import (
    PlannerNodes,
    emit,
    route_after_assess,
    route_after_intake,
    route_after_resolve,
)
from soothe_planner.graph.state import LoopGraphState
from soothe_planner.models import AgentDecision, FailurePolicy, PlanContext

__all__ = [
    "NODES_PER_ITERATION",
    "StrangeLoopState",
    "build_strange_loop",
    "goal_input",
    "offered_context",
    "recursion_limit_for",
    "run_config",
]

NODES_PER_ITERATION = 8
"""plan_assess, plan_generate, validate, approve, execute, record_iteration, plus one re-ask round."""


class StrangeLoopState(LoopGraphState, total=False):
    """``LoopGraphState`` plus what the graph itself needs (still plain data)."""

    run_id: str | None  # scopes the step journal to one goal run on a thread
    pre_approval_plan_manager: dict[str, Any] | None  # the DAG before the decision awaiting approval


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
) -> dict[str, Any]:
    """The graph input for one goal: resets every per-goal key, so a thread can take follow-ups."""
    data: dict[str, Any] = {
        "goal": goal,
        "thread_id": thread_id,
        "prior_goals": list(prior_goals),
        "recent_messages": list(recent_messages),
        "continuation": bool(prior_goals),
        "intake": None,
        "iteration": 0,
        "assessment": None,
        "plan_result": None,
        "current_decision": None,
        "plan_manager": None,
        "step_results": [],
        "action_history": [],
        "working_memory": "",
        "sealed_plan": None,
        "approval_feedback": None,
        "status": "running",
        "final_answer": None,
        "error": None,
        "run_id": None,  # set by the intake node, once per goal run
        "pre_approval_plan_manager": None,
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


def _journal(executor: StepExecutor) -> Any:
    if executor.journal is not None:
        return executor.journal
    try:
        from langgraph.config import get_store

        return get_store()
    except Exception:  # no store compiled in: no journal, steps rerun after a crash
        return None


def build_strange_loop(
    planner: Any,
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
    name: str = "strange_loop",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the StrangeLoop over ``planner`` (an ``LLMPlanner``) and ``executor``.

    ``checkpointer``/``store``: persistence (``persistence.py`` opens matching pairs; the store
    holds the step journal). ``policy``: ``step_parallelism="sequential"`` forces one step at a
    time; by default the executor's controller policy applies. ``approval``: pause for a human
    after validation (see ``approval.py``). Run with ``run_config(thread_id, max_iterations)``.
    """
    pol = policy or executor.controller.policy
    ctx = offered_context(executor, context, plan_mode=plan_mode)
    nodes = PlannerNodes(planner, context=ctx, synthesize=synthesize, failure_policy=failure_policy)

    async def intake(state: StrangeLoopState) -> dict[str, Any]:
        update = await nodes.intake(state)
        # Every goal run gets its own journal scope: a follow-up on the thread that repeats a step
        # (same goal, same step text) must run it again, not replay the earlier run's result. The
        # id is checkpointed with this node's output, so a resumed run keeps it.
        update["run_id"] = uuid.uuid4().hex
        return update

    async def validate(state: StrangeLoopState) -> dict[str, Any]:
        update = await nodes.resolve_decision(state)
        if approval:
            # Kept so a rejected plan can be taken back out of the DAG before the planner revises it.
            update["pre_approval_plan_manager"] = state.get("plan_manager")
        return update

    async def approve(state: StrangeLoopState) -> dict[str, Any]:
        # No side effects before interrupt(): on resume this node runs again from its start.
        decision = state.get("current_decision") or {}
        digest = seal_digest(decision)
        sealed = state.get("sealed_plan") or {}
        if sealed.get("sha256") == digest:
            # This exact plan was approved already: no second question.
            return {"approval_feedback": None}
        rendering = render_decision(decision)
        reply = parse_reply(interrupt({"plan": decision, "rendering": rendering, "sha256": digest}))
        if reply.approved:
            emit({"event": "approval", "approved": True, "sha256": digest})
            return {
                "sealed_plan": {"sha256": digest, "plan": decision, "rendering": rendering},
                "approval_feedback": None,
            }
        emit({"event": "approval", "approved": False, "feedback": reply.feedback})
        note = f"The human rejected the proposed plan. Their feedback: {reply.feedback or '(none given)'}"
        memory = ((state.get("working_memory") or "") + "\n" + note).strip()
        return {
            "approval_feedback": reply.feedback,
            "working_memory": memory,
            "plan_manager": state.get("pre_approval_plan_manager"),
            "current_decision": None,
            "sealed_plan": None,
        }

    async def execute(state: StrangeLoopState) -> dict[str, Any]:
        decision = state.get("current_decision")
        pm = PlanManager.from_dict(state["plan_manager"] or {})
        in_flight = pm.in_flight_decision()
        if approval:
            refusal = _check_seal(decision, in_flight, state.get("sealed_plan"))
            if refusal:
                emit({"event": "error", "error": refusal, "iteration": state.get("iteration", 0)})
                return {"status": "failed", "error": refusal}
        briefing = None
        if approval:
            sealed = state.get("sealed_plan") or {}
            # The approved plan travels with every agent/subagent task as data, never as instructions.
            briefing = (f"Approved plan, sealed with SHA-256 {sealed.get('sha256')}:\n"
                        f"{sealed.get('rendering') or render_decision(decision or {})}")
        pm.requeue_interrupted()
        mode = (decision or {}).get("execution_mode") or pm.execution_mode
        if pol.step_parallelism == "sequential":
            mode = "sequential"
        thread_id = state.get("thread_id")
        journal = _journal(executor)
        scoped = f"{thread_id or 'default'}/{state.get('run_id') or '-'}"
        try:
            async with executor.controller.goal():
                results = await executor.run(pm, execution_mode=mode, thread_id=thread_id, journal=journal,
                                             journal_scope=scoped, briefing=briefing)
        except PlannerError as exc:
            error = f"execution failed: {exc}"
            emit({"event": "error", "error": error, "iteration": state.get("iteration", 0)})
            return {"status": "failed", "error": error}
        return {
            "plan_manager": pm.to_dict(),
            "step_results": [*(state.get("step_results") or []), *(r.model_dump(mode="json") for r in results)],
        }

    def after_validate(state: StrangeLoopState) -> str:
        route = route_after_resolve(state)
        if route == "failed":
            return END
        if route == "execute" and approval:
            return "approve"
        return route

    def after_approve(state: StrangeLoopState) -> Literal["execute", "plan_generate"]:
        return "execute" if state.get("current_decision") and state.get("sealed_plan") else "plan_generate"

    def after_execute(state: StrangeLoopState) -> str:
        return END if state.get("status") == "failed" else "record_iteration"

    def after_assess(state: StrangeLoopState) -> str:
        route = route_after_assess(state)
        return END if route == "failed" else route

    def after_generate(state: StrangeLoopState) -> str:
        return END if state.get("status") == "failed" else "validate"

    g: StateGraph[Any, Any, Any, Any] = StateGraph(StrangeLoopState)
    g.add_node("intake", intake)
    g.add_node("answer", nodes.answer)
    g.add_node("plan_assess", nodes.plan_assess)
    g.add_node("plan_generate", nodes.plan_generate)
    g.add_node("validate", validate)
    g.add_node("execute", execute)
    g.add_node("record_iteration", nodes.record_iteration)
    g.add_node("goal_completion", nodes.goal_completion)
    g.add_edge(START, "intake")
    g.add_conditional_edges("intake", route_after_intake, ["answer", "plan_assess"])
    g.add_edge("answer", END)
    g.add_conditional_edges("plan_assess", after_assess, ["goal_completion", "plan_generate", END])
    g.add_conditional_edges("plan_generate", after_generate, ["validate", END])
    targets: list[str] = ["execute", "plan_generate", END]
    if approval:
        g.add_node("approve", approve)
        targets.append("approve")
        g.add_conditional_edges("approve", after_approve, ["execute", "plan_generate"])
    g.add_conditional_edges("validate", after_validate, targets)
    g.add_conditional_edges("execute", after_execute, ["record_iteration", END])
    g.add_edge("record_iteration", "plan_assess")
    g.add_edge("goal_completion", END)
    compiled = g.compile(checkpointer=checkpointer, store=store, name=name)
    # A default from the planner's settings, so a caller who forgets run_config() still gets a
    # bounded loop; a recursion_limit in the caller's config wins.
    max_iterations = getattr(getattr(planner, "settings", None), "max_iterations", 10)
    limited: CompiledStateGraph[Any, Any, Any, Any] = compiled.with_config(
        recursion_limit=recursion_limit_for(max_iterations)
    )
    return limited


def _check_seal(decision: dict[str, Any] | None, in_flight: AgentDecision | None, sealed: Any) -> str | None:
    if not sealed or not sealed.get("sha256"):
        return "refusing to execute: approval is required and no approved (sealed) plan is in the state"
    if decision is None:
        return "refusing to execute: there is no current decision to match against the sealed plan"
    digest = seal_digest(decision)
    if digest != sealed["sha256"]:
        return (
            f"refusing to execute: the decision's SHA-256 {digest[:12]}… does not match the sealed plan "
            f"{sealed['sha256'][:12]}…; the plan changed after approval, so it must be approved again"
        )
    if in_flight is None or seal_digest(in_flight.model_dump(mode="json")) != digest:
        return (
            "refusing to execute: the plan manager's in-flight steps differ from the sealed plan; "
            "the DAG changed after approval, so it must be approved again"
        )
    return None

