"""LLMPlanner over ScriptedChatModel: every branch of plan(), the repair ladder, the other protocols."""

from __future__ import annotations

import pytest
from planner_support import CTX, FAST, GOAL, assess, manager, plan, planner, state, step

from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.models import (
    AgentDecision,
    LoopState,
    Plan,
    PlannerSettings,
    PlanStep,
    StatusAssessment,
    StepAction,
    StepResult,
)
from soothe_planner.planner import LLMPlanner
from soothe_planner.protocols import LoopPlannerProtocol, PlannerProtocol, protocol_mismatches
from soothe_planner.testing import ScriptedChatModel


def test_llm_planner_satisfies_both_protocols() -> None:
    p, _ = planner()
    assert isinstance(p, PlannerProtocol)
    assert isinstance(p, LoopPlannerProtocol)
    # isinstance checks names only; the signatures must also take every call the protocols allow
    assert protocol_mismatches(p, PlannerProtocol) == []
    assert protocol_mismatches(p, LoopPlannerProtocol) == []


# --------------------------------------------------------------------------- plan(): the branches


async def test_done_at_iteration_one_costs_exactly_one_call() -> None:
    p, model = planner(assess("done", 1.0, "the summary was written"))
    result = await p.plan(
        GOAL, state(1, step_results=[StepResult(step_id="s1", success=True, output="x")]), CTX
    )
    assert result.status == "done" and result.decision is None
    assert len(model.calls) == 1 and result.llm_calls == 1
    assert result.evidence_summary == "the summary was written"
    assert model.calls[0].schema_name == "AssessStatus"
    assert model.calls[0].metadata["soothe_phase"] == "plan-assess"
    assert model.calls[0].metadata["thread_id"] == "t1" and model.calls[0].metadata["iteration"] == 1


async def test_a_fresh_goal_with_no_plan_is_not_assessed_while_the_guard_is_on() -> None:
    # The guard would turn 'done' into 'continue' and there is nothing to replan: the answer is known.
    p, model = planner(plan(step("s1")))
    result = await p.plan(GOAL, state(0), CTX, plan_manager=manager())
    assert result.status == "continue" and result.plan_action == "new"
    assert [c.schema_name for c in model.calls] == ["GeneratePlan"] and result.llm_calls == 1
    assert p.stats.guard_overrides == 0


async def test_done_at_iteration_zero_without_evidence_is_overridden_to_continue_then_generates() -> None:
    pm = manager(StepAction(id="s1", description="read it", tools=["read_file"]))
    p, model = planner(assess("done", 0.9), plan(step("s2", "s1")))
    result = await p.plan(GOAL, state(0), CTX, plan_manager=pm)
    assert result.status == "continue" and result.plan_action == "new"
    assert [c.schema_name for c in model.calls] == ["AssessStatus", "GeneratePlan"] and result.llm_calls == 2
    assert p.stats.guard_overrides == 1
    assert "guard" in result.evidence_summary


def _two_rounds(second_fails: bool) -> tuple[PlanManager, LoopState]:
    """s1 finished in round 0; s2 (after s1) ran in round 1 and succeeded or failed for good."""
    pm = manager(StepAction(id="s1", description="read it", tools=["read_file"]))
    first = StepResult(step_id="s1", success=True, output="the README says hello")
    pm.record_step_outcomes([first])
    decision = AgentDecision(steps=[StepAction(id="s2", description="summarise it", depends_on=["s1"])])
    pm.ingest(decision, 1)
    second = (StepResult(step_id="s2", success=False, error="disk on fire", error_type="tool_error") if second_fails
              else StepResult(step_id="s2", success=True, output="a summary"))
    pm.record_step_outcomes([second])
    previous = StatusAssessment(status="continue", goal_progress=0.4, summary="read")
    return pm, state(2, current_decision=decision, step_results=[first, second], previous_assessment=previous)


async def test_a_step_of_the_last_decision_that_failed_for_good_means_replan_without_a_call() -> None:
    pm, st = _two_rounds(second_fails=True)
    p, model = planner(plan(step("s3", "s1")))
    result = await p.plan(GOAL, st, CTX, plan_manager=pm)
    assert [c.schema_name for c in model.calls] == ["GeneratePlan"] and result.llm_calls == 1
    assert result.status == "replan" and result.goal_progress == 0.4  # carried over, not judged
    assert "s2 failed" in result.evidence_summary
    assert "disk on fire" in model.calls[0].prompt_text  # generation sees the error


