"""The two-shot prompt's worked examples as the planner's own examples (``PlannerSettings.examples``).

WorFBench's two-shot prompt shows the model two worked plans of the item's task type before the
task; a planner row given none of them is given less than the row it is compared with. With
``--examples two-shot`` every planner run gets the same two examples, read from the same file the
two-shot prompt is built from (``bench/data/worfbench_two_shot.json``; seal_tools gets toolbench's,
as the two-shot call does): each example's task as the goal (its preamble and its tool or action
list cut: the planner is shown its tools as capabilities), each node as a step with the node's text
as its description, each edge between nodes as a dependency. The nodes name no tool, so every step
is written as a model step: the examples carry the steps' decomposition and wording, not calls.
"""

from __future__ import annotations

import re
from contextvars import ContextVar
from functools import cache
from typing import Any

from bench.worfbench_score import END, START, parse_workflow
from bench.worfbench_variants import EXAMPLES_OF, two_shot_examples

__all__ = ["EXAMPLES_FROM", "EXAMPLE_SOURCES", "examples_as", "plan_examples", "planner_examples"]

EXAMPLE_SOURCES = ("none", "two-shot", "two-shot-turns")
EXAMPLES_FROM: ContextVar[str] = ContextVar("worfbench_examples_from", default="none")
"""Where the planner runs' examples come from (``--examples``): none, or the two-shot prompt's (``two-shot-turns``:
shown as turns before the request, ``examples_as: turns``, as the two-shot prompt shows them)."""

_PREAMBLE = re.compile(r"^Here are two examples\..*?\n", re.S)
_TASK = re.compile(r"(?:Task:|My problem is:)\s*(.*)", re.S)
_LIST = re.compile(r"\s*The (?:api|action) list you can (?:use|take):.*", re.S)


def _goal(user_turn: str) -> str:
    text = _PREAMBLE.sub("", user_turn, count=1)
    found = _TASK.search(text)
    return _LIST.sub("", found.group(1) if found else text).strip()


@cache
def plan_examples(source: str) -> tuple[Any, ...]:
    """The two-shot examples of ``source``'s task type as ``PlanExample``s."""
    from soothe_planner.models import PlanExample

    turns = two_shot_examples()[EXAMPLES_OF.get(source, source)]
    out = []
    for user, assistant in zip(turns[0::2], turns[1::2], strict=True):
        wf = parse_workflow(assistant["content"])
        if wf.errors:
            raise ValueError(f"the two-shot example of {source} does not read as a plan: {wf.errors}")
        ids = {node: f"s{i}" for i, node in enumerate(wf.nodes, 1)}
        steps = [{"id": ids[node], "description": text,
                  "depends_on": [ids[a] for a, b in wf.edges if b == node and a not in (START, END)]}
                 for node, text in wf.nodes.items()]
        out.append(PlanExample(goal=_goal(user["content"]), steps=steps))
    return tuple(out)


def planner_examples(item: dict[str, Any]) -> list[Any]:
    """The examples a planner run of ``item`` gets under ``EXAMPLES_FROM``."""
    return list(plan_examples(str(item["source"]))) if EXAMPLES_FROM.get() != "none" else []


def examples_as() -> str:
    """Where the planner runs show their examples under ``EXAMPLES_FROM``."""
    return "turns" if EXAMPLES_FROM.get() == "two-shot-turns" else "briefing"
