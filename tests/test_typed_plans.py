"""Typed plans end to end on a scripted model: offered tools in, a validated DAG of typed steps out."""

from __future__ import annotations

import json
import re
import tempfile
from typing import Any

from planner_support import FAST, assess, state

from soothe_planner.dag import PlanManager, ToolDescriptions, describes_tool
from soothe_planner.execution import StepExecutor
from soothe_planner.graph import offered_context
from soothe_planner.models import LoopState, PlanContext
from soothe_planner.parsing import parse_decision
from soothe_planner.planner import LLMPlanner, RunSteps
from soothe_planner.planner.prompts import phases, template
from soothe_planner.testing import ScriptedChatModel
from soothe_planner.tools import make_builtin_tools

GOAL = "Find every TODO line in the project and write them into TODO_REPORT.md"


def _context() -> PlanContext:
    tools = make_builtin_tools(tempfile.mkdtemp())
    return offered_context(StepExecutor(tools=list(tools.values())), PlanContext(thread_id="t1"))


def _step(sid: str, description: str, tool: str | None, args: dict[str, Any], *deps: str) -> dict[str, Any]:
    return {"id": sid, "description": description, "tool": tool, "args": args, "depends_on": list(deps)}


def _plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"plan_action": "new", "execution_mode": "dependency", "next_action": "search, then write", "steps": list(steps)}


TYPED = _plan(
    _step("s1", "find the TODO lines", "search_text", {"pattern": "TODO"}),
    _step("s2", "save the lines found into the report", "write_file",
          {"path": "TODO_REPORT.md", "content": "{{s1.output}}"}, "s1"),
    _step("s3", "say how many TODO lines were saved", None, {}, "s1", "s2"),
)


async def test_plan_on_a_scripted_model_produces_a_typed_plan_that_ingests() -> None:
    ctx = _context()
    pm = PlanManager(GOAL, capabilities=ctx.available_capabilities)
    model = ScriptedChatModel(responses=[TYPED])
    planner = LLMPlanner(model, settings=FAST)
    result = await planner.plan(GOAL, LoopState(goal=GOAL, thread_id="t1"), ctx, plan_manager=pm)
    assert result.decision is not None and result.warnings == []
    pm.ingest(result, 0)
    s1, s2, s3 = (pm.node(i) for i in ("s1", "s2", "s3"))
    assert (s1.tool, s1.args, s1.execution_hint) == ("search_text", {"pattern": "TODO"}, "tool")
    assert (s2.tool, s2.args["content"], s2.depends_on) == ("write_file", "{{s1.output}}", ["s1"])
    assert (s3.tool, s3.args, s3.execution_hint) == (None, {}, "auto")  # a model step
    (call,) = model.calls
    assert call.method == "function_calling" and call.schema_name == "GeneratePlan"
    # the model was shown every configured tool with its arguments, the write tool included
    assert "- write_file(path, content): Write a text file" in call.prompt_text
    assert "- search_text(pattern, path?, regex?: bool) [read-only]:" in call.prompt_text


async def test_bad_args_are_re_asked_with_the_rule_and_the_answer_that_follows_ingests() -> None:
    ctx = _context()
    wrong = _plan(_step("s1", "read the server config", "read_file", {"file": "config/server.toml"}))
    right = _plan(_step("s1", "read the server config", "read_file", {"path": "config/server.toml"}))
    model = ScriptedChatModel(responses=[wrong, right])
    planner = LLMPlanner(model, settings=FAST)
    result = await planner.plan(GOAL, LoopState(goal=GOAL), ctx, plan_manager=PlanManager(GOAL))
    assert result.decision is not None and result.decision.steps[0].args == {"path": "config/server.toml"}
    reask = model.calls[1].last_text
    assert "step 's1' (tool 'read_file'): required argument 'path' is missing" in reask
    assert "argument 'file' is not one the tool takes" in reask


async def test_a_tool_step_copying_its_tools_description_is_labelled_by_its_call_without_a_re_ask() -> None:
    ctx = _context()
    list_dir = next(c for c in ctx.available_capabilities if c.name == "list_dir")
    copied = _plan(_step("s1", list_dir.description, "list_dir", {"recursive": True}))
    model = ScriptedChatModel(responses=[assess("continue", 0.1), copied])
    planner = LLMPlanner(model, settings=FAST)
    result = await planner.plan(GOAL, state(1), ctx, plan_manager=PlanManager(GOAL))
    assert result.decision is not None and result.decision.steps[0].description == 'list_dir {"recursive": true}'
    assert len(model.calls) == 2  # the assessment and one plan: the copied label cost no re-ask
    assert any("'s1': its description was tool 'list_dir''s own" in w for w in result.warnings)