async def test_the_failure_shortcut_can_be_switched_off() -> None:
    pm, st = _two_rounds(second_fails=True)
    settings = PlannerSettings(transport_backoff_s=0.0, replan_on_failure_without_assessment=False)
    p, model = planner(assess("done", 1.0, "the summary was not needed"), settings=settings)
    result = await p.plan(GOAL, st, CTX, plan_manager=pm)
    assert result.status == "done" and [c.schema_name for c in model.calls] == ["AssessStatus"]


async def test_a_round_without_failures_is_assessed_by_the_model() -> None:
    pm, st = _two_rounds(second_fails=False)
    p, model = planner(assess("done", 1.0, "summarised"))
    result = await p.plan(GOAL, st, CTX, plan_manager=pm)
    assert result.status == "done" and [c.schema_name for c in model.calls] == ["AssessStatus"]


async def test_a_failure_outside_the_last_decision_is_left_to_the_model() -> None:
    # s1 failed two rounds ago and s2 replaced it and succeeded: nothing of the last decision failed
    results = [StepResult(step_id="s1", success=False, error="timeout", error_type="timeout"),
               StepResult(step_id="s2", success=True, output="done another way")]
    last = AgentDecision(steps=[StepAction(id="s2", description="do it another way")])
    p, model = planner(assess("done", 1.0))
    result = await p.plan(GOAL, state(2, step_results=results, current_decision=last), CTX)
    assert result.status == "done" and [c.schema_name for c in model.calls] == ["AssessStatus"]


async def test_a_failure_is_not_taken_as_known_without_the_decision_it_came_from() -> None:
    # a caller driving the planner by hand, with no current decision: what is new is unknown, so ask
    failed = StepResult(step_id="s1", success=False, error="timeout", error_type="timeout")
    p, model = planner(assess("replan", 0.1), plan(step("s2")))
    result = await p.plan(GOAL, state(1, step_results=[failed]), CTX)
    assert [c.schema_name for c in model.calls] == ["AssessStatus", "GeneratePlan"]
    assert result.status == "replan"


async def test_the_iteration_zero_guard_can_be_switched_off() -> None:
    settings = PlannerSettings(reject_done_at_iteration_zero=False)
    p, model = planner(assess("done", 1.0), settings=settings)
    result = await p.plan(GOAL, state(0), CTX)
    assert result.status == "done" and len(model.calls) == 1


async def test_continue_with_a_new_decision_is_validated_against_the_manager() -> None:
    pm = manager()
    p, model = planner(assess("continue", 0.2), plan(step("s1"), step("s2", "s1")))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=pm)
    assert result.status == "continue" and result.plan_action == "new"
    assert result.decision is not None and [s.id for s in result.decision.steps] == ["s1", "s2"]
    assert result.llm_calls == 2 and result.goal_progress == 0.2
    assert model.calls[1].metadata["soothe_phase"] == "plan-generate"
    assert p.stats.structured_ok == 2


async def test_replan_new_decision_is_validated_as_a_replacement() -> None:
    pm = manager(
        StepAction(id="s1", description="old", tools=["read_file"]),
        StepAction(id="s2", description="old too", depends_on=["s1"]),
    )
    # under replace, s2 (pending, not re-listed) leaves the graph: a step depending on it is invalid
    bad = plan(step("s3", "s2"))
    good = plan(step("s3"))
    p, model = planner(assess("replan", 0.3), bad, good)
    result = await p.plan(GOAL, state(1), CTX, plan_manager=pm)
    assert result.status == "replan" and result.decision is not None
    assert [s.id for s in result.decision.steps] == ["s3"]
    assert model.calls[2].metadata["soothe_phase"] == "plan-reask"
    report = pm.ingest(result.decision, 1, replace=True)
    assert set(report.superseded) == {"s1", "s2"}


async def test_keep_with_a_plan_in_flight_keeps_it() -> None:
    pm = manager(StepAction(id="s1", description="read", tools=["read_file"]))
    p, _model = planner(assess("continue", 0.4), plan(action="keep"))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=pm)
    assert result.plan_action == "keep" and result.decision is None
    assert result.llm_calls == 2


async def test_keep_with_a_plan_in_flight_from_state_without_a_manager() -> None:
    decision = AgentDecision(
        steps=[StepAction(id="s1", description="a"), StepAction(id="s2", description="b")]
    )
    st = state(1, current_decision=decision, step_results=[StepResult(step_id="s1", success=True)])
    p, _ = planner(assess("continue"), plan(action="keep"))
    result = await p.plan(GOAL, st, CTX)
    assert result.plan_action == "keep"


