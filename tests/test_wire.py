"""The LLM-facing schemas: trimmed, bounded, truncating text, rejecting runaway lists."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from soothe_planner.wire import (
    WIRE_MAX_STEPS,
    AssessStatus,
    ChooseContinuation,
    GeneratePlan,
    PlanStepSpec,
    RouteIntake,
    generation_model,
    to_continuation,
    to_decision,
    to_status_assessment,
)

RUNTIME_ONLY = {
    "status_of_step",
    "result",
    "concurrency",
    "attempts",
    "iteration",
    "duration_ms",
    "execution_hint",
}


def _all_property_names(schema: dict) -> set[str]:
    names: set[str] = set()
    for node in [schema, *schema.get("$defs", {}).values()]:
        names |= set(node.get("properties", {}))
    return names


def test_schemas_sent_to_the_model_hold_no_runtime_fields() -> None:
    for model in (AssessStatus, GeneratePlan, ChooseContinuation, RouteIntake):
        assert not (_all_property_names(model.model_json_schema()) & RUNTIME_ONLY), model.__name__


def test_every_wire_schema_forbids_extra_keys() -> None:
    for model in (AssessStatus, GeneratePlan, PlanStepSpec, ChooseContinuation, RouteIntake):
        assert model.model_json_schema().get("additionalProperties") is False, model.__name__
        with pytest.raises(ValidationError, match="Extra inputs"):
            model.model_validate({"bogus": 1})


def test_long_text_is_truncated_not_rejected_and_the_bound_is_advertised() -> None:
    step = PlanStepSpec.model_validate({"id": "s1", "description": "x" * 1000})
    assert len(step.description) == 300
    props = PlanStepSpec.model_json_schema()["properties"]
    assert props["description"]["maxLength"] == 300


def test_generation_model_bounds_steps_by_max_plan_steps() -> None:
    model = generation_model(3)
    schema = model.model_json_schema()
    assert schema["properties"]["steps"]["maxItems"] == 3
    four = [{"id": f"s{i}", "description": "d"} for i in range(4)]
    with pytest.raises(ValidationError, match="at most 3"):
        model.model_validate({"plan_action": "new", "steps": four})
    assert generation_model(10_000).model_json_schema()["properties"]["steps"]["maxItems"] == WIRE_MAX_STEPS


def test_without_a_plan_in_flight_the_schema_offers_no_keep() -> None:
    first = generation_model(3, allow_keep=False)
    assert first.model_json_schema()["properties"]["plan_action"]["const"] == "new"
    with pytest.raises(ValidationError):
        first.model_validate({"plan_action": "keep"})
    one = [{"id": "s1", "description": "d"}]
    assert first.model_validate({"steps": one}).plan_action == "new"  # the only answer is the default
    assert set(generation_model(3).model_json_schema()["properties"]["plan_action"]["enum"]) == {"new", "keep"}
    assert generation_model(3, allow_keep=False) is first  # built once


def test_the_schema_offers_only_execution_modes_that_schedule_differently() -> None:
    offered = GeneratePlan.model_json_schema()["properties"]["execution_mode"]["enum"]
    assert sorted(offered) == ["dependency", "sequential"]
    one = [{"id": "s1", "description": "d"}]
    old = GeneratePlan.model_validate({"plan_action": "new", "execution_mode": "parallel", "steps": one})
    assert old.execution_mode == "dependency"  # an old reply's "parallel" still reads
    with pytest.raises(ValidationError):
        GeneratePlan.model_validate({"plan_action": "new", "execution_mode": "eventually", "steps": one})


def test_new_generation_needs_steps() -> None:
    with pytest.raises(ValidationError, match="needs at least one step"):
        GeneratePlan.model_validate({"plan_action": "new"})
    assert GeneratePlan.model_validate({"plan_action": "keep"}).steps == []


def test_step_ids_must_match_the_id_pattern() -> None:
    with pytest.raises(ValidationError, match="pattern"):
        PlanStepSpec.model_validate({"id": "step one!", "description": "d"})


def test_assessment_progress_is_clamped_and_converted() -> None:
    wire = AssessStatus.model_validate({"status": "continue", "goal_progress": 4, "confidence": -1})
    runtime = to_status_assessment(wire)
    assert (runtime.goal_progress, runtime.confidence) == (1.0, 0.0)


def test_contract_generation_dict_converts_to_a_decision_with_hints() -> None:
    raw = {
        "plan_action": "new",
        "execution_mode": "parallel",
        "next_action": "gather then write",
        "steps": [
            {
                "id": "s1",
                "description": "read",
                "depends_on": [],
                "tools": ["read_file"],
                "expected_output": "text",
            },
            {"id": "s2", "description": "research", "depends_on": ["s1"], "subagent": "researcher"},
            {"id": "s3", "description": "think", "depends_on": ["s1", "s2"]},
        ],
    }
    decision = to_decision(GeneratePlan.model_validate(json.loads(json.dumps(raw))))
    assert decision.execution_mode == "dependency"  # "parallel" ran exactly as "dependency"; read as it
    assert decision.reasoning == "gather then write"
    assert [s.execution_hint for s in decision.steps] == ["tool", "subagent", "auto"]
    assert decision.steps[2].depends_on == ["s1", "s2"]


def test_continuation_and_intake_shapes() -> None:
    cont = to_continuation(
        ChooseContinuation.model_validate({"action": "bootstrap", "reasoning": "one lookup"})
    )
    assert cont.action == "bootstrap"
    assert RouteIntake.model_validate({"route": "trivial", "answer": "  4 "}).answer == "4"


def _step_schema(model: type) -> dict:
    schema = model.model_json_schema()  # type: ignore[attr-defined]
    return next(iter(schema["$defs"].values()))


def test_a_plan_schema_for_offered_tools_names_them_and_makes_every_step_decide_tool_args_and_deps() -> None:
    model = generation_model(4, tools=("read_file", "write_file"))
    step = _step_schema(model)
    assert list(step["properties"]) == ["id", "description", "tool", "args", "depends_on"]  # no subagent offered
    assert step["properties"]["tool"]["anyOf"] == [{"enum": ["read_file", "write_file"], "type": "string"},
                                                   {"type": "null"}]
    args = {k: v for k, v in step["properties"]["args"].items() if k != "title"}  # titles are not sent
    assert args == {"type": "object"}  # no nested schema a model could copy into its args
    assert step["required"] == ["id", "description", "tool", "args", "depends_on"]
    with pytest.raises(ValidationError):
        model.model_validate({"plan_action": "new", "steps": [{"id": "s1", "description": "d", "tool": "rm"}]})
    with_sub = _step_schema(generation_model(4, tools=("read_file",), subagents=("researcher",)))
    assert with_sub["properties"]["subagent"]["anyOf"][0]["const"] == "researcher"  # one name: a const
    assert generation_model(4, tools=("read_file", "write_file")) is model  # built once


def test_fields_not_advertised_are_still_accepted_and_a_step_may_leave_out_what_is_advertised_required() -> None:
    model = generation_model(4, tools=("read_file",))
    wire = model.model_validate({"plan_action": "new", "steps": [
        {"id": "s1", "description": "d", "tools": ["read_file"], "expected_output": "text", "subagent": None}]})
    assert wire.steps[0].tools == ["read_file"] and wire.steps[0].tool is None and wire.steps[0].args == {}
    names = _all_property_names(model.model_json_schema())
    assert not names & {"tools", "expected_output", "subagent"}


def test_conversion_carries_a_typed_steps_tool_and_args_and_a_model_step_has_neither() -> None:
    gen = GeneratePlan.model_validate({"plan_action": "new", "steps": [
        {"id": "s1", "description": "find", "tool": "search_text", "args": {"pattern": "TODO"}},
        {"id": "s2", "description": "count them", "tool": None, "args": {}, "depends_on": ["s1"]},
    ]})
    s1, s2 = to_decision(gen).steps
    assert (s1.tool, s1.args, s1.execution_hint) == ("search_text", {"pattern": "TODO"}, "tool")
    assert (s2.tool, s2.args, s2.execution_hint) == (None, {}, "auto")
