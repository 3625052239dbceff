"""A step's result has one home, its DAG node: the manager reads results back in the order they
were recorded, ``latest_results`` is the one reduction of a result list, and both survive a
checkpoint round trip."""

from __future__ import annotations

import warnings

import pytest
from planner_support import act, bad, ok

from soothe_planner.dag import PlanManager, latest_results
from soothe_planner.models import AgentDecision, Plan, PlanStep, StepResult
from soothe_planner.planner import latest_results as planner_latest_results
from soothe_planner.planner.prompts import phases


def record(pm: PlanManager, *results: StepResult) -> None:
    for r in results:
        pm.mark_started(r.step_id)
        pm.record_step_outcomes([r])


def test_latest_results_keeps_the_last_attempt_in_the_order_the_last_attempts_arrived() -> None:
    got = latest_results([bad("a"), ok("b"), ok("a", attempt=2), ok("c")])
    assert [(r.step_id, r.attempt) for r in got] == [("b", 1), ("a", 2), ("c", 1)]
    # one definition: the planner's names are the same function, not copies
    assert planner_latest_results is latest_results and phases.latest_results is latest_results


def test_step_results_are_the_nodes_results_in_the_order_they_were_recorded() -> None:
    pm = PlanManager("g", failure_policy="retry(1)")
    pm.ingest(AgentDecision(steps=[act("a"), act("b"), act("c", "b")]))
    record(pm, ok("b"), bad("a"))
    assert [(r.step_id, r.success) for r in pm.step_results()] == [("b", True), ("a", False)]
    record(pm, ok("c"), ok("a", attempt=2))  # a's retry arrives last, so it moves to the end
    assert [r.step_id for r in pm.step_results()] == ["b", "c", "a"]
    assert all(r is pm.node(r.step_id).result for r in pm.step_results())  # no second copy


def test_blocked_results_follow_the_failure_that_caused_them() -> None:
    pm = PlanManager("g")
    pm.ingest(AgentDecision(steps=[act("a"), act("b", "a"), act("c")]))
    pm.mark_started("a")
    pm.mark_started("c")
    pm.record_step_outcomes([bad("a"), ok("c")])
    assert [(r.step_id, r.error_type) for r in pm.step_results()] == [
        ("a", "tool_error"), ("c", None), ("b", "blocked"),
    ]  # fmt: skip


def test_superseded_steps_are_not_results_of_anything_that_ran() -> None:
    pm = PlanManager("g")
    pm.ingest(AgentDecision(steps=[act("a"), act("b")]))
    record(pm, ok("a"))
    pm.ingest(AgentDecision(steps=[act("c")]), 1, replace=True)
    assert pm.node("b").result is not None and pm.node("b").result.error_type == "superseded"
    assert [r.step_id for r in pm.step_results()] == ["a"]


def test_the_record_order_survives_a_round_trip_and_an_old_dict_falls_back_to_plan_order() -> None:
    pm = PlanManager("g")
    pm.ingest(AgentDecision(steps=[act("a"), act("b")]))
    record(pm, ok("b"), ok("a"))
    again = PlanManager.from_dict(pm.to_dict())
    assert [r.step_id for r in again.step_results()] == ["b", "a"]
    old = pm.to_dict()
    del old["recorded"]  # saved before the order was kept
    assert [r.step_id for r in PlanManager.from_dict(old).step_results()] == ["a", "b"]


def test_a_manager_built_from_a_plan_reads_its_recorded_results() -> None:
    plan = Plan(goal="g", steps=[
        PlanStep(id="a", description="a", status="completed", result=ok("a")),
        PlanStep(id="b", description="b"),
    ])  # fmt: skip
    assert [r.step_id for r in PlanManager.from_plan(plan).step_results()] == ["a"]


def test_an_old_checkpoint_holding_parallel_mode_loads_as_dependency() -> None:
    pm = PlanManager("g")
    pm.ingest(AgentDecision(steps=[act("a")], execution_mode="sequential"))
    data = pm.to_dict()
    data["execution_mode"] = "parallel"
    assert PlanManager.from_dict(data).execution_mode == "dependency"
    stored = {"steps": [act("a").model_dump()], "execution_mode": "parallel"}
    assert AgentDecision.model_validate(stored).execution_mode == "dependency"


def test_planning_context_is_a_deprecated_name_of_dag_prompt() -> None:
    pm = PlanManager("g")
    pm.ingest(AgentDecision(steps=[act("a")]))
    with pytest.warns(DeprecationWarning, match="dag_prompt"):
        old = pm.planning_context()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pm.dag_prompt() == old == "a [pending] do a"