async def test_keep_with_nothing_in_flight_makes_the_planner_generate() -> None:
    p, model = planner(assess("continue", 0.1), plan(action="keep"), plan(step("s1")))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    assert result.plan_action == "new" and result.decision is not None
    assert len(model.calls) == 3 and result.llm_calls == 3
    assert "no plan in flight" in model.calls[2].last_text
    assert p.stats.keep_without_plan == 1 and result.warnings


async def test_simple_intake_at_iteration_zero_skips_the_assessment_call() -> None:
    p, model = planner(plan(step("s1")))
    result = await p.plan(GOAL, state(0, intake="simple"), CTX)
    assert result.plan_action == "new" and len(model.calls) == 1


async def test_assess_model_answers_phase_one_and_the_main_model_phase_two() -> None:
    cheap = ScriptedChatModel(responses=[assess("continue")])
    main = ScriptedChatModel(responses=[plan(step("s1"))])
    p = LLMPlanner(main, assess_model=cheap, settings=FAST)
    await p.plan(GOAL, state(1), CTX)
    assert [c.schema_name for c in cheap.calls] == ["AssessStatus"]
    assert [c.schema_name for c in main.calls] == ["GeneratePlan"]


# --------------------------------------------------------------------------- continuation and intake


async def test_continuation_bootstrap_with_reasoning_is_accepted() -> None:
    p, _ = planner({"action": "bootstrap", "reasoning": "it extends the last answer"})
    ca = await p.assess_continuation("and in French?", ["translate the intro"], CTX)
    assert ca.action == "bootstrap"


async def test_continuation_bootstrap_without_reasoning_is_overridden() -> None:
    p, _ = planner({"action": "bootstrap", "reasoning": ""})
    ca = await p.assess_continuation("and in French?", ["translate the intro"], CTX)
    assert ca.action == "plan_generate" and "reasoning" in ca.reasoning
    assert p.stats.guard_overrides == 1


async def test_continuation_bootstrap_for_simple_intake_is_overridden() -> None:
    p, _ = planner({"action": "bootstrap", "reasoning": "short"})
    ca = await p.assess_continuation("and in French?", ["x"], CTX.model_copy(update={"intake": "simple"}))
    assert ca.action == "plan_generate" and "simple" in ca.reasoning


async def test_continuation_for_complex_intake_skips_the_call() -> None:
    p, model = planner()
    ca = await p.assess_continuation(
        "rewrite everything", ["x"], CTX.model_copy(update={"intake": "complex"})
    )
    assert ca.action == "plan_generate" and not model.calls


async def test_follow_up_bootstrap_plans_one_terminal_step() -> None:
    p, model = planner({"action": "bootstrap", "reasoning": "one more lookup"}, plan(step("s1")))
    st = state(0, continuation=True, prior_goals=["translate the intro"])
    result = await p.plan("and in French?", st, CTX)
    assert result.terminal_after_execute and result.decision is not None and len(result.decision.steps) == 1
    assert [c.metadata["soothe_phase"] for c in model.calls] == ["continuation", "plan-generate"]
    assert "exactly one step" in model.calls[1].last_text
    assert result.llm_calls == 2


@pytest.mark.parametrize("route", ["simple", "complex"])
async def test_intake_routes_non_trivial_requests_without_an_answer(route: str) -> None:
    p, _ = planner({"route": route, "answer": ""})
    assert await p.route_intake(GOAL, CTX) == (route, "")


async def test_trivial_intake_answers_directly() -> None:
    p, model = planner({"route": "trivial", "answer": "4"})
    assert await p.route_intake("2+2?", CTX) == ("trivial", "4")
    assert model.calls[0].metadata["soothe_phase"] == "intake"


async def test_trivial_intake_without_an_answer_asks_for_one() -> None:
    p, model = planner({"route": "trivial", "answer": ""}, "Four.")
    assert await p.route_intake("2+2?", CTX) == ("trivial", "Four.")
    assert model.calls[1].metadata["soothe_phase"] == "answer"


# --------------------------------------------------------------------------- PlannerProtocol


async def test_create_plan_returns_a_validated_plan() -> None:
    p, _model = planner(plan(step("s1"), step("s2", "s1", tools=("search",))))
    result = await p.create_plan(GOAL, CTX)
    assert [s.id for s in result.steps] == ["s1", "s2"]
    assert all(s.status == "pending" for s in result.steps)
    assert result.steps[1].depends_on == ["s1"]
    assert result.revision == 0 and result.status == "active"


async def test_create_plan_re_asks_a_keep_answer() -> None:
    p, model = planner(plan(action="keep"), plan(step("s1")))
    result = await p.create_plan(GOAL, CTX)
    assert len(result.steps) == 1 and "keep" in model.calls[1].last_text


