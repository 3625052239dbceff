"""A call labelled with a step of the prompt's own example plan is labelled by its call."""

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
# the full briefing's example: its first step, a call, and its last, a model step
YEN_RATE = "get today's euro to yen rate"
YEN_ANSWER = "say which is worth more in yen, and by how much"


def _plan(label: str, answer: str) -> dict[str, Any]:
    return {"plan_action": "new", "execution_mode": "dependency", "next_action": "", "steps": [
        {"id": "s1", "description": label, "tool": "bash", "args": {"command": "grep -rl Linux ~ --include=*.txt"},
         "depends_on": []},
        {"id": "s2", "description": answer, "tool": None, "args": {}, "depends_on": ["s1"]}]}


def test_every_template_with_an_example_plan_gives_its_steps_with_their_goal() -> None:
    steps = example_steps()
    for name in EXAMPLE_TEMPLATES:
        mine = [s for s in steps if s.template == name]
        assert mine, f"no example step read from {name}.txt"
        for s in mine:
            assert s.goal and s.text in template(name).template  # each step's words and goal are the template's own
    assert {YEN_ANSWER, YEN_RATE} <= {s.text for s in steps}


@pytest.mark.parametrize(
    ("text", "copied"),
    [
        (YEN_RATE, True),
        ("Get today's euro to yen rate.", True),  # case and punctuation aside
        ("say which is worth more in yen", True),  # the example's step cut short
        ("say which train reaches Central first, 101 or 205?", True),  # the example's step and more
        ("give the title only", False),  # four words: a common phrase, not a copy
        ("get today's rate of the dollar", False),  # the example's shape, words of its own
    ],
)
def test_a_copy_is_the_example_step_s_words_from_the_start(text: str, copied: bool) -> None:
    assert (copied_example(text) is not None) is copied


async def test_a_tool_step_labelled_with_an_example_step_is_labelled_by_its_call_at_no_call() -> None:
    model = ScriptedChatModel(responses=[_plan(YEN_RATE.capitalize(), "say how often Linux occurs")])
    planner = LLMPlanner(model, settings=SMALL)
    plan = await planner.create_plan(FILES_GOAL, PlanContext(available_capabilities=[SHELL]))
    first = plan.steps[0]
    assert (first.tool, first.args) == ("bash", {"command": "grep -rl Linux ~ --include=*.txt"})
    assert "yen" not in first.description and "bash" in first.description
    assert len(model.calls) == 1


async def test_a_model_step_with_an_example_step_s_task_is_left_as_it_is() -> None:
    # measured: refused, the 1.5B wrote the copy again, reworded, at the re-ask (RESULTS §5)
    model = ScriptedChatModel(responses=[_plan("find the text files that mention Linux", YEN_ANSWER)])
    planner = LLMPlanner(model, settings=SMALL)
    plan = await planner.create_plan(FILES_GOAL, PlanContext(available_capabilities=[SHELL]))
    assert plan.steps[-1].description == YEN_ANSWER and len(model.calls) == 1
