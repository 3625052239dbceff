"""The runtime data model: coherence validators, clamping, failure-policy parsing."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from soothe_planner.models import (
    AgentDecision,
    FailurePolicy,
    GoalDirective,
    LoopState,
    Plan,
    PlanContext,
    PlannerSettings,
    PlanResult,
    PlanStep,
    StatusAssessment,
    StepAction,
    StepResult,
)


def _decision() -> AgentDecision:
    return AgentDecision(steps=[StepAction(id="s1", description="read the file")])


def test_done_result_cannot_carry_a_decision() -> None:
    with pytest.raises(ValidationError, match="'done' result carries no decision"):
        PlanResult(status="done", plan_action="new", decision=_decision())


def test_new_result_needs_a_decision_with_steps() -> None:
    with pytest.raises(ValidationError, match="needs a decision with at least one step"):
        PlanResult(status="continue", plan_action="new")


def test_keep_result_carries_no_decision() -> None:
    with pytest.raises(ValidationError, match="'keep' carries no decision"):
        PlanResult(status="continue", plan_action="keep", decision=_decision())


def test_degraded_result_can_never_be_done() -> None:
    with pytest.raises(ValidationError, match="degraded"):
        PlanResult(status="done", degraded=True)
    with pytest.raises(ValidationError, match="degraded"):
        StatusAssessment(status="done", degraded=True)


@pytest.mark.parametrize(("given", "expected"), [(-3, 0.0), (1.7, 1.0), (0.25, 0.25)])
def test_progress_and_confidence_are_clamped(given: float, expected: float) -> None:
    result = PlanResult(status="continue", goal_progress=given, confidence=given)
    assert result.goal_progress == expected
    assert result.confidence == expected
    assert StatusAssessment(status="continue", goal_progress=given).goal_progress == expected


def test_execute_decision_needs_steps_but_final_does_not() -> None:
    with pytest.raises(ValidationError, match="at least one step"):
        AgentDecision(type="execute_steps", steps=[])
    assert AgentDecision(type="final").steps == []


def test_contract_shapes_construct_with_keywords() -> None:
    step = StepAction(id="s2", description="write", depends_on=["s1"])
    decision = AgentDecision(type="execute_steps", steps=[step], execution_mode="dependency")
    result = StepResult(step_id="s2", success=False, output="", error="boom")
    assert decision.steps[0].depends_on == ["s1"]
    assert result.attempt == 1 and result.error_type is None


def test_runtime_models_reject_unknown_fields() -> None:
    with pytest.raises(ValidationError, match="extra"):
        StepResult(step_id="s1", success=True, colour="red")  # type: ignore[call-arg]


def test_plan_context_accepts_bare_capability_names_as_tools() -> None:
    ctx = PlanContext(available_capabilities=["read_file", {"name": "researcher", "kind": "subagent"}])
    assert [(c.name, c.kind) for c in ctx.available_capabilities] == [
        ("read_file", "tool"),
        ("researcher", "subagent"),
    ]
    assert ctx.capability_names() == {"read_file", "researcher"}


@pytest.mark.parametrize(
    ("text", "mode", "retries"),
    [("block", "block", 0), ("retry(3)", "retry", 3), (" retry( 1 ) ", "retry", 1)],
)
def test_failure_policy_parses_block_and_retry(text: str, mode: str, retries: int) -> None:
    policy = FailurePolicy.parse(text)
    assert (policy.mode, policy.max_retries) == (mode, retries)


def test_failure_policy_rejects_unknown_text_naming_it() -> None:
    with pytest.raises(ValueError, match="'skip' is not 'block' or 'retry\\(n\\)'"):
        FailurePolicy.parse("skip")


def test_goal_directive_needs_its_target() -> None:
    with pytest.raises(ValidationError, match="needs a description"):
        GoalDirective(action="create")
    with pytest.raises(ValidationError, match="needs a goal_id"):
        GoalDirective(action="fail")


def test_plan_step_round_trips_through_json_with_its_result() -> None:
    step = PlanStep(
        id="s1",
        description="d",
        status="completed",
        result=StepResult(step_id="s1", success=True, output="ok", outcome={"n": 1}),
    )
    plan = Plan(goal="g", steps=[step])
    again = Plan.model_validate_json(plan.model_dump_json())
    assert again == plan
    assert again.step("s1").finished
    with pytest.raises(KeyError, match="no step 's9'"):
        again.step("s9")


def test_loop_state_round_trips_and_validates_iteration() -> None:
    state = LoopState(goal="g", iteration=2, max_iterations=5, current_decision=_decision())
    assert LoopState.model_validate(state.model_dump(mode="json")) == state
    with pytest.raises(ValidationError):
        LoopState(goal="g", iteration=-1)


def test_planner_settings_are_frozen_and_validated() -> None:
    settings = PlannerSettings()
    with pytest.raises(ValidationError):
        settings.max_plan_steps = 3  # type: ignore[misc]
    with pytest.raises(ValidationError, match="max_plan_steps"):
        PlannerSettings(max_plan_steps=0)
