"""Typed tool steps at ingest: args against the tool's schema, references, descriptions, the manager's part."""

from __future__ import annotations

from typing import Any

import pytest

from soothe_planner.dag import (
    PlanManager,
    ToolDescriptions,
    adds_to_tool,
    check_args,
    signature,
    validate_steps,
)
from soothe_planner.errors import PlanValidationError
from soothe_planner.models import AgentDecision, Capability, StepAction, StepResult

READ_FILE = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "start_line": {"default": 1, "type": "integer"}},
    "required": ["path"],
}
LIST_DIR = {
    "type": "object",
    "properties": {"path": {"default": ".", "type": "string"}, "recursive": {"default": False, "type": "boolean"}},
}
WRITE_FILE = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
    "required": ["path", "content"],
}
CAPS = {
    "read_file": Capability(name="read_file", description="Read a text file from the workspace.", read_only=True,
                            args_schema=READ_FILE),
    "list_dir": Capability(
        name="list_dir", read_only=True, args_schema=LIST_DIR,
        description="List the files and folders in a workspace folder (default: the workspace root); "
                    "recursive=true lists every file below it.",
    ),
    "write_file": Capability(name="write_file", description="Write a text file in the workspace.", args_schema=WRITE_FILE),
    "researcher": Capability(name="researcher", kind="subagent", description="Finds things out."),
}


def typed(sid: str, tool: str | None, args: dict[str, Any], *deps: str, description: str | None = None) -> StepAction:
    return StepAction(id=sid, description=description or f"do {sid}", tool=tool, args=args, depends_on=list(deps))


def errors(*steps: StepAction, **kw: Any) -> list[str]:
    return validate_steps(list(steps), capabilities=CAPS, allowed_capabilities=set(CAPS), **kw)


# --------------------------------------------------------------------------- args against the schema


def test_args_are_checked_against_the_tool_schema_naming_the_step_the_value_and_the_rule() -> None:
    found = errors(
        typed("s1", "read_file", {"start_line": 3}),
        typed("s2", "list_dir", {"recursive": "maybe", "file": "x"}),
    )
    assert found == [
        "step 's1' (tool 'read_file'): required argument 'path' is missing "
        "(read_file takes: path, start_line?: int; fix the args)",
        "step 's2' (tool 'list_dir'): argument 'recursive' = 'maybe' is not a boolean "
        "(list_dir takes: path?, recursive?: bool; fix the args)",
        "step 's2' (tool 'list_dir'): argument 'file' is not one the tool takes "
        "(list_dir takes: path?, recursive?: bool; fix the args)",
    ]


@pytest.mark.parametrize(
    "args",
    [
        {"path": "a.txt", "start_line": "3"},  # a number written as text: the tool reads it
        {"path": "a.txt", "start_line": 3.0},
        {"path": "a.txt", "start_line": "{{s0.output}}"},  # only known when s0 has run
    ],
)
def test_what_the_tool_would_coerce_passes(args: dict[str, Any]) -> None:
    s0 = typed("s0", "list_dir", {})
    assert errors(s0, typed("s1", "read_file", args, "s0")) == []


@pytest.mark.parametrize(("value", "wanted"), [(42, "a string"), ("ten", "an integer"), (True, "an integer")])
def test_what_the_tool_would_refuse_is_refused(value: Any, wanted: str) -> None:
    args = {"path": value} if wanted == "a string" else {"path": "a.txt", "start_line": value}
    (message,) = errors(typed("s1", "read_file", args))
    assert f"= {value!r} is not {wanted}" in message