def _run_plan() -> Plan:
    ok = StepResult(step_id="s1", success=True, output="README text")
    bad = StepResult(step_id="s2", success=False, error="file not found", error_type="tool_error")
    blocked = StepResult(step_id="s3", success=False, error="dependency s2 failed", error_type="blocked")
    return Plan(
        goal=GOAL,
        steps=[
            PlanStep(id="s1", description="read", status="completed", result=ok, tools=["read_file"]),
            PlanStep(id="s2", description="read docs", status="failed", result=bad, depends_on=["s1"]),
            PlanStep(id="s3", description="summarise", status="skipped", result=blocked, depends_on=["s2"]),
            PlanStep(id="s4", description="polish", depends_on=["s1"]),
        ],
    )


async def test_reflect_splits_direct_failures_from_blocked_ones() -> None:
    p, model = planner()
    reflection = await p.reflect(_run_plan(), [])
    assert reflection.failed_details == {"s2": "file not found"}
    assert reflection.blocked_steps == ["s3"]
    assert reflection.should_revise and not model.calls
    assert "s2" in reflection.feedback


async def test_reflect_with_llm_reflection_keeps_the_facts() -> None:
    settings = PlannerSettings(llm_reflection=True)
    p, model = planner(
        {"assessment": "docs are missing", "should_revise": True, "feedback": "use the README"},
        settings=settings,
    )
    reflection = await p.reflect(_run_plan(), [])
    assert reflection.blocked_steps == ["s3"] and "docs are missing" in reflection.assessment
    assert model.calls[0].metadata["soothe_phase"] == "reflect"


async def test_revise_plan_keeps_finished_work_and_shows_the_model_statuses() -> None:
    original = _run_plan()
    p, model = planner(
        plan(step("s5", "s1"), {"id": "s4", "description": "polish again", "depends_on": ["s5"]})
    )
    reflection = await p.reflect(original, [])
    revised = await p.revise_plan(original, reflection, thread_id="t1")
    by_id = {s.id: s for s in revised.steps}
    assert by_id["s1"].status == "completed" and by_id["s1"].result is not None
    assert by_id["s1"].result.output == "README text"
    assert by_id["s2"].status == "failed" and by_id["s3"].status == "skipped"
    assert by_id["s4"].description == "polish again" and by_id["s4"].depends_on == ["s5"]
    assert revised.revision == original.revision + 1 and revised.id == original.id
    assert original.status == "revised"
    shown = model.calls[0].last_text
    assert "s1 [completed]" in shown and "s2 [failed]" in shown
    assert model.calls[0].metadata["soothe_phase"] == "revise"


# --------------------------------------------------------------------------- concurrency and methods


async def test_reflect_recommends_complete_when_every_step_completed() -> None:
    done = Plan(goal=GOAL, steps=[PlanStep(id="s1", description="read", status="completed",
                                            result=StepResult(step_id="s1", success=True, output="ok"))])
    p, _ = planner()
    reflection = await p.reflect(done, [])
    assert [d.action for d in reflection.goal_directives] == ["complete"] and not reflection.should_revise


async def test_reflect_recommends_fail_only_when_a_revised_plan_achieved_nothing_and_nothing_can_run() -> None:
    bad = StepResult(step_id="s1", success=False, error="denied", error_type="policy_denied")
    first = Plan(goal=GOAL, steps=[PlanStep(id="s1", description="x", status="failed", result=bad)])
    p, _ = planner()
    assert (await p.reflect(first, [])).should_revise  # a first failure is worth a revision
    revised = first.model_copy(update={"revision": 1})
    reflection = await p.reflect(revised, [])
    assert [d.action for d in reflection.goal_directives] == ["fail"] and not reflection.should_revise


async def test_results_passed_to_reflect_override_what_the_plan_recorded() -> None:
    p, _ = planner()
    fresh = [StepResult(step_id="s4", success=False, error="timeout", error_type="timeout")]
    reflection = await p.reflect(_run_plan(), fresh)
    assert set(reflection.failed_details) == {"s2", "s4"}


async def test_a_small_prompt_budget_trims_state_and_is_counted() -> None:
    settings = PlannerSettings(prompt_budget_tokens=500, transport_backoff_s=0)
    results = [StepResult(step_id=f"e{i}", success=True, output="long output " * 40) for i in range(20)]
    p, model = planner(assess("continue"), plan(step("s1")), settings=settings)
    await p.plan(GOAL, state(1, step_results=results), CTX)
    assert p.stats.budget_trims + p.stats.budget_overflow == 2
    assert "trimmed to fit the prompt budget" in model.calls[1].last_text


