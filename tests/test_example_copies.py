"""A step copied from the prompt's own example plan is no step of another goal's plan."""

from __future__ import annotations

from typing import Any

import pytest
from planner_support import FAST

from soothe_planner.models import Capability, PlanContext
from soothe_planner.planner import LLMPlanner
from soothe_planner.planner.prompts import template
from soothe_planner.planner.prompts.examples import EXAMPLE_TEMPLATES, copied_example, example_steps
from soothe_planner.testing import ScriptedChatModel

SMALL = FAST.model_copy(update={"small_model_rules": True, "declare_deliverable": False})
FILES_GOAL = 'Locate in your home directory all the text files that contain the string "Linux" and count its occurrences'
SHELL = Capability(name="bash", description="Run one shell command and return what it prints",
                   args_schema={"type": "object", "required": ["command"], "properties": {"command": {"type": "string"}}})
# the full briefing's example: its last step, a model step, and its first, a call
YEN_ANSWER = "say which is worth more in yen, and by how much"
YEN_RATE = "get today's euro to yen rate"


def _step(sid: str, description: str, tool: str | None, args: dict[str, Any], *deps: str) -> dict[str, Any]:
    return {"id": sid, "description": description, "tool": tool, "args": args, "depends_on": list(deps)}


def _plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"plan_action": "new", "execution_mode": "dependency", "next_action": "", "steps": list(steps)}


def _count_plan(answer: str, label: str = "find the text files that mention Linux") -> dict[str, Any]:
    return _plan(_step("s1", label, "bash", {"command": "grep -rl Linux ~ --include=*.txt"}),
                 _step("s2", answer, None, {}, "s1"))


def test_every_template_with_an_example_plan_gives_its_steps_with_their_goal() -> None:
    steps = example_steps()
    for name in EXAMPLE_TEMPLATES:
        mine = [s for s in steps if s.template == name]
        assert mine, f"no example step read from {name}.txt"
        for s in mine:
            assert s.goal and s.text in template(name).template  # each step's words and goal are the template's own
    assert {YEN_ANSWER, YEN_RATE} <= {s.text for s in steps}


@pytest.mark.parametrize(
    ("text", "goal", "copied"),
    [
        (YEN_ANSWER, FILES_GOAL, True),
        ("Say which is worth more in yen, and by how much.", FILES_GOAL, True),  # case and punctuation aside
        ("say which is worth more in yen", FILES_GOAL, True),  # the example's step cut short
        ("say which train reaches Central first, 101 or 205?", "Wie viele Dateien enthalten das Wort Linux?", True),
        # the goal is the example's own: the same step may well be right
        (YEN_ANSWER, "Are 100 euros or 100 pounds worth more in yen today?", False),
        ("give the title only", FILES_GOAL, False),  # four words: a common phrase, not a copy
        ("say which files mention Linux, and how often", FILES_GOAL, False),  # the example's shape, this goal's words
    ],
)
def test_a_copy_is_the_example_step_s_words_foreign_to_the_goal(text: str, goal: str, copied: bool) -> None:
    assert (copied_example(text, goal) is not None) is copied


async def test_a_model_step_copied_from_the_example_is_refused_and_the_re_ask_is_told_why() -> None:
    own = "say how many times Linux occurs in those files"
    model = ScriptedChatModel(responses=[_count_plan(YEN_ANSWER), _count_plan(own)])
    planner = LLMPlanner(model, settings=SMALL)
    plan = await planner.create_plan(FILES_GOAL, PlanContext(available_capabilities=[SHELL]))
    assert [s.description for s in plan.steps][-1] == own
    assert len(model.calls) == 2 and planner.stats.reask == 1
    reask = model.calls[1].messages[-1].content
    assert "s2's task" in reask and "example plan" in reask and "Are 100 euros or 100 pounds" in reask


async def test_the_example_s_own_goal_keeps_the_example_s_steps() -> None:
    goal = "Are 100 euros or 100 pounds worth more in yen today?"
    rate = Capability(name="get_rate", description="Today's exchange rate between two currencies")
    model = ScriptedChatModel(responses=[_plan(_step("s1", "get the euro and pound rates in yen", "get_rate", {}),
                                               _step("s2", YEN_ANSWER, None, {}, "s1"))])
    planner = LLMPlanner(model, settings=SMALL)
    plan = await planner.create_plan(goal, PlanContext(available_capabilities=[rate]))
    assert plan.steps[-1].description == YEN_ANSWER and len(model.calls) == 1


async def test_without_the_small_model_rules_a_copied_model_step_is_not_refused() -> None:
    model = ScriptedChatModel(responses=[_count_plan(YEN_ANSWER)])
    planner = LLMPlanner(model, settings=FAST.model_copy(update={"small_model_rules": False}))
    plan = await planner.create_plan(FILES_GOAL, PlanContext(available_capabilities=[SHELL]))
    assert plan.steps[-1].description == YEN_ANSWER and len(model.calls) == 1


async def test_a_tool_step_labelled_with_an_example_step_is_labelled_by_its_call() -> None:
    model = ScriptedChatModel(responses=[_count_plan("say how often Linux occurs", label=YEN_RATE.capitalize())])
    planner = LLMPlanner(model, settings=SMALL)
    plan = await planner.create_plan(FILES_GOAL, PlanContext(available_capabilities=[SHELL]))
    first = plan.steps[0]
    assert (first.tool, first.args) == ("bash", {"command": "grep -rl Linux ~ --include=*.txt"})
    assert "yen" not in first.description and "bash" in first.description
    assert len(model.calls) == 1  # a label costs no re-ask
