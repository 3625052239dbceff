"""The planner's nodes of the StrangeLoop graph, over plain-data state, for any loop planner.

``PlannerNodes`` calls its planner only through ``LoopPlannerProtocol`` (``route_intake``,
``answer``, ``assess_status``, ``generate_from_assessment``), so any implementation of the
protocol runs the loop; what it needs besides the planner (the iteration cap, the step cap, the
failure policy) it takes as explicit arguments rather than reading a particular planner's
settings. Each node decodes the state once into a ``LoopView`` (``view.py``), calls the planner,
and writes plain data back — so any checkpointer stores the state unchanged. Routing lives in
small pure functions next to the nodes, named by the edge they decide. Progress is reported
through LangGraph's custom stream (``{"event": ...}``); outside a graph run there is no writer and
nodes stay silent, so they can be called directly.

Decisions recorded here:

- The iteration cap counts rounds of work, and the last round's steps are still judged: at
  ``iteration == max_iterations`` one more assessment runs (no plan follows it); unless it says
  ``done`` the goal fails with ``"max_iterations (N) reached"`` and the last plan result is kept for
  the report. Past the cap, or with nothing run, the goal fails without a call.
- With intake routing off, a goal whose route is not given is ``complex``: no routing call.
- A one-step bootstrap (``terminal_after_execute``) ends the goal after its step completes,
  without an assessment call; if the step failed, the loop assesses as usual.
- A decision the manager rejects at ingest goes back to generation once, with the errors as
  feedback in working memory; a second rejection in the same iteration fails the goal.
- A ``keep`` with nothing in flight can only come from a degraded planner (the planner otherwise
  generates steps); with nothing to run the goal fails rather than spinning through iterations.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import ValidationError

from soothe_planner.dag import PlanManager
from soothe_planner.deliverable import Deliverable
from soothe_planner.errors import PlanGenerationError, PlanValidationError
from soothe_planner.events import (
    CompletedEvent,
    ErrorEvent,
    Event,
    IntakeEvent,
    PlanEvent,
    assessment_event,
    deliverable_event,
)
from soothe_planner.models import (
    AgentDecision,
    FailurePolicy,
    PlanContext,
    StatusAssessment,
    StepResult,
    clean_text,
)
from soothe_planner.planner import REFUSED_NOTE, counting_calls, render_results
from soothe_planner.protocols import LoopPlannerProtocol

from .request import start_run
from .state import RunContext
from .view import LoopView

__all__ = [
    "PlannerNodes",
    "parse_run_context",
    "route_after_assess",
    "route_after_intake",
    "route_after_resolve",
    "run_options",
]

logger = logging.getLogger("soothe_planner.graph")

WORKING_MEMORY_CHARS = 2000
"""Working memory is a bounded digest, rebuilt each iteration; the full history stays in state."""
HISTORY_LINES_IN_MEMORY = 8
_REJECTED = "plan rejected"
State = Mapping[str, Any]


def emit(event: Event) -> None:
    """Send a progress event on the custom stream, if this runs inside a graph."""
    try:
        from langgraph.config import get_stream_writer

        writer = get_stream_writer()
    except (RuntimeError, KeyError, LookupError):  # not inside a runnable context: nobody listens
        return
    writer(dict(event))


_CONTEXT_ADAPTER: Any = None


def parse_run_context(raw: Any) -> RunContext:
    """``raw`` (a mapping, or an object with the same attributes) as a checked ``RunContext``.

    Keys that are not ``RunContext`` keys are ignored (a server's ``configurable`` holds many);
    a key of the wrong type or a cap below 1 is a ``ValueError`` naming the key and the rule.
    """
    global _CONTEXT_ADAPTER
    if not raw:
        return {}
    if not isinstance(raw, Mapping):  # a dataclass or pydantic context from a caller
        raw = {k: getattr(raw, k) for k in RunContext.__annotations__ if getattr(raw, k, None) is not None}
    if _CONTEXT_ADAPTER is None:
        from pydantic import TypeAdapter

        _CONTEXT_ADAPTER = TypeAdapter(RunContext)
    try:
        options: RunContext = _CONTEXT_ADAPTER.validate_python(
            {k: v for k, v in raw.items() if k in RunContext.__annotations__ and v is not None}, strict=True
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ValueError(
            f"run context {key} = {first.get('input')!r}: {first['msg']} "
            "(keys: model: str, approval: bool, max_iterations: int, max_plan_steps: int)"
        ) from None
    for key in ("max_iterations", "max_plan_steps"):
        value = options.get(key)
        if isinstance(value, int) and value < 1:
            raise ValueError(f"run context {key} = {value!r}: must be >= 1")
    return options


def run_options() -> RunContext:
    """This run's ``RunContext``: LangGraph's runtime context, else the same keys in ``configurable``.

    Outside a graph run (a node called directly) it is empty.
    """
    try:
        from langgraph.config import get_config
        from langgraph.runtime import get_runtime

        runtime = get_runtime()  # None where LangGraph runs a router with no run (``update_state``)
        raw: Any = runtime.context if runtime is not None else None
        if not raw:
            raw = get_config().get("configurable") or {}
    except (RuntimeError, KeyError, LookupError):  # not inside a graph run
        return {}
    return parse_run_context(raw)


def route_after_intake(state: State) -> Literal["answer", "plan_assess"]:
    # On a follow-up turn a trivial request still goes through the planner, whose continuation check
    # decides between one bootstrap step and a plan; only a fresh trivial request is answered directly.
    if state.get("intake") == "trivial" and not state.get("continuation"):
        return "answer"
    return "plan_assess"


def route_after_assess(state: State) -> Literal["goal_completion", "plan_generate", "failed"]:
    if state.get("status") == "failed":
        return "failed"
    assessment = state.get("assessment") or {}
    return "goal_completion" if assessment.get("status") == "done" else "plan_generate"


def route_after_resolve(state: State) -> Literal["execute", "plan_generate", "failed"]:
    if state.get("status") == "failed":
        return "failed"
    if state.get("error"):  # a rejected decision, sent back once with feedback
        return "plan_generate"
    return "execute" if state.get("current_decision") else "failed"


class PlannerNodes:
    """Node functions over ``LoopGraphState`` for any ``LoopPlannerProtocol`` (see the module docstring).

    ``max_iterations`` applies when the state names none; ``max_plan_steps``, ``failure_policy``
    and the context's capabilities shape the goal's ``PlanManager``. ``intake=False`` skips the
    routing call (every goal gets the full loop).
    """

    def __init__(
        self,
        planner: LoopPlannerProtocol,
        *,
        context: PlanContext | None = None,
        synthesize: bool = False,
        failure_policy: str | FailurePolicy = "block",
        max_iterations: int = 10,
        max_plan_steps: int = 8,
        intake: bool = True,
    ) -> None:
        self.planner = planner
        self.context = context or PlanContext()
        self.synthesize = synthesize
        self.failure_policy = FailurePolicy.parse(failure_policy)
        self.max_iterations = max_iterations
        self.max_plan_steps = max_plan_steps
        self.routes_intake = intake

    # ------------------------------------------------------------------ state -> view

    def view(self, state: State) -> LoopView:
        """The state decoded once, for one node call."""
        cap = run_options().get("max_iterations", self.max_iterations)
        return LoopView.decode(state, new_manager=self.new_manager, max_iterations=cap)

    def new_manager(self, goal: str) -> PlanManager:
        names = self.context.capability_names()
        return PlanManager(
            goal,
            failure_policy=self.failure_policy,
            max_plan_steps=run_options().get("max_plan_steps", self.max_plan_steps),
            allowed_capabilities=names or None,
            # what each tool is (read-only or not, its schema): a repeated read is merged by it
            capabilities=self.context.available_capabilities or None,
        )

    def _context(self, view: LoopView) -> PlanContext:
        return self.context.model_copy(update={
            "thread_id": view.thread_id or self.context.thread_id,
            "intake": view.intake or self.context.intake,
            "recent_messages": view.recent_messages or list(self.context.recent_messages),
            "working_memory_excerpt": view.working_memory or self.context.working_memory_excerpt,
        })

    # ------------------------------------------------------------------ nodes

    async def intake(self, state: State) -> dict[str, Any]:
        """Take up the request (``request.py``) and route it; a trivial one is answered here."""
        run_options()  # a malformed run context fails here, before any work
        request = start_run(state, thread_id=_configured_thread())
        view = self.view({**state, **request})
        manager = self.new_manager(view.goal)
        given = {**state, **request}.get("deliverable")
        if given:
            manager.deliverable = Deliverable.model_validate(given)  # the caller's word: checked, then kept
            emit(deliverable_event(manager.deliverable))
        updates: dict[str, Any] = {
            **request,
            "continuation": bool(view.prior_goals),
            "plan_manager": manager.to_dict(),
        }
        if clean_text(view.goal) != view.goal:
            # A goal given straight to the graph (a server's input, a chat turn) is cleaned here,
            # once: it is hashed into journal keys and sent in every prompt, both as UTF-8.
            updates["goal"] = updates["served_goal"] = clean_text(view.goal)
        if view.intake is None and not self.routes_intake:
            updates["intake"] = "complex"  # routing is off: every goal gets the full loop
        elif view.intake is None:
            with counting_calls() as calls:
                route, answer = await self.planner.route_intake(view.goal, self._context(view))
            updates["intake"] = route
            updates["llm_calls"] = view.llm_calls + calls.calls
            if route == "trivial" and not updates["continuation"]:
                updates["final_answer"] = answer
                updates["status"] = "done"
            emit(IntakeEvent(event="intake", route=route))
        return updates

    async def answer(self, state: State) -> dict[str, Any]:
        """The trivial route's end: the answer intake wrote (or one answer call if it wrote none)."""
        if state.get("final_answer"):
            emit(CompletedEvent(event="completed", final_answer=state["final_answer"]))
            return {"status": "done"}
        view = self.view(state)
        with counting_calls() as calls:
            text = await self.planner.answer(view.goal, self._context(view))
        emit(CompletedEvent(event="completed", final_answer=text))
        return {"status": "done", "final_answer": text, "llm_calls": view.llm_calls + calls.calls}

    async def plan_assess(self, state: State) -> dict[str, Any]:
        """Phase 1, after the iteration cap and the bootstrap shortcut."""
        view = self.view(state)
        iteration, cap = view.iteration, view.max_iterations
        error = f"max_iterations ({cap}) reached"
        if iteration > cap or (iteration == cap and (cap == 0 or view.plan_result is None)):
            emit(ErrorEvent(event="error", error=error, iteration=iteration))
            return {"status": "failed", "error": error}
        # at the cap the last iteration's steps ran and are judged once more (no plan follows):
        # work a run did is never left unassessed
        shortcut = self._bootstrap_done(view)
        if shortcut is not None:
            emit(assessment_event(iteration, shortcut))
            return {"assessment": shortcut.model_dump(mode="json")}
        with counting_calls() as calls:
            try:
                assessment = await self.planner.assess_status(
                    view.goal, view.loop_state(view.assessment), self._context(view), plan_manager=view.manager
                )
            except PlanGenerationError as exc:
                emit(ErrorEvent(event="error", error=str(exc), iteration=iteration))
                return {"status": "failed", "error": str(exc), "llm_calls": view.llm_calls + calls.calls}
        emit(assessment_event(iteration, assessment))
        update = {"assessment": assessment.model_dump(mode="json"), "llm_calls": view.llm_calls + calls.calls}
        if iteration >= cap and assessment.status != "done":
            emit(ErrorEvent(event="error", error=error, iteration=iteration))
            update |= {"status": "failed", "error": error}
        return update

    def _bootstrap_done(self, view: LoopView) -> StatusAssessment | None:
        result = view.plan_result
        if result is None or view.iteration < 1 or not result.terminal_after_execute or result.decision is None:
            return None
        outcomes = {r.step_id: r for r in view.results}
        ids = [s.id for s in result.decision.steps]
        if ids and all(i in outcomes and outcomes[i].success for i in ids):
            return StatusAssessment(status="done", goal_progress=1.0, confidence=result.confidence,
                                    summary="the bootstrap step completed")
        return None

    async def plan_generate(self, state: State) -> dict[str, Any]:
        """Phase 2: the next decision (or keep), from the assessment and the goal-wide DAG."""
        view = self.view(state)
        assessment = view.assessment or StatusAssessment(status="continue")
        previous = None
        if (p := view.plan_result) is not None:  # the previous iteration's assessment, as its plan result recorded it
            previous = StatusAssessment(status=p.status, goal_progress=p.goal_progress, confidence=p.confidence,
                                        summary=p.evidence_summary, degraded=p.degraded)
        try:
            result = await self.planner.generate_from_assessment(
                view.goal, view.loop_state(previous), self._context(view), assessment, plan_manager=view.manager
            )
        except PlanGenerationError as exc:
            emit(ErrorEvent(event="error", error=str(exc), iteration=view.iteration))
            return {"status": "failed", "error": str(exc)}
        refused = [w for w in result.warnings if w.startswith(REFUSED_NOTE)]
        event = PlanEvent(event="plan", iteration=view.iteration, plan_action=result.plan_action,
                          steps=[s.model_dump(mode="json") for s in (result.decision.steps if result.decision else [])],
                          degraded=result.degraded)
        if refused:
            event["refused"] = refused
        emit(event)
        return {"plan_result": result.model_dump(mode="json"), "error": None,
                "llm_calls": view.llm_calls + result.llm_calls}

    async def resolve_decision(self, state: State) -> dict[str, Any]:
        """The "validate" node: merge a ``new`` decision into the DAG; expose what is in flight."""
        if state.get("status") == "failed":
            return {}
        view = self.view(state)
        iteration, result, pm = view.iteration, view.plan_result, view.manager
        assert result is not None, "validate runs after plan_generate, which records a plan result"
        history = view.action_history
        if result.deliverable is not None and pm.deliverable is None:
            pm.deliverable = result.deliverable  # declared by the model with the goal's first plan
            emit(deliverable_event(result.deliverable, iteration))
        if result.plan_action == "new" and result.decision is not None:
            replace = view.assessment is not None and view.assessment.status == "replan"
            try:
                pm.ingest(result.decision, iteration, replace=replace)
            except PlanValidationError as exc:
                marker = f"iteration {iteration}: {_REJECTED}"
                if any(line.startswith(marker) for line in history):
                    error = f"the planner's decision was rejected twice in iteration {iteration}: {exc}"
                    emit(ErrorEvent(event="error", error=error, iteration=iteration))
                    return {"status": "failed", "error": error, "action_history": [*history, f"{marker} again: {exc}"]}
                feedback = (f"Your last plan was rejected: {'; '.join(exc.errors)}. "
                            "Fix exactly these problems in the next answer.")
                emit(ErrorEvent(event="error", error=str(exc), iteration=iteration, retry=True))
                memory = view.working_memory + "\n" + feedback
                return {"error": str(exc), "working_memory": memory[-WORKING_MEMORY_CHARS:],
                        "action_history": [*history, f"{marker}: {exc}"]}
        current = pm.in_flight_decision()
        if current is None:
            error = ("nothing to execute: the planner kept a plan but none is in flight"
                     + (" (the planner is degraded)" if result.degraded else ""))
            emit(ErrorEvent(event="error", error=error, iteration=iteration))
            return {"status": "failed", "error": error, "plan_manager": pm.to_dict()}
        return {"plan_manager": pm.to_dict(), "current_decision": current.model_dump(mode="json"), "error": None}

    async def record_iteration(self, state: State) -> dict[str, Any]:
        """Close an iteration: count it, log it, and rebuild the bounded working memory."""
        view = self.view(state)
        a, result, decision = view.assessment, view.plan_result, view.current_decision
        ran = {s.id for s in decision.steps} if decision is not None else set()
        mine = [r for r in view.results if r.step_id in ran]
        done = ", ".join(f"{r.step_id} {'ok' if r.success else 'failed'}" for r in mine) or "no step ran"
        line = (f"iteration {view.iteration}: {a.status if a else '?'} "
                f"(progress {a.goal_progress if a else 0.0:.2f}), "
                f"{result.plan_action if result else '?'}; {done}")
        history = [*view.action_history, line]
        # No results digest here: the next prompts carry new results in full and older ones under
        # their steps in the plan rendering; a third copy would only cost tokens.
        memory = "Recent iterations:\n" + "\n".join(history[-HISTORY_LINES_IN_MEMORY:])
        if len(memory) > WORKING_MEMORY_CHARS:
            memory = "…" + memory[-(WORKING_MEMORY_CHARS - 1):]
        return {"iteration": view.iteration + 1, "action_history": history, "working_memory": memory}

    async def goal_completion(self, state: State) -> dict[str, Any]:
        """The goal is done: a final answer from the evidence (one call when synthesising)."""
        view = self.view(state)
        results = view.results
        completed = [r for r in results if r.success]
        updates: dict[str, Any] = {"status": "done", "error": None}
        planned = _planned_answer(view.current_decision, view.manager)
        if planned is not None:
            # the plan ended in the one model step it made to answer: a synthesis would only restate it
            answer = planned
        elif self.synthesize:
            with counting_calls() as calls:
                try:
                    answer = await self.planner.answer(
                        view.goal, self._context(view), evidence=render_results(results, newest_first=False)
                    )
                except PlanGenerationError as exc:
                    logger.warning("goal_completion: synthesis failed (%s); using the step summary", exc)
                    answer = _summary(completed)
            updates["llm_calls"] = view.llm_calls + calls.calls
        else:
            answer = _summary(completed)
        updates["final_answer"] = answer
        emit(CompletedEvent(event="completed", final_answer=answer))
        return updates


def _planned_answer(decision: AgentDecision | None, manager: PlanManager) -> str | None:
    """The output of the last plan's one final step, when that step is a model step that succeeded.

    "Final" is a sink of the decision (no step of it depends on it). A plan with several final
    steps, or one ending in a tool call (a file written), has no single answer: ``None``.
    """
    if decision is None or not decision.steps:
        return None
    needed = {d for s in decision.steps for d in s.depends_on}
    sinks = [s for s in decision.steps if s.id not in needed]
    if len(sinks) != 1:
        return None
    last = sinks[0]
    if last.tool or last.tools or last.subagent:
        return None
    result = manager.results().get(last.id) if last.id in manager else None
    if result is None or not result.success or not result.output.strip():
        return None
    return result.output.strip()


def _configured_thread() -> str | None:
    try:
        from langgraph.config import get_config

        thread = (get_config().get("configurable") or {}).get("thread_id")
    except (RuntimeError, KeyError, LookupError):
        return None
    return str(thread) if thread is not None else None


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
