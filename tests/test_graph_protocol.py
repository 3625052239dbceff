"""The StrangeLoop runs on any LoopPlannerProtocol: a second, model-free implementation written here
runs the whole compiled loop, and a planner that does not fit the protocol is refused at build time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.tools import StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from loop_support import collect, kinds

from soothe_planner.dag import PlanManager
from soothe_planner.execution import StepExecutor
from soothe_planner.graph import build_strange_loop, goal_input, run_config
from soothe_planner.models import (
    AgentDecision,
    ContinuationAssessment,
    IntakeRoute,
    LoopState,
    PlanContext,
    PlanResult,
    StatusAssessment,
    StepAction,
)
from soothe_planner.planner import LLMPlanner
from soothe_planner.protocols import LoopPlannerProtocol, PlannerProtocol, protocol_mismatches
from soothe_planner.testing import ScriptedChatModel

GOAL = "shout the three words"
WORDS = ("alpha", "beta", "gamma")


class OneStepAtATime:
    """A deterministic loop planner with no model: one step per word, one word per iteration.

    It reads only what the protocol hands it: the evidence in ``state.step_results`` and, for its
    record, the goal-wide ``PlanManager`` the graph passes to both phases.
    """

    def __init__(self, words: tuple[str, ...] = WORDS, route: IntakeRoute = "complex") -> None:
        self.words = words
        self.route = route
        self.calls: list[str] = []
        self.managers: list[PlanManager | None] = []

    def _done(self, state: LoopState) -> list[str]:
        return [r.step_id for r in state.step_results if r.success]

    async def route_intake(self, goal: str, context: PlanContext) -> tuple[IntakeRoute, str]:
        self.calls.append("route_intake")
        return self.route, ("hello" if self.route == "trivial" else "")

    async def answer(self, goal: str, context: PlanContext, evidence: str = "") -> str:
        self.calls.append("answer")
        return f"answered from {len(evidence.splitlines())} lines of evidence"

    async def assess_status(
        self, goal: str, state: LoopState, context: PlanContext, plan_manager: PlanManager | None = None
    ) -> StatusAssessment:
        self.calls.append("assess_status")
        self.managers.append(plan_manager)
        done = self._done(state)
        status = "done" if len(done) == len(self.words) else "continue"
        return StatusAssessment(status=status, goal_progress=len(done) / len(self.words), confidence=1.0,
                                summary=f"{len(done)} of {len(self.words)} words shouted")

    async def generate_from_assessment(
        self,
        goal: str,
        state: LoopState,
        context: PlanContext,
        assessment: StatusAssessment,
        plan_manager: PlanManager | None = None,
    ) -> PlanResult:
        self.calls.append("generate_from_assessment")
        self.managers.append(plan_manager)
        done = set(self._done(state))
        word = next(w for w in self.words if w not in done)
        step = StepAction(id=word, description=word, tools=["shout"])
        return PlanResult(status="continue", plan_action="new", decision=AgentDecision(steps=[step]),
                          goal_progress=assessment.goal_progress)

    async def plan(
        self, goal: str, state: LoopState, context: PlanContext, plan_manager: PlanManager | None = None
    ) -> PlanResult:
        assessment = await self.assess_status(goal, state, context, plan_manager)
        if assessment.status == "done":
            return PlanResult(status="done", plan_action="keep", goal_progress=1.0)
        return await self.generate_from_assessment(goal, state, context, assessment, plan_manager)

    async def assess_continuation(
        self, goal: str, prior_completed_goals: list[str], context: PlanContext
    ) -> ContinuationAssessment:
        return ContinuationAssessment(action="plan_generate", reasoning="every goal gets a plan")


def shout() -> StructuredTool:
    def run(text: str) -> str:
        return text.upper()

    return StructuredTool.from_function(run, name="shout", description="shout a word", metadata={"read_only": True})


async def _run(planner: Any, **build: Any) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    graph = build_strange_loop(planner, StepExecutor(tools=[shout()]), checkpointer=InMemorySaver(), **build)
    config = run_config("p", 5)
    events, nodes = await asyncio.wait_for(collect(graph, goal_input(GOAL, thread_id="p"), config), 30)
    return (await graph.aget_state(config)).values, events, nodes


def test_the_second_implementation_conforms_by_name_and_by_signature() -> None:
    planner = OneStepAtATime()
    assert isinstance(planner, LoopPlannerProtocol)
    assert protocol_mismatches(planner, LoopPlannerProtocol) == []


async def test_the_whole_loop_runs_on_a_planner_with_no_model() -> None:
    planner = OneStepAtATime()
    state, events, nodes = await _run(planner, synthesize=True)
    assert state["status"] == "done" and state["iteration"] == 3
    assert nodes == [
        "intake",
        *(["plan_assess", "plan_generate", "validate", "execute", "record_iteration"] * 3),
        "plan_assess",
        "goal_completion",
        "finish",
    ]
    pm = PlanManager.from_dict(state["plan_manager"])
    assert [(r.step_id, r.output) for r in pm.step_results()] == [("alpha", "ALPHA"), ("beta", "BETA"),
                                                                  ("gamma", "GAMMA")]
    assert state["final_answer"] == "answered from 3 lines of evidence"
    assert planner.calls[0] == "route_intake" and planner.calls[-1] == "answer"
    # both phases saw the goal-wide DAG, growing by one step per iteration
    assert all(isinstance(m, PlanManager) for m in planner.managers)
    assert [len(m) for m in planner.managers if m is not None][-1] == 3
    assert kinds(events).count("step_completed") == 3 and kinds(events)[-1] == "completed"


async def test_a_trivial_route_is_answered_by_the_planner_with_no_plan() -> None:
    planner = OneStepAtATime(route="trivial")
    state, _, nodes = await _run(planner)
    assert (state["status"], state["final_answer"]) == ("done", "hello")
    assert nodes == ["intake", "answer", "finish"] and planner.calls == ["route_intake"]


async def test_with_intake_routing_off_the_planner_is_never_asked_to_route() -> None:
    planner = OneStepAtATime(route="trivial")
    state, _, _ = await _run(planner, intake=False)
    assert state["status"] == "done" and state["intake"] == "complex"
    assert "route_intake" not in planner.calls


# --------------------------------------------------------------------------- conformance


class NoIntake(OneStepAtATime):
    route_intake = None  # type: ignore[assignment]


class AssessWithoutManager(OneStepAtATime):
    async def assess_status(self, goal: str, state: LoopState, context: PlanContext) -> StatusAssessment:  # type: ignore[override]
        raise AssertionError("never called: refused at build time")


class SyncAnswer(OneStepAtATime):
    def answer(self, goal: str, context: PlanContext, evidence: str = "") -> str:  # type: ignore[override]
        return "sync"


class RenamedArgument(OneStepAtATime):
    async def answer(self, goal: str, context: PlanContext, notes: str = "") -> str:  # type: ignore[override]
        return notes


class Delegating:
    """A wrapper that forwards everything: ``*args, **kwargs`` accept whatever the protocol passes."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def generate_from_assessment(self, *args: Any, **kw: Any) -> PlanResult:
        result: PlanResult = await self._inner.generate_from_assessment(*args, **kw)
        return result