def test_check_args_reads_optional_values_enums_and_lists() -> None:
    schema = {
        "properties": {
            "mode": {"enum": ["fast", "full"]},
            "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
    }
    assert check_args({"mode": "fast", "limit": None, "tags": ["a"]}, schema) == []
    assert check_args({"mode": "slow", "limit": "x", "tags": [1]}, schema) == [
        "argument 'mode' = 'slow' is not one of 'fast', 'full'",
        "argument 'limit' = 'x' is not an integer or null",
        "argument 'tags' = [1] is not a list",
    ]
    assert signature(schema) == "mode?: fast|full, limit?: int, tags?: list"
    assert signature(None) == "..." and signature({"type": "object", "properties": {}}) == ""


def test_a_schema_allowing_other_arguments_takes_them() -> None:
    assert check_args({"anything": 1}, {"type": "object"}) == []
    assert check_args({"x": 1}, {"properties": {"y": {}}, "additionalProperties": True}) == []


# --------------------------------------------------------------------------- the shape of a typed step


def test_args_without_a_tool_a_tool_with_a_subagent_and_a_subagent_named_as_tool_are_refused() -> None:
    both = StepAction(id="s2", description="d", tool="read_file", args={"path": "a"}, subagent="researcher")
    found = errors(typed("s1", None, {"x": 1}), both, typed("s3", "researcher", {}))
    assert found == [
        "step 's1' has args but no tool (args are a tool's arguments: name the tool, "
        "or drop the args to make it a model step)",
        "step 's2' names tool 'read_file' and subagent 'researcher' "
        "(a step is one tool call or one delegation: split it into two steps)",
        "step 's3' names subagent 'researcher' as its tool (name it as the step's subagent instead)",
    ]


def test_a_typed_step_naming_a_tool_outside_the_allow_list_is_refused() -> None:
    found = validate_steps([typed("s1", "rm", {"path": "/"})], allowed_capabilities={"read_file"})
    assert found == ["step 's1' uses tool 'rm' which is not allowed (allowed: read_file)"]


# --------------------------------------------------------------------------- references


def test_a_reference_to_a_step_in_neither_the_batch_nor_the_dag_is_an_error() -> None:
    found = errors(typed("s1", "list_dir", {}), typed("s2", "write_file", {"path": "r.md", "content": "{{sN.output}}"}))
    assert found == [
        "step 's2' argument 'content' refers to {{sN.output}}, but there is no step 'sN' "
        "in this decision or the plan (steps: s1, s2; a {{...}} reference stands only for a step's output: "
        "text the goal gives goes into the argument as it is)"
    ]


def test_a_reference_must_name_a_step_it_waits_for_directly_or_through_its_dependencies() -> None:
    s1 = typed("s1", "list_dir", {})
    s2 = typed("s2", None, {}, "s1")
    direct_gap = typed("s3", "write_file", {"path": "r.md", "content": "{{s1.output}}"})
    assert errors(s1, s2, direct_gap) == [
        "step 's3' argument 'content' uses {{s1.output}}, but step 's3' does not depend on 's1' "
        "(add 's1' to its depends_on)"
    ]
    through = typed("s3", "write_file", {"path": "r.md", "content": "{{s1.output}}"}, "s2")
    assert errors(s1, s2, through) == []


def test_a_step_referring_to_its_own_output_is_refused() -> None:
    (message,) = errors(typed("s1", "write_file", {"path": "r.md", "content": "{{s1.output}}"}))
    assert "refers to its own output {{s1.output}}" in message


def test_a_reference_to_a_completed_node_of_the_dag_stands() -> None:
    pm = PlanManager("g", capabilities=list(CAPS.values()))
    pm.ingest(AgentDecision(steps=[typed("s1", "read_file", {"path": "a.txt"})]))
    pm.record_step_outcomes([StepResult(step_id="s1", success=True, output="hello")])
    later = typed("s2", "write_file", {"path": "b.txt", "content": "{{s1.output}}"}, "s1")
    assert pm.validate(AgentDecision(steps=[later])) == []


# --------------------------------------------------------------------------- descriptions


@pytest.mark.parametrize(
    "description",
    [
        "List the files and folders in a workspace folder (default: the workspace root); "
        "recursive=true lists every file below it.",
        "list the files and folders in a workspace folder (default: the workspace root)",  # a cut-off copy
        "Lists the files and folders in a workspace folder (default: workspace root); recursive=true lists every file below it",
    ],
)
def test_a_step_whose_description_is_a_tools_own_is_refused(description: str) -> None:
    (message,) = errors(typed("s1", "list_dir", {"recursive": True}, description=description))
    assert message == (
        "step 's1' describes the tool, not the work: say what this step does for the goal "
        "(its description is tool 'list_dir''s own)"
    )


def test_a_copy_that_adds_a_word_of_its_own_labels_a_call_of_that_tool_but_no_model_step() -> None:
    told = CAPS["list_dir"].description.rstrip(".") + ", unter docs"  # near the tool's own, with words of its own
    assert errors(typed("s1", "list_dir", {"path": "docs"}, description=told)) == []
    (message,) = errors(typed("s1", "read_file", {"path": "docs"}, description=told))
    assert "(its description is tool 'list_dir''s own)" in message
    (message,) = errors(StepAction(id="s1", description=told))
    assert "(its description is tool 'list_dir''s own)" in message


def test_a_copy_cut_off_inside_its_last_word_adds_no_word() -> None:
    tools = ToolDescriptions(CAPS)
    own = CAPS["list_dir"].description
    cut = own[: own.index("every") + 2]  # "... recursive=true lists ev": a length bound cut it
    assert not adds_to_tool(cut, "list_dir", tools)
    assert adds_to_tool(cut + " docs", "list_dir", tools)  # a whole word of its own after it


def test_a_call_with_no_arguments_may_carry_its_own_tools_description_but_no_other_tools() -> None:
    own = CAPS["list_dir"].description
    assert errors(typed("s1", "list_dir", {}, description=own)) == []
    (message,) = errors(typed("s1", "list_dir", {}, description=CAPS["read_file"].description))
    assert "(its description is tool 'read_file''s own)" in message


@pytest.mark.parametrize(
    "description",
    ["list every file of the project", "read config.toml", "Read a text file from the workspace: config.toml, for its port"],
)
def test_a_description_of_the_work_stands(description: str) -> None:
    assert errors(typed("s1", "read_file", {"path": "config.toml"}, description=description)) == []


# --------------------------------------------------------------------------- the manager


def test_a_manager_given_capabilities_allows_their_names_and_keeps_them_through_json() -> None:
    pm = PlanManager("g", capabilities=list(CAPS.values()))
    assert pm.allowed_capabilities == frozenset(CAPS)
    with pytest.raises(PlanValidationError, match="required argument 'path' is missing"):
        pm.ingest(AgentDecision(steps=[typed("s1", "read_file", {})]))
    back = PlanManager.from_json(pm.to_json())
    assert back.capabilities == pm.capabilities and back.to_dict() == pm.to_dict()


def test_a_manager_stored_before_typed_steps_loads_without_capabilities() -> None:
    data = PlanManager("g", allowed_capabilities=["read_file"]).to_dict()
    del data["capabilities"]
    assert PlanManager.from_dict(data).capabilities == {}


def test_validate_checks_against_capabilities_given_to_it_over_the_managers_own() -> None:
    pm = PlanManager("g", allowed_capabilities=set(CAPS))  # names only: no schema to check against
    step = typed("s1", "read_file", {"file": "a.txt"})
    assert pm.validate(AgentDecision(steps=[step])) == []
    found = pm.validate(AgentDecision(steps=[step]), capabilities=list(CAPS.values()))
    assert any("argument 'file' is not one the tool takes" in m for m in found)


def test_a_renamed_id_is_followed_by_the_references_in_args() -> None:
    pm = PlanManager("g", capabilities=list(CAPS.values()))
    pm.ingest(AgentDecision(steps=[typed("s1", "read_file", {"path": "a.txt"})]))
    pm.record_step_outcomes([StepResult(step_id="s1", success=True, output="old")])
    again = typed("s1", "read_file", {"path": "b.txt"})
    use = typed("s2", "write_file", {"path": "c.txt", "content": "new: {{ s1.output }} / {{s1.result.n}}"}, "s1")
    report = pm.ingest(AgentDecision(steps=[again, use]), 1)
    assert report.renamed == {"s1": "s1.2"}
    assert pm.node("s2").depends_on == ["s1.2"]
    assert pm.node("s2").args["content"] == "new: {{s1.2.output}} / {{s1.2.output.n}}"


def test_the_planning_context_shows_a_typed_steps_call_so_a_replan_sees_the_args() -> None:
    pm = PlanManager("g", capabilities=list(CAPS.values()))
    pm.ingest(AgentDecision(steps=[typed("s1", "read_file", {"path": "conf/server.toml"}, description="read the config")]))
    pm.record_step_outcomes([StepResult(step_id="s1", success=False, error="not a file", error_type="tool_error")])
    assert pm.dag_prompt().splitlines()[0] == 's1 [failed] read the config via read_file {"path": "conf/server.toml"}'
