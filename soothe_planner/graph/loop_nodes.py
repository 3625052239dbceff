"""The nodes the compiled StrangeLoop adds to the planner's: execution, the approval gate, routing.

``LoopNodes`` extends ``PlannerNodes`` with what needs the executor or the loop's options:

- ``execute`` runs the ready set as eager dataflow *inside* the node (LangGraph's ``Send`` fan-out
  waits for the slowest branch of each superstep), under the executor's controller, with the step
  journal from the graph's store. Its results land on the DAG's nodes — their one home — and the
  node writes the manager back.
- ``approve`` is the optional gate (``approval.py``): it calls ``interrupt()`` and does nothing
  before it but pure computation, because LangGraph reruns an interrupted node from its start.
- ``intake`` gives each goal run an id that scopes the step journal; ``validate`` keeps the DAG as
  it was before a decision awaiting approval, so a rejected plan can be taken back out of it.
- ``finish`` is the one way out: it appends the outcome to ``messages`` as an AI message (the
  answer, or why the goal failed), so a chat client or a parent graph reads it where it reads
  every reply.
- The approval gate is always wired and chosen per run (``RunContext.approval``, default: the
  ``approval`` argument): a graph keeps one topology whatever a run asks for, which a LangGraph
  server requires of a factory-built graph.
- The ``after_*`` methods are the conditional edges; their names are the names a trace shows.
- ``metered`` wraps every node as it is added to the graph: the node runs inside the run's
  ``CallMeter`` (seeded from the state's ``llm_calls``, with the policy's ``max_total_llm_calls``)
  and writes the meter's count back, so the count and the budget survive a resume; and a
  ``PlannerError`` that escapes a node (an intake that found no usable answer, a spent budget)
  ends the run ``failed`` with its reason recorded instead of leaving the checkpoint ``running``.
  Anything else (a bug, a cancellation, a kill) still propagates, so the run stays resumable.

Node and router names match the node names in ``loop.py``'s wiring table.
"""

from __future__ import annotations

import asyncio
import functools
import hmac
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langgraph.graph import END
from langgraph.types import interrupt

from soothe_planner.concurrency import CallMeter, ConcurrencyPolicy, metering
from soothe_planner.errors import PlannerError, PlanValidationError
from soothe_planner.events import ApprovalEvent, ErrorEvent
from soothe_planner.execution import StepExecutor
from soothe_planner.models import AgentDecision, FailurePolicy, PlanContext
from soothe_planner.protocols import LoopPlannerProtocol

from .approval import (
    SealKey,
    approval_request,
    edited_decision,
    parse_reply,
    render_decision,
    seal_digest,
    shown,
)
from .nodes import (
    PlannerNodes,
    emit,
    route_after_assess,
    route_after_intake,
    route_after_resolve,
    run_options,
)
from .request import final_message

__all__ = ["LoopNodes"]

State = Mapping[str, Any]
Node = Callable[[Any], Awaitable[dict[str, Any]]]


def _journal(executor: StepExecutor) -> Any:
    if executor.journal is not None:
        return executor.journal
    try:
        from langgraph.config import get_store

        return get_store()
    except Exception:  # no store compiled in: no journal, steps rerun after a crash
        return None


