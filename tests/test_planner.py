"""LLMPlanner over ScriptedChatModel: every branch of plan(), the repair ladder, the other protocols."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any

import httpx
import pytest
from langchain_openai import ChatOpenAI

from soothe_planner._calls import is_transport_error, resolve_method
from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
from soothe_planner.errors import LLMBudgetExceeded, PlanGenerationError
from soothe_planner.models import (
    AgentDecision,
    LoopState,
    Plan,
    PlanContext,
    PlannerSettings,
    PlanStep,
    StatusAssessment,
    StepAction,
    StepResult,
)
from soothe_planner.plan_manager import PlanManager
from soothe_planner.planner import LLMPlanner
from soothe_planner.protocols import LoopPlannerProtocol, PlannerProtocol
from soothe_planner.testing import ScriptedCall, ScriptedChatModel

GOAL = "summarise the project's README"
CTX = PlanContext(available_capabilities=["read_file", "search"], thread_id="t1")
FAST = PlannerSettings(transport_backoff_s=0.0)


def assess(status: str, progress: float = 0.5, summary: str = "evidence read") -> dict[str, Any]:
    return {"status": status, "goal_progress": progress, "confidence": 0.8, "summary": summary}


def plan(*steps: dict[str, Any], action: str = "new") -> dict[str, Any]:
    return {
        "plan_action": action,
        "execution_mode": "dependency",
        "next_action": "proceed",
        "steps": list(steps),
    }


def step(sid: str, *deps: str, tools: tuple[str, ...] = ("read_file",)) -> dict[str, Any]:
    return {"id": sid, "description": f"do {sid}", "depends_on": list(deps), "tools": list(tools)}


def manager(*actions: StepAction) -> PlanManager:
    pm = PlanManager(GOAL, allowed_capabilities=["read_file", "search"])
    if actions:
        pm.ingest(AgentDecision(steps=list(actions)), 0)
    return pm


def state(iteration: int = 1, **kw: Any) -> LoopState:
    return LoopState(goal=GOAL, thread_id="t1", iteration=iteration, **kw)


def planner(
    *replies: Any, settings: PlannerSettings = FAST, **kw: Any
) -> tuple[LLMPlanner, ScriptedChatModel]:
    model = ScriptedChatModel(responses=list(replies))
    return LLMPlanner(model, settings=settings, **kw), model


def test_llm_planner_satisfies_both_protocols() -> None:
    p, _ = planner()
    assert isinstance(p, PlannerProtocol)
    assert isinstance(p, LoopPlannerProtocol)


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
    assert p.stats["guard_overrides"] == 0


async def test_done_at_iteration_zero_without_evidence_is_overridden_to_continue_then_generates() -> None:
    pm = manager(StepAction(id="s1", description="read it", tools=["read_file"]))
    p, model = planner(assess("done", 0.9), plan(step("s2", "s1")))
    result = await p.plan(GOAL, state(0), CTX, plan_manager=pm)
    assert result.status == "continue" and result.plan_action == "new"
    assert [c.schema_name for c in model.calls] == ["AssessStatus", "GeneratePlan"] and result.llm_calls == 2
    assert p.stats["guard_overrides"] == 1
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
    assert p.stats["structured_ok"] == 2


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


async def test_a_structured_answer_gets_the_parsers_repairs_instead_of_a_reask() -> None:
    # a small model lists a made-up name and a tool as dependencies: dropped with a warning, no re-ask
    pm = manager()
    reply = plan(step("s1"), step("s2", "s1", "SetEquation", "read_file"))
    p, model = planner(assess("continue", 0.2), reply)
    result = await p.plan(GOAL, state(1), CTX, plan_manager=pm)
    assert result.decision is not None
    assert [s.depends_on for s in result.decision.steps] == [[], ["s1"]]
    assert result.llm_calls == 2 and len(model.calls) == 2
    assert any("unknown step 'SetEquation'" in w for w in result.warnings)
    assert any("'read_file' is a tool, not a step" in w for w in result.warnings)


async def test_a_new_step_may_depend_on_a_finished_step_of_the_goal_dag() -> None:
    pm = manager(StepAction(id="s1", description="read", tools=["read_file"]))
    pm.mark_started("s1")
    pm.record_step_outcomes([StepResult(step_id="s1", success=True, output="text")])
    # structured and written answers alike keep a dependency on a step already in the DAG
    for reply in (plan(step("s2", "s1")), json.dumps(plan(step("s2", "s1")))):
        p, _model = planner(assess("continue", 0.5), reply)
        result = await p.plan(GOAL, state(2), CTX, plan_manager=pm)
        assert result.decision is not None
        assert [(s.id, s.depends_on) for s in result.decision.steps] == [("s2", ["s1"])]
        assert not any("s1" in w for w in result.warnings)


async def test_a_structured_cycle_is_still_reasked() -> None:
    pm = manager()
    p, model = planner(assess("continue", 0.2), plan(step("s1", "s2"), step("s2", "s1")), plan(step("s1")))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=pm)
    assert result.decision is not None and [s.id for s in result.decision.steps] == ["s1"]
    assert model.calls[2].metadata["soothe_phase"] == "plan-reask"
    assert "cycle: s1 -> s2 -> s1" in model.calls[2].last_text


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
    assert p.stats["keep_without_plan"] == 1 and result.warnings


async def test_invalid_plan_is_re_asked_showing_the_failed_output_and_the_error() -> None:
    cyclic = plan(step("s1", "s2"), step("s2", "s1"))
    p, model = planner(assess("continue"), cyclic, plan(step("s1"), step("s2", "s1")))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    assert result.decision is not None
    reask = model.calls[2]
    assert reask.metadata["soothe_phase"] == "plan-reask"
    assert "cycle" in reask.last_text
    assert '"depends_on": ["s2"]' in reask.last_text  # the model's own failed output, shown back
    # the re-ask extends a copy: the original conversation still ends with the human turn
    assert len(model.calls[1].messages) == 2 and len(reask.messages) == 3


async def test_unknown_tool_is_a_validation_error_that_is_re_asked() -> None:
    p, model = planner(assess("continue"), plan(step("s1", tools=("rm",))), plan(step("s1")))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    assert result.decision is not None and result.decision.steps[0].tools == ["read_file"]
    assert "rm" in model.calls[2].last_text


async def test_garbage_then_recovery_by_re_ask() -> None:
    garbage = "I would love to help! First we think, then we act."
    p, model = planner(assess("continue"), garbage, garbage, plan(step("s1")))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    assert result.decision is not None
    phases = [c.metadata["soothe_phase"] for c in model.calls]
    assert phases == ["plan-assess", "plan-generate", "plan-raw", "plan-reask"]
    assert model.calls[2].method is None  # the raw fallback is an unstructured call
    assert garbage in model.calls[3].last_text
    assert "error" in model.calls[3].last_text.lower()
    assert p.stats["raw_fallback"] == 1 and p.stats["reask"] == 1 and p.stats["reask_ok"] == 1


async def test_salvage_reads_broken_structured_output_without_an_extra_call() -> None:
    # function_calling gets text with the JSON wrapped in prose: the tool call is missing,
    # the lenient parser finds the plan in the raw text
    text = "Sure! " + json.dumps(plan(step("s1"))) + " Hope that helps."
    p, model = planner(assess("continue"), text)
    result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    assert result.decision is not None and len(model.calls) == 2
    assert p.stats["salvaged"] == 1


async def test_garbage_all_the_way_raises_with_every_attempt() -> None:
    garbage = "no plan here, sorry"
    p, model = planner(assess("continue"), garbage, garbage, garbage, garbage)
    with pytest.raises(PlanGenerationError) as info:
        await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    err = info.value
    assert err.phase == "plan-generate"
    kinds = [a.kind for a in err.attempts]
    assert kinds[0] == "structured" and "raw" in kinds and kinds.count("reask") == 2
    assert all(a.raw_text == garbage for a in err.attempts if a.kind in ("raw", "reask"))
    assert len(model.calls) == 5  # assess + structured + raw + 2 re-asks


async def test_garbage_all_the_way_in_degraded_mode_is_degraded_never_progress_never_done() -> None:
    settings = PlannerSettings(on_failure="degraded", retries=1, transport_backoff_s=0)
    previous = StatusAssessment(status="continue", goal_progress=0.3)
    p, _ = planner(assess("continue", 0.9), "x", "x", "x", settings=settings)
    result = await p.plan(GOAL, state(2, previous_assessment=previous), CTX, plan_manager=manager())
    assert result.degraded and result.status != "done"
    assert result.goal_progress <= 0.3
    assert p.stats["degraded"] == 1 and result.warnings


async def test_degraded_assessment_is_continue_with_the_previous_progress() -> None:
    settings = PlannerSettings(on_failure="degraded", retries=0, transport_backoff_s=0)
    previous = StatusAssessment(status="continue", goal_progress=0.4)
    p, _ = planner("garbage", "garbage", settings=settings)
    a = await p.assess_status(GOAL, state(3, previous_assessment=previous), CTX)
    assert a.degraded and a.status == "continue" and a.goal_progress == 0.4


async def test_transport_error_is_retried_then_succeeds() -> None:
    p, model = planner(httpx.ConnectError("connection refused"), assess("done", 1.0))
    result = await p.plan(GOAL, state(1), CTX)
    assert result.status == "done"
    assert p.stats["transport_retry"] == 1 and len(model.calls) == 2 and result.llm_calls == 2


async def test_timeout_is_a_transport_error_retried_on_its_own_budget() -> None:
    async def slow(call: ScriptedCall) -> dict[str, Any]:
        await asyncio.sleep(60)  # cancelled by the timeout
        return assess("done")

    settings = PlannerSettings(call_timeout_s=0.5, transport_retries=1, transport_backoff_s=0)
    p, _model = planner(slow, assess("done", 1.0), settings=settings)
    result = await p.plan(GOAL, state(1), CTX)
    assert result.status == "done" and p.stats["transport_retry"] == 1


async def test_transport_failure_after_retries_fails_at_once_with_the_attempt() -> None:
    settings = PlannerSettings(transport_retries=1, transport_backoff_s=0)
    p, model = planner(TimeoutError("slow"), TimeoutError("slow"), settings=settings)
    with pytest.raises(PlanGenerationError) as info:
        await p.plan(GOAL, state(1), CTX)
    assert [a.error_type for a in info.value.attempts] == ["transport"]
    assert len(model.calls) == 2  # no raw call and no re-ask against a dead transport


def test_value_errors_are_never_transport_errors() -> None:
    assert not is_transport_error(ValueError("bad schema"))
    assert not is_transport_error(KeyError("x"))
    assert is_transport_error(httpx.ReadTimeout("slow"))
    assert is_transport_error(TimeoutError())


async def test_a_spent_call_budget_propagates_untouched() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(max_total_llm_calls=1))
    p, _ = planner(assess("continue"), plan(step("s1")), controller=controller)
    with pytest.raises(LLMBudgetExceeded):
        await p.plan(GOAL, state(1), CTX)


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
    assert p.stats["guard_overrides"] == 1


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


async def test_many_planners_sharing_a_controller_never_exceed_the_llm_cap() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=2))

    async def slow_done(call: ScriptedCall) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return assess("done", 1.0)

    planners = [
        LLMPlanner(ScriptedChatModel(responses=[slow_done]), controller=controller, settings=FAST)
        for _ in range(10)
    ]
    results = await asyncio.gather(*(p.plan(GOAL, state(1), CTX) for p in planners))
    assert all(r.status == "done" for r in results)
    assert controller.peak_llm_calls == 2
    assert controller.total_llm_calls == 10
    assert controller.calls_by_phase == {"plan-assess": 10}


async def test_a_model_wrapped_by_the_same_controller_takes_one_slot_per_call() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    model = controller.wrap_model(ScriptedChatModel(responses=[assess("done", 1.0)]))
    p = LLMPlanner(model, controller=controller, settings=FAST)
    result = await p.plan(GOAL, state(1), CTX)  # would deadlock if the call took two slots
    assert result.status == "done" and controller.total_llm_calls == 1


def test_auto_method_picks_per_provider() -> None:
    assert resolve_method(ScriptedChatModel(), "auto") == "function_calling"
    assert resolve_method(ChatOpenAI(model="gpt-4o-mini", api_key="test"), "auto") == "json_schema"  # type: ignore[arg-type]
    local = ChatOpenAI(model="local", api_key="test", base_url="http://127.0.0.1:8080/v1")  # type: ignore[arg-type]
    assert resolve_method(local, "auto") == "function_calling"
    assert resolve_method(local, "json_mode") == "json_mode"


@pytest.mark.parametrize("method", ["function_calling", "json_schema", "json_mode"])
async def test_the_configured_method_is_used_on_every_structured_call(method: str) -> None:
    settings = PlannerSettings(structured_output_method=method)  # type: ignore[arg-type]
    p, model = planner(assess("continue"), plan(step("s1")), settings=settings)
    await p.plan(GOAL, state(1), CTX)
    assert [c.method for c in model.calls] == [method, method]


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
    assert p.stats["budget_trims"] + p.stats["budget_overflow"] == 2
    assert "trimmed to fit the prompt budget" in model.calls[1].last_text


async def test_every_call_is_traced_under_its_phase_with_thread_and_iteration() -> None:
    from langchain_core.tracers.context import collect_runs

    p, _ = planner(assess("continue"), plan(step("s1")))
    with collect_runs() as runs:
        await p.plan(GOAL, state(2), CTX)
    traced = [(r.name, r.tags, (r.extra or {}).get("metadata", {})) for r in runs.traced_runs]
    assert [name for name, _, _ in traced] == ["plan-assess", "plan-generate"]
    for name, tags, metadata in traced:
        assert tags == ["soothe", name]
        assert metadata["soothe_phase"] == name and metadata["thread_id"] == "t1" and metadata["iteration"] == 2


async def test_a_model_without_structured_output_is_planned_through_raw_calls() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    replies = [json.dumps(assess("continue")), "not json at all", json.dumps(plan(step("s1")))]
    model = GenericFakeChatModel(messages=iter(AIMessage(content=r) for r in replies))
    p = LLMPlanner(model, settings=FAST)
    result = await p.plan(GOAL, state(1), CTX)
    assert result.decision is not None and result.llm_calls == 3
    # assess: structured unavailable -> raw; generate: raw garbage -> re-ask in raw mode
    assert p.stats["raw_fallback"] == 2 and p.stats["reask_ok"] == 1


async def test_the_structured_output_binding_is_built_once_per_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    original = ScriptedChatModel.with_structured_output

    def counting(self: ScriptedChatModel, schema: Any, **kw: Any) -> Any:
        built.append(schema.__name__)
        return original(self, schema, **kw)

    monkeypatch.setattr(ScriptedChatModel, "with_structured_output", counting)
    p, _model = planner(*[assess("continue", 0.2), plan(step("s1"))] * 3)
    for _ in range(3):
        result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
        assert result.decision is not None
    assert sorted(built) == ["AssessStatus", "GeneratePlan"]


async def test_create_plan_offers_the_model_no_keep(monkeypatch: pytest.MonkeyPatch) -> None:
    schemas: list[Any] = []
    original = ScriptedChatModel.with_structured_output

    def recording(self: ScriptedChatModel, schema: Any, **kw: Any) -> Any:
        schemas.append(schema)
        return original(self, schema, **kw)

    monkeypatch.setattr(ScriptedChatModel, "with_structured_output", recording)
    p, _model = planner(plan(step("s1")))
    await p.create_plan(GOAL, CTX)
    assert [s.model_json_schema()["properties"]["plan_action"].get("const") for s in schemas] == ["new"]


@pytest.mark.parametrize("method", ["function_calling", "json_schema", "json_mode"])
def test_the_bound_tracing_schema_is_converted_once_and_unchanged(method: str) -> None:
    from langchain_core.utils.function_calling import convert_to_json_schema

    from soothe_planner._calls import Caller
    from soothe_planner.wire import generation_model

    schema = generation_model(8)
    caller = Caller(FAST, ConcurrencyController(ConcurrencyPolicy()), Counter())
    runnable = caller.bound(ScriptedChatModel(responses=[]), schema, method)  # type: ignore[arg-type]
    fmt = runnable.first.steps__["raw"].kwargs["ls_structured_output_format"]  # type: ignore[attr-defined]
    # what LangChain attaches to traces on each call is what it derived from the class itself
    assert fmt["schema"] == convert_to_json_schema(schema)
    assert convert_to_json_schema(fmt["schema"]) == convert_to_json_schema(schema)
    assert fmt["kwargs"]["method"] == method