async def test_a_near_copy_of_its_tools_description_that_adds_a_word_keeps_its_label() -> None:
    ctx = _context()
    list_dir = next(c for c in ctx.available_capabilities if c.name == "list_dir")
    own = list_dir.description.rstrip(".")
    told = f"{own} unter config"  # near enough to count as a copy, and it says where: a word of its own
    assert describes_tool(told, ToolDescriptions({list_dir.name: list_dir})) == "list_dir"
    copied = _plan(_step("s1", told, "list_dir", {"path": "config"}))
    model = ScriptedChatModel(responses=[assess("continue", 0.1), copied])
    planner = LLMPlanner(model, settings=FAST)
    result = await planner.plan(GOAL, state(1), ctx, plan_manager=PlanManager(GOAL))
    assert result.decision is not None and result.decision.steps[0].description == told
    assert not any("its description was tool" in w for w in result.warnings)


async def test_a_call_with_no_arguments_keeps_its_tools_description_as_its_label() -> None:
    ctx = _context()
    list_dir = next(c for c in ctx.available_capabilities if c.name == "list_dir")
    copied = _plan(_step("s1", list_dir.description, "list_dir", {}))
    model = ScriptedChatModel(responses=[assess("continue", 0.1), copied])
    planner = LLMPlanner(model, settings=FAST)
    result = await planner.plan(GOAL, state(1), ctx, plan_manager=PlanManager(GOAL))
    assert result.decision is not None and result.decision.steps[0].description == list_dir.description
    assert len(model.calls) == 2 and not any("its description was tool" in w for w in result.warnings)


async def test_a_model_step_copying_a_tools_description_is_re_asked() -> None:
    ctx = _context()
    list_dir = next(c for c in ctx.available_capabilities if c.name == "list_dir")
    copied = _plan(_step("s1", list_dir.description, None, {}))
    fixed = _plan(_step("s1", "say which files the project has", None, {}))
    model = ScriptedChatModel(responses=[assess("continue", 0.1), copied, fixed])
    planner = LLMPlanner(model, settings=FAST)
    result = await planner.plan(GOAL, state(1), ctx, plan_manager=PlanManager(GOAL))
    assert result.decision is not None and result.decision.steps[0].description == "say which files the project has"
    assert "step 's1' describes the tool, not the work" in model.calls[2].last_text


async def test_a_reference_written_another_way_is_made_canonical_and_its_dependency_added() -> None:
    ctx = _context()
    loose = _plan(
        _step("s1", "find the TODO lines", "search_text", {"pattern": "TODO"}),
        _step("s2", "save them", "write_file", {"path": "TODO_REPORT.md", "content": "$s1.output"}),
    )
    planner = LLMPlanner(ScriptedChatModel(responses=[loose]), settings=FAST)
    result = await planner.plan(GOAL, LoopState(goal=GOAL), ctx, plan_manager=PlanManager(GOAL))
    assert result.decision is not None
    s2 = result.decision.steps[1]
    assert s2.args["content"] == "{{s1.output}}" and s2.depends_on == ["s1"]
    assert any("read as '{{s1.output}}'" in w for w in result.warnings)


# --------------------------------------------------------------------------- the prompt


def test_the_generate_prompt_puts_the_offered_tools_first_and_the_runs_changing_context_last() -> None:
    fresh = LoopState(goal=GOAL)
    prompt = phases.generate_prompt(GOAL, fresh, _context(), None, RunSteps.of(fresh, None), FAST, max_steps=6)
    human = prompt.human
    assert human.index("- read_file(path, start_line?: int, end_line?: int)") < human.index("<goal>") < human.index("Iteration 1")
    assert human.rstrip().endswith("Write at most 6 steps.")


def test_the_example_plan_is_one_our_own_parser_reads_as_typed_steps_with_a_reference() -> None:
    system = template("generate_system").template
    example = re.search(r'\{"plan_action".*?\]\}\]\}', system, re.DOTALL)
    assert example is not None
    decision = parse_decision(example.group(0)).decision
    assert decision is not None
    s1, s2, s3, s4 = decision.steps
    assert s1.tool and s2.tool and s3.tool and s4.tool is None  # three tool steps, then a model step that answers
    assert s1.depends_on == [] and s2.depends_on == []  # two independent steps: they run in parallel
    assert "{{s1.output}}" in json.dumps(s3.args) and "{{s2.output}}" in json.dumps(s3.args)
    assert s3.depends_on == ["s1", "s2"] and s4.depends_on == ["s3"]


def test_the_prompts_hold_no_placeholder_a_model_could_copy_literally() -> None:
    for name in ("generate_system", "generate_system_compact", "generate_human", "revise_human"):
        text = template(name).template
        assert not re.search(r"\{\{\s*(sN|<|ID|id|step_id)\b", text), name
        assert "sN" not in text, name
