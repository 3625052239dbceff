"""A planner call reads the run's steps and their latest results once, from one source: the
manager's nodes when it has a manager, else the state's decision and results (``RunSteps``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from planner_support import CTX, act, assess, bad, ok, plan, planner, state, step

from soothe_planner.dag import PlanManager
from soothe_planner.models import AgentDecision, LoopState
from soothe_planner.planner import RunSteps
from soothe_planner.planner import llm_planner as llm_planner_module

PLANNER = Path(__file__).resolve().parent.parent / "soothe_planner" / "planner"




def test_with_a_manager_the_steps_and_results_are_the_managers() -> None:
    decision = AgentDecision(steps=[act("a"), act("b", "a")])
    pm = PlanManager("g")
    pm.ingest(decision, 0)
    pm.mark_started("a")
    pm.record_step_outcomes([ok("a")])
    # the state says nothing of a's result: the manager is the one source when there is one
    run = RunSteps.of(LoopState(goal="g", iteration=1, current_decision=decision), pm)
    assert run.manager is pm and run.decision is decision
    assert [s.id for s in run.steps] == ["a", "b"] and run.results == pm.step_results()
    assert run.results[0] is pm.node("a").result  # the node's result, not a copy
    assert [(s.id, s.status) for s in run.plan_nodes(ordered=True) or []] == [("a", "completed"), ("b", "pending")]


def test_without_a_manager_they_are_the_decisions_steps_and_each_steps_latest_result() -> None:
    decision = AgentDecision(steps=[act("a"), act("b"), act("c", "b")])
    loop = LoopState(goal="g", iteration=1, current_decision=decision, step_results=[bad("a"), ok("b"), ok("a", 2)])
    run = RunSteps.of(loop, None)
    assert run.manager is None and [s.id for s in run.steps] == ["a", "b", "c"]
    assert [(r.step_id, r.attempt) for r in run.results] == [("b", 1), ("a", 2)]
    nodes = run.plan_nodes(ordered=False) or []
    assert [(n.id, n.status) for n in nodes] == [("a", "completed"), ("b", "completed"), ("c", "pending")]
    assert RunSteps.of(LoopState(goal="g"), None).plan_nodes(ordered=False) is None  # no plan at all


def test_no_reader_in_the_planner_chooses_between_the_manager_and_the_state() -> None:
    """Only ``run_steps.py`` reads ``step_results`` off a state or a manager: every other module of
    the planner takes the call's ``RunSteps``."""
    readers = []
    for path in sorted(PLANNER.rglob("*.py")):
        if path.name == "run_steps.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr == "step_results":
                readers.append(f"{path.relative_to(PLANNER)}:{node.lineno}")
    assert readers == []


async def test_a_planner_call_reads_the_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[RunSteps] = []

    class Counted(RunSteps):
        @classmethod
        def of(cls, loop: LoopState, manager: PlanManager | None) -> RunSteps:
            built.append(RunSteps.of(loop, manager))
            return built[-1]

    monkeypatch.setattr(llm_planner_module, "RunSteps", Counted)
    p, model = planner(assess("continue"), plan(step("s1")))
    decision = AgentDecision(steps=[act("s0")])
    pm = PlanManager("g", allowed_capabilities=["read_file", "search"])
    pm.ingest(decision, 0)
    pm.mark_started("s0")
    pm.record_step_outcomes([ok("s0")])
    result = await p.plan("g", state(current_decision=decision, step_results=pm.step_results()), CTX, pm)
    assert result.plan_action == "new" and len(model.calls) == 2  # both phases ran
    assert len(built) == 1 and built[0].manager is pm
