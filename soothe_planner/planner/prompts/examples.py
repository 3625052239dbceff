"""The steps the planner's own example plans show, and whether a step's words are one of them.

Every plan prompt shows an example plan for a goal of its own (``generate_system.txt``,
``generate_examples_*.txt``), so the model sees the shape of a plan. A small model sometimes
copies an example's step into the plan for another goal: the 1.5B labelled a call of
``get_event_for_today_in_history`` "get today's euro to yen rate" (the full briefing's first
step), and ended plans with "say which train reaches Central first". Such words are ours, written
for another goal, whatever the goal's language.

The examples are read from the templates themselves (their goals and their steps' descriptions,
tasks and comments), so an edited example is the example checked. A step copies an example step
when its words (``dag.text_words``: letters and digits of any script, without case) are that
step's words, or begin with them, or they begin with its words, at least five words either way (a
shorter run, such as "give the title only", is a common phrase).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from soothe_planner.dag import text_words
from soothe_planner.planner.prompts import template

__all__ = ["EXAMPLE_TEMPLATES", "ExampleStep", "copied_example", "example_steps"]

EXAMPLE_TEMPLATES = (
    "generate_system",
    "generate_examples_compact",
    "generate_examples_compact_any",
    "generate_examples_calls",
    "generate_examples_calls_any",
)
"""The templates that show an example plan."""

_GOAL = re.compile(r'\b[Gg]oal:? "([^"]+)"')
_STEP = re.compile(r'"(?:description|task)": "([^"]+)"|\btask="([^"]+)"|#\s*(.+)$', re.M)
MIN_WORDS = 5
"""The fewest words a copy shares with an example step: shorter runs of words are common phrases."""


@dataclass(frozen=True)
class ExampleStep:
    """One step of an example plan: its words, and the goal of the example it belongs to."""

    text: str
    goal: str
    template: str
    words: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "words", text_words(self.text))


@cache
def example_steps() -> tuple[ExampleStep, ...]:
    """Every example step the plan templates show, each with its example's goal."""
    found: list[ExampleStep] = []
    for name in EXAMPLE_TEMPLATES:
        text = template(name).template
        goals = [(m.start(), m.group(1)) for m in _GOAL.finditer(text)]
        for m in _STEP.finditer(text):
            goal = next((g for at, g in reversed(goals) if at < m.start()), "")
            step = next(g for g in m.groups() if g)
            found.append(ExampleStep(step.strip(), goal, name))
    return tuple(found)


def _copies(text: tuple[str, ...], example: tuple[str, ...]) -> bool:
    shorter, longer = sorted((text, example), key=len)
    return len(shorter) >= MIN_WORDS and longer[: len(shorter)] == shorter


def copied_example(text: str) -> ExampleStep | None:
    """The example step ``text`` copies, or None."""
    said = text_words(text)
    if len(said) < MIN_WORDS:
        return None
    return next((step for step in example_steps() if _copies(said, step.words)), None)