@pytest.mark.parametrize(
    ("planner", "expected"),
    [
        (NoIntake(), "has no method 'route_intake'"),
        (AssessWithoutManager(), "assess_status(goal, state, context) cannot be called positionally"),
        (SyncAnswer(), "SyncAnswer.answer is not an async function"),
        (RenamedArgument(), "answer(goal, context, notes='') cannot be called by keyword"),
    ],
)
def test_a_planner_that_does_not_fit_the_protocol_is_refused_before_anything_runs(planner: Any, expected: str) -> None:
    problems = protocol_mismatches(planner, LoopPlannerProtocol)
    assert len(problems) == 1 and expected in problems[0], problems
    with pytest.raises(TypeError, match="does not implement LoopPlannerProtocol") as err:
        build_strange_loop(planner, StepExecutor())
    assert expected in str(err.value)


def test_a_runtime_checkable_isinstance_alone_misses_what_the_signature_check_catches() -> None:
    planner = AssessWithoutManager()
    assert isinstance(planner, LoopPlannerProtocol)  # names only
    assert protocol_mismatches(planner, LoopPlannerProtocol) != []


async def test_a_delegating_wrapper_conforms_and_runs_the_loop() -> None:
    wrapped = Delegating(OneStepAtATime())
    assert protocol_mismatches(wrapped, LoopPlannerProtocol) == []
    state, _, _ = await _run(wrapped)
    assert state["status"] == "done"


def test_the_llm_planner_conforms_to_both_protocols_by_signature() -> None:
    planner = LLMPlanner(ScriptedChatModel(responses=[]))
    assert protocol_mismatches(planner, LoopPlannerProtocol) == []
    assert protocol_mismatches(planner, PlannerProtocol) == []


async def test_each_node_decodes_the_plan_manager_at_most_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import Counter

    from langgraph.config import get_config

    decodes: Counter[str] = Counter()
    real = PlanManager.from_dict.__func__  # type: ignore[attr-defined]

    def counting(cls: type[PlanManager], data: Any) -> PlanManager:
        decodes[get_config()["metadata"]["langgraph_node"]] += 1
        manager: PlanManager = real(cls, data)
        return manager

    monkeypatch.setattr(PlanManager, "from_dict", classmethod(counting))
    _, _, nodes = await _run(OneStepAtATime(), synthesize=True)
    ran = Counter(nodes)
    assert decodes and all(decodes[node] <= ran[node] for node in decodes), (decodes, ran)
    assert decodes["intake"] == 0  # routing needs no DAG