class LoopNodes(PlannerNodes):
    """Every node and router of the compiled StrangeLoop, for one planner, executor and set of options."""

    def __init__(
        self,
        planner: LoopPlannerProtocol,
        executor: StepExecutor,
        *,
        context: PlanContext,
        policy: ConcurrencyPolicy,
        approval: bool = False,
        synthesize: bool = False,
        failure_policy: str | FailurePolicy = "block",
        max_iterations: int = 10,
        max_plan_steps: int = 8,
        intake: bool = True,
        model_name: str | None = None,
        seal_key: bytes | SealKey | None = None,
    ) -> None:
        super().__init__(planner, context=context, synthesize=synthesize, failure_policy=failure_policy,
                         max_iterations=max_iterations, max_plan_steps=max_plan_steps, intake=intake)
        self.executor = executor
        self.policy = policy
        self.approval = approval
        self.model_name = model_name
        self._seal_key = seal_key

    async def seal_key(self) -> bytes | None:
        """The seal's key, read on first use (a ``SealKey``), or ``None``: a plain SHA-256 seal.

        Read in a worker thread: a server's event loop must not wait on the file system.
        """
        key = self._seal_key
        return await asyncio.to_thread(key.get) if isinstance(key, SealKey) else key

    def approval_on(self) -> bool:
        """Whether this run pauses for approval: the run context's choice, else the graph's default."""
        return run_options().get("approval", self.approval)

    # ------------------------------------------------------------------ every node

    def metered(self, name: str, node: Node) -> Node:
        """``node`` counting its LLM calls on the run's meter, and ending the run on a ``PlannerError``."""

        @functools.wraps(node)
        async def run(state: State) -> dict[str, Any]:
            # Intake starts a run (a new goal on the thread starts from nothing); any other node
            # goes on with the run's saved count.
            spent = 0 if name == "intake" else state.get("llm_calls") or 0
            meter = CallMeter(spent, self.policy.max_total_llm_calls)
            with metering(meter):
                try:
                    update = await node(state)
                except PlannerError as exc:
                    error = f"{name} failed: {exc}"
                    emit(ErrorEvent(event="error", error=error, iteration=state.get("iteration", 0)))
                    update = {"status": "failed", "error": error}
            return {**update, "llm_calls": meter.spent}

        return run

    # ------------------------------------------------------------------ nodes

    async def intake(self, state: State) -> dict[str, Any]:
        wanted = run_options().get("model")
        if wanted is not None and wanted != self.model_name:
            built = f"model {self.model_name!r}" if self.model_name else "a model object"
            raise ValueError(
                f"run context model {wanted!r}: this graph was built on {built}; a per-run model needs a "
                "graph built per run (the server's make_graph does that), or build the graph on that model"
            )
        update = await super().intake(state)
        # Every goal run gets its own journal scope: a follow-up on the thread that repeats a step
        # (same goal, same step text) must run it again, not replay the earlier run's result. The
        # id is checkpointed with this node's output, so a resumed run keeps it.
        update["run_id"] = uuid.uuid4().hex
        return update

    async def validate(self, state: State) -> dict[str, Any]:
        update = await self.resolve_decision(state)
        if self.approval_on():
            # Kept so a rejected plan can be taken back out of the DAG before the planner revises it.
            update["pre_approval_plan_manager"] = state.get("plan_manager")
        return update

    async def approve(self, state: State) -> dict[str, Any]:
        # No side effects before interrupt(): on resume this node runs again from its start. The seal
        # is over the decision exactly as stored, so this node reads the plain state, not a view.
        decision = state.get("current_decision") or {}
        digest = seal_digest(decision, await self.seal_key())
        sealed = state.get("sealed_plan") or {}
        if sealed.get("sha256") == digest:
            # This exact plan was approved already: no second question.
            return {"approval_feedback": None}
        rendering = render_decision(decision)
        note = None
        while True:
            # An edit that does not validate is asked about again; on resume each interrupt() here
            # gets its own answer back in order, so this loop replays without side effects.
            reply = parse_reply(interrupt(approval_request(decision, rendering, digest, note)), digest)
            if reply.edit is None:
                break
            edited, note = await self._edited(state, reply.edit)
            if edited is not None:
                emit(ApprovalEvent(event="approval", approved=True, edited=True, sha256=edited["sealed_plan"]["sha256"]))
                return edited
        if reply.approved:
            emit(ApprovalEvent(event="approval", approved=True, sha256=digest))
            return {
                "sealed_plan": {"sha256": digest, "plan": decision, "rendering": rendering},
                "approval_feedback": None,
            }
        emit(ApprovalEvent(event="approval", approved=False, feedback=reply.feedback, refused=reply.refused))
        if reply.ignored:
            return {
                "status": "failed",
                "error": "the plan was rejected: the reviewer ignored it, so nothing ran",
                "approval_feedback": reply.feedback,
                "plan_manager": state.get("pre_approval_plan_manager"),
                "current_decision": None,
                "sealed_plan": None,
            }
        if reply.refused:  # not the human's words: the gate's own, so the planner may read them as such
            note = f"The approval was refused and nothing ran: {reply.feedback}"
        else:
            note = f"The human rejected the proposed plan. Their feedback: {reply.feedback or '(none given)'}"
        memory = ((state.get("working_memory") or "") + "\n" + note).strip()
        history = [*(state.get("action_history") or []),
                   f"iteration {state.get('iteration', 0)}: approval {'refused' if reply.refused else 'rejected'} "
                   f"for plan {digest[:16]}…"]
        return {
            "approval_feedback": reply.feedback,
            "action_history": history,
            "working_memory": memory,
            "plan_manager": state.get("pre_approval_plan_manager"),
            "current_decision": None,
            "sealed_plan": None,
        }

    async def _edited(self, state: State, fields: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
        """The update that seals a human's edited plan, or ``None`` and why it was not applied.

        The same checks as a planner's plan: the decision's schema, then the plan manager's
        whole-batch validation (ids, dependencies, cycles, the step cap, the tool allow-list), on
        the DAG as it was before the plan awaiting approval. Pure: nothing is emitted or stored.
        """
        try:
            decision = AgentDecision.model_validate(edited_decision(fields))
            if not decision.steps:
                raise ValueError("the edited plan has no steps")
            # The DAG as the validate node found it (a new one, built as it builds one, at the start).
            view = self.view({**state, "plan_manager": state.get("pre_approval_plan_manager")})
            pm = view.manager
            replace = view.assessment is not None and view.assessment.status == "replan"
            pm.ingest(decision, view.iteration, replace=replace)
        except (ValueError, PlanValidationError) as exc:  # pydantic's ValidationError is a ValueError
            return None, f"Your edit was not applied, so nothing ran: {shown(str(exc))[:1000]}"
        current = pm.in_flight_decision()
        if current is None:
            return None, "Your edit was not applied, so nothing ran: it leaves no step to run"
        plan = current.model_dump(mode="json")
        digest = seal_digest(plan, await self.seal_key())
        rendering = render_decision(plan)
        history = [*(state.get("action_history") or []),
                   f"iteration {state.get('iteration', 0)}: plan edited by the reviewer, sealed as {digest[:16]}…"]
        return {
            "plan_manager": pm.to_dict(),
            "current_decision": plan,
            "sealed_plan": {"sha256": digest, "plan": plan, "rendering": rendering},
            "approval_feedback": None,
            "action_history": history,
        }, None

    async def execute(self, state: State) -> dict[str, Any]:
        view = self.view(state)
        pm = view.manager
        stored = state.get("current_decision")
        briefing = None
        if self.approval_on():
            sealed = state.get("sealed_plan")
            refusal = _check_seal(stored, pm.in_flight_decision(), sealed, await self.seal_key())
            if refusal:
                emit(ErrorEvent(event="error", error=refusal, iteration=view.iteration))
                return {"status": "failed", "error": refusal}
            assert sealed is not None
            # The approved plan travels with every agent/subagent task as data, never as instructions.
            briefing = (f"Approved plan, sealed with SHA-256 {sealed.get('sha256')}:\n"
                        f"{sealed.get('rendering') or render_decision(stored or {})}")
        pm.requeue_interrupted()
        mode = view.current_decision.execution_mode if view.current_decision else pm.execution_mode
        if self.policy.step_parallelism == "sequential":
            mode = "sequential"
        scoped = f"{view.thread_id or 'default'}/{state.get('run_id') or '-'}"
        try:
            async with self.executor.controller.goal():
                await self.executor.run(pm, execution_mode=mode, thread_id=view.thread_id,
                                        journal=_journal(self.executor), journal_scope=scoped, briefing=briefing)
        except PlannerError as exc:
            error = f"execution failed: {exc}"
            emit(ErrorEvent(event="error", error=error, iteration=view.iteration))
            return {"status": "failed", "error": error}
        return {"plan_manager": pm.to_dict()}

    async def finish(self, state: State) -> dict[str, Any]:
        return {"messages": [final_message(state)]}

    # ------------------------------------------------------------------ routers

    def after_intake(self, state: State) -> str:
        return END if state.get("status") == "failed" else route_after_intake(state)

    def after_assess(self, state: State) -> str:
        route = route_after_assess(state)
        return END if route == "failed" else route

    def after_generate(self, state: State) -> str:
        return END if state.get("status") == "failed" else "validate"

    def after_validate(self, state: State) -> str:
        route = route_after_resolve(state)
        if route == "failed":
            return END
        if route == "execute" and self.approval_on():
            return "approve"
        return route

    def after_approve(self, state: State) -> str:
        if state.get("status") == "failed":
            return END
        return "execute" if state.get("current_decision") and state.get("sealed_plan") else "plan_generate"

    def after_execute(self, state: State) -> str:
        return END if state.get("status") == "failed" else "record_iteration"


def _check_seal(
    decision: dict[str, Any] | None, in_flight: AgentDecision | None, sealed: Any, key: bytes | None
) -> str | None:
    if not sealed or not sealed.get("sha256"):
        return "refusing to execute: approval is required and no approved (sealed) plan is in the state"
    if decision is None:
        return "refusing to execute: there is no current decision to match against the sealed plan"
    digest = seal_digest(decision, key)
    if not hmac.compare_digest(digest, str(sealed["sha256"])):
        return (
            f"refusing to execute: the decision's SHA-256 {digest[:12]}… does not match the sealed plan "
            f"{sealed['sha256'][:12]}…; the plan changed after approval, so it must be approved again"
        )
    if in_flight is None or seal_digest(in_flight.model_dump(mode="json"), key) != digest:
        return (
            "refusing to execute: the plan manager's in-flight steps differ from the sealed plan; "
            "the DAG changed after approval, so it must be approved again"
        )
    return None
