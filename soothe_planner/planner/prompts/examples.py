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

The caller's own worked plans (``PlannerSettings.examples``) are written here too, in the syntax of
the plan call (``render_own_examples``); they are never checked for copies: a step worded like the
caller's example of a goal like it is what they are for.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from soothe_planner.dag import REFERENCE_RE, parse_token, text_words
from soothe_planner.models import PlanExample, PlanExampleStep
from soothe_planner.planner.prompts import escape_data, template

__all__ = [
    "EXAMPLE_TEMPLATES",
    "ExampleStep",
    "ExampleSyntax",
    "copied_example",
    "example_steps",
    "own_example_turns",
    "render_own_examples",
]

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


# --------------------------------------------------------------------------- the caller's own examples

OWN_EXAMPLES_HEAD = "Worked plans for goals of this kind (their goals are not yours; write your steps as theirs are written):"
CALL_COMMENT_CHARS = 120
"""The longest comment the calls grammar lets a line end with."""
ExampleSyntax = Literal["json", "compact", "calls"]


def render_own_examples(examples: Sequence[PlanExample], *, syntax: ExampleSyntax, model_step: str) -> str:
    """The caller's worked plans (``PlannerSettings.examples``) in the plan syntax of the call, or "".

    ``json``: the full profile's step objects; ``compact``: the compact profile's, a model step written
    as a call of ``model_step`` with its description as the task; ``calls``: one line per step, a tool
    step's description as its comment, a model step as ``model_step(deps, task=...)``. The text is the
    operator's, shown in the system prompt; our fence tags in it are escaped all the same.
    """
    if not examples:
        return ""
    blocks = [OWN_EXAMPLES_HEAD]
    for goal, plan in own_example_turns(examples, syntax=syntax, model_step=model_step):
        blocks += ["Goal: " + json.dumps(goal, ensure_ascii=False), plan]
    return "\n\n" + "\n".join(blocks)


def own_example_turns(
    examples: Sequence[PlanExample], *, syntax: ExampleSyntax, model_step: str
) -> list[tuple[str, str]]:
    """Each worked plan as (its goal on one line, its plan in the syntax of the call), fence tags escaped."""
    return [(escape_data(" ".join(example.goal.split())), escape_data("\n".join(_render(example, syntax, model_step))))
            for example in examples]


def _render(example: PlanExample, syntax: ExampleSyntax, model_step: str) -> list[str]:
    if syntax == "calls":
        # a line's name is a Python name: ids the id rule allows but Python does not are written s1, s2, ...
        names = {step.id: step.id if step.id.isidentifier() else f"s{i}" for i, step in enumerate(example.steps, 1)}
        return [_call_line(step, model_step, names) for step in example.steps]
    rows = []
    for step in example.steps:
        if syntax == "json":
            row: dict[str, Any] = {"id": step.id, "description": step.description, "tool": step.tool,
                                   "args": step.args, "depends_on": step.depends_on}
        elif step.tool is None:
            row = {"id": step.id, "tool": model_step, "args": {"task": step.description},
                   "depends_on": step.depends_on}
        else:
            row = {"id": step.id, "tool": step.tool, "args": step.args, "depends_on": step.depends_on}
        rows.append(json.dumps(row, ensure_ascii=False))
    head = '{"plan_action": "new", "steps": [' if syntax == "json" else '{"steps": ['
    return [head + ",\n ".join(rows) + "]}"]


def _reference(value: Any, known: Collection[str]) -> str | None:
    """The example step whose whole output ``value`` is (``{{s1.output}}``, read as the executor reads it)."""
    found = REFERENCE_RE.fullmatch(value.strip()) if isinstance(value, str) else None
    if found is None:
        return None
    step, field = parse_token(found.group(1), known)
    return step if field is None and step in known else None


def _literal(value: Any) -> str:
    """A Python literal of ``value`` (what the calls reader evaluates): a string in double quotes, as
    the briefings write them; anything else as Python writes it (True, None, not JSON's true, null)."""
    return json.dumps(value, ensure_ascii=False) if isinstance(value, str) else repr(value)


def _call_line(step: PlanExampleStep, model_step: str, names: dict[str, str]) -> str:
    """``name = tool(deps..., arg=value)  # description``: a whole-value reference is the step's name, and
    a dependency no argument names is written first, as a positional name (as the calls reader reads it)."""
    named = {_reference(value, names) for value in step.args.values()}
    parts = [names[d] for d in step.depends_on if d not in named]
    if step.tool is None:
        parts.append(f"task={json.dumps(step.description, ensure_ascii=False)}")
        return f"{names[step.id]} = {model_step}({', '.join(parts)})"
    parts += [f"{name}={names[ref] if (ref := _reference(value, names)) else _literal(value)}"
              for name, value in step.args.items()]
    comment = " ".join(step.description.split())
    if len(comment) > CALL_COMMENT_CHARS:
        comment = comment[:CALL_COMMENT_CHARS].rsplit(" ", 1)[0]
    return f"{names[step.id]} = {step.tool}({', '.join(parts)})  # {comment}"
