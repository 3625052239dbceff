"""The planner's nodes of the StrangeLoop graph, over plain-data state.

Each node rebuilds the typed objects it needs from the checkpointed dicts (``model_validate`` /
``PlanManager.from_dict``), calls the planner, and writes plain data back — so any checkpointer
stores the state unchanged. Routing lives in small pure functions next to the nodes, named by the
edge they decide. Progress is reported through LangGraph's custom stream (``{"event": ...}``);
outside a graph run there is no writer and nodes stay silent, so they can be called directly.

Decisions recorded here:

- The iteration cap is checked before assessing: at ``iteration >= max_iterations`` the goal fails
  with ``"max_iterations (N) reached"`` and the last plan result is kept for the report.
- A one-step bootstrap (``terminal_after_execute``) ends the goal after its step completes,
  without an assessment call; if the step failed, the loop assesses as usual.
- A decision the manager rejects at ingest goes back to generation once, with the errors as
  feedback in working memory; a second rejection in the same iteration fails the goal.
- A ``keep`` with nothing in flight can only come from a degraded planner (the planner otherwise
  generates steps); with nothing to run the goal fails rather than spinning through iterations.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from soothe_planner.dag import PlanManager
from soothe_planner.errors import PlanGenerationError, PlanValidationError
from soothe_planner.models import (
    AgentDecision,
    FailurePolicy,
    LoopState,
    PlanContext,
    PlanResult,
    StatusAssessment,
    StepResult,
)
from soothe_planner.planner import LLMPlanner, counting_calls, latest_results, render_results

from .state import LoopGraphState

__all__ = [
    "PlannerNodes",
    "route_after_assess",
    "route_after_intake",
    "route_after_resolve",
]

logger = logging.getLogger("soothe_planner.graph")

WORKING_MEMORY_CHARS = 2000
"""Working memory is a bounded digest, rebuilt each iteration; the full history stays in state."""
HISTORY_LINES_IN_MEMORY = 8
_REJECTED = "plan rejected"


def emit(event: dict[str, Any]) -> None:
    """Send a progress event on the custom stream, if this runs inside a graph."""
    try:
        from langgraph.config import get_stream_writer

        writer = get_stream_writer()
    except (RuntimeError, KeyError, LookupError):  # not inside a runnable context: nobody listens
        return
    writer(event)


def route_after_intake(state: LoopGraphState) -> Literal["answer", "plan_assess"]:
    # On a follow-up turn a trivial request still goes through the planner, whose continuation check
    # decides between one bootstrap step and a plan; only a fresh trivial request is answered directly.
    if state.get("intake") == "trivial" and not state.get("continuation"):
        return "answer"
    return "plan_assess"


def route_after_assess(state: LoopGraphState) -> Literal["goal_completion", "plan_generate", "failed"]:
    if state.get("status") == "failed":
        return "failed"
    assessment = state.get("assessment") or {}
    return "goal_completion" if assessment.get("status") == "done" else "plan_generate"


def route_after_resolve(state: LoopGraphState) -> Literal["execute", "plan_generate", "failed"]:
    if state.get("status") == "failed":
        return "failed"
    if state.get("error"):  # a rejected decision, sent back once with feedback
        return "plan_generate"
    return "execute" if state.get("current_decision") else "failed"


class PlannerNodes:
    """Node functions over ``LoopGraphState`` for a given planner (see the module docstring)."""

    def __init__(
        self,
        planner: LLMPlanner,
        *,
        context: PlanContext | None = None,
        synthesize: bool = False,
        failure_policy: str | FailurePolicy = "block",
    ) -> None:
        self.planner = planner
        self.context = context or PlanContext()
        self.synthesize = synthesize
        self.failure_policy = FailurePolicy.parse(failure_policy)

    # ------------------------------------------------------------------ state <-> models

    def _context(self, state: LoopGraphState) -> PlanContext:
        return self.context.model_copy(update={
            "thread_id": state.get("thread_id") or self.context.thread_id,
            "intake": state.get("intake") or self.context.intake,
            "recent_messages": list(state.get("recent_messages") or self.context.recent_messages),
            "working_memory_excerpt": state.get("working_memory") or self.context.working_memory_excerpt,
        })

    def new_manager(self, goal: str) -> PlanManager:
        names = self.context.capability_names()
        return PlanManager(
            goal,
            failure_policy=self.failure_policy,
            max_plan_steps=self.planner.settings.max_plan_steps,
            allowed_capabilities=names or None,
        )

    def _manager(self, state: LoopGraphState) -> PlanManager:
        data = state.get("plan_manager")
        return PlanManager.from_dict(data) if data else self.new_manager(state["goal"])

    def _max_iterations(self, state: LoopGraphState) -> int:
        return state.get("max_iterations") or self.planner.settings.max_iterations

    def _loop_state(self, state: LoopGraphState, previous: StatusAssessment | None) -> LoopState:
        decision = state.get("current_decision")
        return LoopState(
            goal=state["goal"],
            thread_id=state.get("thread_id") or "default",
            iteration=state.get("iteration", 0),
            max_iterations=self._max_iterations(state),
            current_decision=AgentDecision.model_validate(decision) if decision else None,
            step_results=[StepResult.model_validate(r) for r in state.get("step_results") or []],
            previous_assessment=previous,
            action_history=list(state.get("action_history") or []),
            working_memory=state.get("working_memory") or "",
            intake=state.get("intake"),
            continuation=bool(state.get("continuation")),
            prior_goals=list(state.get("prior_goals") or []),
            recent_messages=list(state.get("recent_messages") or []),
        )

    # ------------------------------------------------------------------ nodes

    async def intake(self, state: LoopGraphState) -> dict[str, Any]:
        """Route the request; a trivial one is answered here. Sets up the loop's bookkeeping."""
        goal = state["goal"]
        updates: dict[str, Any] = {
            "continuation": bool(state.get("prior_goals")),
            "iteration": 0,
            "status": "running",
            "error": None,
        }
        if not state.get("plan_manager"):
            updates["plan_manager"] = self.new_manager(goal).to_dict()
        if state.get("intake") is None:
            with counting_calls() as calls:
                route, answer = await self.planner.route_intake(goal, self._context(state))
            updates["intake"] = route
            updates["llm_calls"] = (state.get("llm_calls") or 0) + calls.calls
            if route == "trivial" and not updates["continuation"]:
                updates["final_answer"] = answer
                updates["status"] = "done"
            emit({"event": "intake", "route": route})
        return updates

    async def answer(self, state: LoopGraphState) -> dict[str, Any]:
        """The trivial route's end: the answer intake wrote (or one answer call if it wrote none)."""
        if state.get("final_answer"):
            emit({"event": "completed", "final_answer": state["final_answer"]})
            return {"status": "done"}
        with counting_calls() as calls:
            text = await self.planner.answer(state["goal"], self._context(state))
        emit({"event": "completed", "final_answer": text})
        return {"status": "done", "final_answer": text, "llm_calls": (state.get("llm_calls") or 0) + calls.calls}

    async def plan_assess(self, state: LoopGraphState) -> dict[str, Any]:
        """Phase 1, after the iteration cap and the bootstrap shortcut."""
        iteration = state.get("iteration", 0)
        cap = self._max_iterations(state)
        if iteration >= cap:
            error = f"max_iterations ({cap}) reached"
            emit({"event": "error", "error": error, "iteration": iteration})
            return {"status": "failed", "error": error}
        previous = StatusAssessment.model_validate(state["assessment"]) if state.get("assessment") else None
        shortcut = self._bootstrap_done(state)
        if shortcut is not None:
            emit({"event": "assessment", "iteration": iteration, **shortcut.model_dump(mode="json")})
            return {"assessment": shortcut.model_dump(mode="json")}
        pm = self._manager(state)
        with counting_calls() as calls:
            try:
                assessment = await self.planner.assess_status(
                    state["goal"], self._loop_state(state, previous), self._context(state), plan_manager=pm
                )
            except PlanGenerationError as exc:
                emit({"event": "error", "error": str(exc), "iteration": iteration})
                return {"status": "failed", "error": str(exc),
                        "llm_calls": (state.get("llm_calls") or 0) + calls.calls}
        emit({"event": "assessment", "iteration": iteration, **assessment.model_dump(mode="json")})
        return {"assessment": assessment.model_dump(mode="json"),
                "llm_calls": (state.get("llm_calls") or 0) + calls.calls}

    def _bootstrap_done(self, state: LoopGraphState) -> StatusAssessment | None:
        data = state.get("plan_result")
        if not data or state.get("iteration", 0) < 1:
            return None
        result = PlanResult.model_validate(data)
        if not result.terminal_after_execute or result.decision is None:
            return None
        outcomes = {r.step_id: r for r in latest_results([StepResult.model_validate(r) for r in state.get("step_results") or []])}
        ids = [s.id for s in result.decision.steps]
        if ids and all(i in outcomes and outcomes[i].success for i in ids):
            return StatusAssessment(status="done", goal_progress=1.0, confidence=result.confidence,
                                    summary="the bootstrap step completed")
        return None

    async def plan_generate(self, state: LoopGraphState) -> dict[str, Any]:
        """Phase 2: the next decision (or keep), from the assessment and the goal-wide DAG."""
        assessment = StatusAssessment.model_validate(state.get("assessment") or {"status": "continue"})
        prev_data = state.get("plan_result")
        previous = None
        if prev_data:  # the previous iteration's assessment, as its plan result recorded it
            p = PlanResult.model_validate(prev_data)
            previous = StatusAssessment(status=p.status, goal_progress=p.goal_progress, confidence=p.confidence,
                                        summary=p.evidence_summary, degraded=p.degraded)
        pm = self._manager(state)
        try:
            result = await self.planner.generate_from_assessment(
                state["goal"], self._loop_state(state, previous), self._context(state), assessment, plan_manager=pm
            )
        except PlanGenerationError as exc:
            emit({"event": "error", "error": str(exc), "iteration": state.get("iteration", 0)})
            return {"status": "failed", "error": str(exc)}
        emit({"event": "plan", "iteration": state.get("iteration", 0), "plan_action": result.plan_action,
              "steps": [s.model_dump(mode="json") for s in (result.decision.steps if result.decision else [])],
              "degraded": result.degraded})
        return {"plan_result": result.model_dump(mode="json"), "error": None,
                "llm_calls": (state.get("llm_calls") or 0) + result.llm_calls}

    async def resolve_decision(self, state: LoopGraphState) -> dict[str, Any]:
        """The "validate" node: merge a ``new`` decision into the DAG; expose what is in flight."""
        if state.get("status") == "failed":
            return {}
        iteration = state.get("iteration", 0)
        result = PlanResult.model_validate(state["plan_result"])
        assessment = state.get("assessment") or {}
        pm = self._manager(state)
        history = list(state.get("action_history") or [])
        if result.plan_action == "new" and result.decision is not None:
            try:
                pm.ingest(result.decision, iteration, replace=assessment.get("status") == "replan")
            except PlanValidationError as exc:
                marker = f"iteration {iteration}: {_REJECTED}"
                if any(line.startswith(marker) for line in history):
                    error = f"the planner's decision was rejected twice in iteration {iteration}: {exc}"
                    emit({"event": "error", "error": error, "iteration": iteration})
                    return {"status": "failed", "error": error, "action_history": [*history, f"{marker} again: {exc}"]}
                feedback = (f"Your last plan was rejected: {'; '.join(exc.errors)}. "
                            "Fix exactly these problems in the next answer.")
                emit({"event": "error", "error": str(exc), "iteration": iteration, "retry": True})
                memory = (state.get("working_memory") or "") + "\n" + feedback
                return {"error": str(exc), "working_memory": memory[-WORKING_MEMORY_CHARS:],
                        "action_history": [*history, f"{marker}: {exc}"]}
        current = pm.in_flight_decision()
        if current is None:
            error = ("nothing to execute: the planner kept a plan but none is in flight"
                     + (" (the planner is degraded)" if result.degraded else ""))
            emit({"event": "error", "error": error, "iteration": iteration})
            return {"status": "failed", "error": error, "plan_manager": pm.to_dict()}
        return {"plan_manager": pm.to_dict(), "current_decision": current.model_dump(mode="json"), "error": None}

    async def record_iteration(self, state: LoopGraphState) -> dict[str, Any]:
        """Close an iteration: count it, log it, and rebuild the bounded working memory."""
        iteration = state.get("iteration", 0)
        assessment = state.get("assessment") or {}
        result = state.get("plan_result") or {}
        decision = state.get("current_decision") or {}
        ran = {s.get("id") for s in decision.get("steps", [])}
        outcomes = [StepResult.model_validate(r) for r in state.get("step_results") or []]
        mine = [r for r in latest_results(outcomes) if r.step_id in ran]
        done = ", ".join(f"{r.step_id} {'ok' if r.success else 'failed'}" for r in mine) or "no step ran"
        line = (f"iteration {iteration}: {assessment.get('status', '?')} "
                f"(progress {float(assessment.get('goal_progress', 0.0)):.2f}), "
                f"{result.get('plan_action', '?')}; {done}")
        history = [*(state.get("action_history") or []), line]
        # No results digest here: the next prompts carry new results in full and older ones under
        # their steps in the plan rendering; a third copy would only cost tokens.
        memory = "Recent iterations:\n" + "\n".join(history[-HISTORY_LINES_IN_MEMORY:])
        if len(memory) > WORKING_MEMORY_CHARS:
            memory = "…" + memory[-(WORKING_MEMORY_CHARS - 1):]
        return {"iteration": iteration + 1, "action_history": history, "working_memory": memory}

    async def goal_completion(self, state: LoopGraphState) -> dict[str, Any]:
        """The goal is done: a final answer from the evidence (one call when synthesising)."""
        results = latest_results([StepResult.model_validate(r) for r in state.get("step_results") or []])
        completed = [r for r in results if r.success]
        updates: dict[str, Any] = {"status": "done", "error": None}
        if self.synthesize:
            with counting_calls() as calls:
                try:
                    answer = await self.planner.answer(
                        state["goal"], self._context(state), evidence=render_results(results, newest_first=False)
                    )
                except PlanGenerationError as exc:
                    logger.warning("goal_completion: synthesis failed (%s); using the step summary", exc)
                    answer = _summary(completed)
            updates["llm_calls"] = (state.get("llm_calls") or 0) + calls.calls
        else:
            answer = _summary(completed)
        updates["final_answer"] = answer
        emit({"event": "completed", "final_answer": answer})
        return updates


def _summary(completed: list[StepResult]) -> str:
    if not completed:
        return "The goal was assessed as done; no step produced output."
    lines = ["Completed steps:"]
    for r in completed:
        out = r.output.strip() or "(no output)"
        if len(out) > 500:
            out = out[:499] + "…"
        lines.append(f"- {r.step_id}: {out}")
    return "\n".join(lines)
