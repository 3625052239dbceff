"""A plan refused every time for its calls' arguments keeps its steps, those arguments left to run time."""

from __future__ import annotations

import json
from typing import Any

import pytest
from planner_support import FAST, assess, state

from soothe_planner.dag import PlanManager, validate_steps
from soothe_planner.errors import GenerationAttempt, PlanGenerationError
from soothe_planner.execution.step_kinds import step_kind
from soothe_planner.models import Capability, PlanContext
from soothe_planner.planner import LLMPlanner
from soothe_planner.planner.generation import Generated, readers
from soothe_planner.planner.small_model.unbound import unbound_calls
from soothe_planner.testing import ScriptedChatModel

GOAL = "Find which log lines mention the failing disk and say what they report"
SMALL = FAST.model_copy(update={"small_model_rules": True, "declare_deliverable": False})

SEARCH = Capability(name="search_logs", description="Search the system logs for lines matching a pattern",
                    read_only=True, args_schema={"type": "object", "required": ["pattern", "since"], "properties": {
                        "pattern": {"type": "string"}, "since": {"type": "integer"}}})
WRITE = Capability(name="save_note", description="Write a note file in the workspace", writes_path_arg="path",
                   args_schema={"type": "object", "required": ["path", "text"], "properties": {
                       "path": {"type": "string"}, "text": {"type": "string"}}})
SHELL = Capability(name="bash", description="Run one shell command and return what it prints",
                   args_schema={"type": "object", "required": ["command"], "properties": {"command": {"type": "string"}}})


def _step(sid: str, description: str, tool: str | None, args: dict[str, Any], *deps: str) -> dict[str, Any]:
    return {"id": sid, "description": description, "tool": tool, "args": args, "depends_on": list(deps)}


def _plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"plan_action": "new", "execution_mode": "dependency", "next_action": "", "steps": list(steps)}


def _unbindable(tool: str = "search_logs", args: dict[str, Any] | None = None, first: str = "find the disk errors"
                ) -> dict[str, Any]:
    """A sound plan whose first call refers to data the goal gives as if it were a step's output."""
    return _plan(
        _step("s1", first, tool, args if args is not None else {"pattern": "{{evidence.disk}}", "since": 7}),
        _step("s2", "say what the lines found report about the disk", None, {}, "s1"),
    )


async def test_a_plan_refused_for_its_arguments_at_every_ask_keeps_its_steps_with_the_call_left_to_run_time() -> None:
    model = ScriptedChatModel(responses=[_unbindable(first="find the disk errors in the logs"),
                                         _unbindable(first="look for disk errors"), _unbindable()])
    planner = LLMPlanner(model, settings=SMALL)
    plan = await planner.create_plan(GOAL, PlanContext(available_capabilities=[SEARCH]))
    assert len(model.calls) == 3  # the first answer and both re-asks, each refused
    s1, s2 = plan.steps
    # the first answer (the greedy one) is the plan kept; its call is the step's tool, arguments to come
    assert (s1.description, s1.tool, s1.args, s1.tools) == ("find the disk errors in the logs", None, {}, ["search_logs"])
    assert (s2.tool, s2.depends_on) == (None, ["s1"])
    assert planner.stats.unbound_calls == 1
    # the executor runs such a step as one model call that fills the arguments, the tool bound and forced
    assert step_kind(s1) == "tool_args"


async def test_the_kept_plan_says_which_calls_were_left_to_run_time_and_ingests() -> None:
    model = ScriptedChatModel(responses=[assess("continue", 0.1), *[_unbindable()] * 3])
    planner = LLMPlanner(model, settings=SMALL)
    pm = PlanManager(GOAL)
    result = await planner.plan(GOAL, state(1), PlanContext(available_capabilities=[SEARCH]), plan_manager=pm)
    assert any("left to a model call when each runs" in w and "'s1'" in w for w in result.warnings)
    pm.ingest(result, 0)
    assert pm.node("s1").tools == ["search_logs"] and pm.node("s2").depends_on == ["s1"]


@pytest.mark.parametrize(
    ("settings", "caps", "plan", "why"),
    [
        (FAST.model_copy(update={"small_model_rules": False}), [SEARCH], _unbindable(), "not a small model"),
        (SMALL, [SHELL], _unbindable("bash", {"command": "grep disk {{evidence.log}}"}),
         "a one-string tool runs with its task text as that string"),
        (SMALL, [WRITE], _unbindable("save_note", {"path": "NOTES.md", "text": "{{evidence.disk}}"}),
         "a write's path is judged in its call, so a write is never left to run time"),
        (SMALL, [SEARCH], _plan(_step("s1", "find the disk errors", "search_logs", {"pattern": "disk", "since": 7}, "s2"),
                                _step("s2", "say what they report", None, {}, "s1")), "a cycle is no argument"),
    ],
)
async def test_no_plan_is_kept_where_leaving_arguments_to_run_time_would_not_mend_it(
    settings: Any, caps: list[Capability], plan: dict[str, Any], why: str
) -> None:
    planner = LLMPlanner(ScriptedChatModel(responses=[plan] * 3), settings=settings)
    with pytest.raises(PlanGenerationError):
        await planner.create_plan(GOAL, PlanContext(available_capabilities=caps))
    assert planner.stats.unbound_calls == 0, why


def test_only_a_step_whose_call_breaks_a_rule_of_calls_is_unbound() -> None:
    _, parse = readers(PlanContext(available_capabilities=[SEARCH]), 5, None)
    good = _step("s1", "find the disk errors", "search_logs", {"pattern": "disk", "since": 7})
    bad = _step("s2", "find the controller errors", "search_logs", {"pattern": "controller", "since": "last week"})
    refused = GenerationAttempt("plan-generate", "structured", "refused", json.dumps(_plan(good, bad)), "validation")
    exc = PlanGenerationError("plan-generate", [refused])
    kept = unbound_calls(exc, parse, {"search_logs": SEARCH}, _call_rules)
    assert kept is not None and kept.decision is not None
    s1, s2 = kept.decision.steps
    assert (s1.tool, s1.args) == ("search_logs", {"pattern": "disk", "since": 7})  # its call breaks no rule
    assert (s2.tool, s2.args, s2.tools) == (None, {}, ["search_logs"])
    # a rule a sound call breaks (here, as a repeat of work done) is not mended by unbinding that call,
    # and a plan still refused after the unbindable calls are unbound is not kept
    def repeats_s1(gen: Generated) -> list[str]:
        assert gen.decision is not None
        first = gen.decision.steps[0]
        return [*_call_rules(gen), *(["step 's1' repeats finished work"] if first.args.get("pattern") == "disk" else [])]

    assert unbound_calls(exc, parse, {"search_logs": SEARCH}, repeats_s1) is None
    # the model was not heard: the run says so, no plan is kept
    lost = GenerationAttempt("plan-generate", "reask", "connection reset", None, "transport")
    assert unbound_calls(PlanGenerationError("plan-generate", [refused, lost]), parse, {"search_logs": SEARCH},
                         _call_rules) is None


def _call_rules(gen: Generated) -> list[str]:
    assert gen.decision is not None
    return validate_steps(gen.decision.steps, capabilities={"search_logs": SEARCH}, allowed_capabilities={"search_logs"})
