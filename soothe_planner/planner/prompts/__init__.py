"""What the planner says to the model, and how it fits a prompt budget.

The words live in the ``*.txt`` templates next to this module (``string.Template``: ``$name``
fields, nothing executable), so they can be read and reviewed as prose. Each phase has a short,
static system prompt — identical on every call, so a provider can cache it — and a human turn that
carries everything that changes: the goal, the iteration, the plan in flight, evidence, memory.
The context never travels in a system message after a user message (some providers reject that).
A caller's worked plans shown as turns (``planner.examples_as: turns``) sit between the two, as
constant as the system prompt; they count against the budget and are never trimmed.

Two rules are enforced here rather than trusted to the templates:

- Data is fenced. Step outputs and errors, working memory, the conversation and the goal enter
  inside ``<evidence>``-style tags that the system prompt declares to be data, on every path
  (``plan()`` with or without a ``PlanManager``); any of those tags inside the data is escaped,
  so a step output cannot close the fence and speak as the instructions. What stays outside the
  tags is the package's own text (instructions, iteration numbers, step ids, which keep the id
  rule) and the model's own assessment summary, escaped.
- The budget gives way on state, never on rules. When a prompt would exceed the budget (about
  four characters per token), the largest trimmable section — evidence, working memory or the
  plan rendering — is cut to the headroom left, keeping at least a floor of it (a truncated
  evidence block is worth more than the gap dropping it would leave); then the next largest.
  Instructions are never cut mid-sentence: if the prompt still overflows, a compact briefing
  (``<name>_compact.txt``: the same fields and the data rule, fewer words) replaces the system
  prompt whole. If even that overflows, the prompt is sent and the overflow reported to the caller,
  which logs and counts it — a planner that refused to call would stall the loop.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from soothe_planner.dag import signature
from soothe_planner.models import Capability, StatusAssessment, StepResult, clean_text

__all__ = [
    "CAPABILITY_DESCRIPTION_CHARS",
    "CHARS_PER_TOKEN",
    "DATA_TAGS",
    "Prompt",
    "build",
    "escape_data",
    "render_assessment",
    "render_capabilities",
    "render_results",
    "template",
    "template_names",
    "trim_text",
]

CHARS_PER_TOKEN = 4
"""A rough, provider-neutral estimate; the budget is a guard rail, not a tokenizer."""

DATA_TAGS = ("goal", "plan", "failed", "evidence", "working_memory", "conversation", "previous_answer")
_TAG_RE = re.compile(r"<(\s*/?\s*)(" + "|".join(DATA_TAGS) + r")\b", re.IGNORECASE)
TRIM_FLOOR = 160
"""Characters a trimmed section keeps at least: trimmed, never dropped whole."""

_MARKER_ROOM = 60  # a trim marker's length, so trimming a section at its floor is never attempted
Keep = Literal["head", "tail"]


@cache
def template(name: str) -> string.Template:
    """The template ``<name>.txt`` shipped with the package."""
    text = resources.files(__package__).joinpath(f"{name}.txt").read_text(encoding="utf-8")
    return string.Template(text.rstrip("\n"))


@cache
def template_names() -> tuple[str, ...]:
    return tuple(sorted(p.name[:-4] for p in resources.files(__package__).iterdir() if p.name.endswith(".txt")))


def escape_data(text: str) -> str:
    """Neutralise our fence tags inside data so it cannot close (or open) a fence."""
    return _TAG_RE.sub(lambda m: "&lt;" + m.group(1) + m.group(2), text)


def trim_text(text: str, limit: int, keep: Keep = "head", *, min_keep: int = 1) -> str:
    """``text`` cut to about ``limit`` characters (marker included), keeping at least ``min_keep``."""
    if len(text) <= limit:
        return text
    removed = len(text) - limit
    marker = f"\n…[{removed} characters trimmed to fit the prompt budget]"
    # the marker itself takes room; what is kept shrinks by its length, never below min_keep
    kept = max(min_keep, limit - len(marker))
    if kept >= len(text):
        return text
    marker = f"\n…[{len(text) - kept} characters trimmed to fit the prompt budget]"
    if keep == "head":
        return text[:kept] + marker
    return marker.lstrip("\n") + "\n" + text[-kept:]


@dataclass
class Prompt:
    """A rendered system + human pair, and what the budget did to it."""

    phase: str
    system: str
    human: str
    budget_chars: int
    trimmed: dict[str, int] = field(default_factory=dict)  # section -> characters removed
    compact: bool = False  # the budget made the compact briefing replace the full system prompt
    profile: str = "full"  # the prompt profile the system prompt was chosen by
    shots: tuple[tuple[str, str], ...] = ()  # worked examples as (asked, answered) turns before the human turn

    @property
    def chars(self) -> int:
        return len(self.system) + len(self.human) + sum(len(a) + len(b) for a, b in self.shots)

    @property
    def over_budget(self) -> bool:
        return self.chars > self.budget_chars

    def messages(self) -> list[BaseMessage]:
        shots = [m for asked, answered in self.shots for m in (HumanMessage(content=asked), AIMessage(content=answered))]
        return [SystemMessage(content=self.system), *shots, HumanMessage(content=self.human)]


def build(
    phase: str,
    system: str,
    human: str,
    fields: Mapping[str, str],
    *,
    trimmable: Mapping[str, Keep] | None = None,
    budget_tokens: int,
    profile: str = "full",
    system_fields: Mapping[str, str] | None = None,
    shots: Sequence[tuple[str, str]] = (),
) -> Prompt:
    """Fill the templates ``system`` and ``human``, trimming state sections to fit the budget.

    ``fields`` are the values; the fenced ones must already be escaped (``escape_data``; the
    renderers here do it). ``trimmable`` names the fields that may shrink and which end to keep.
    Under the ``compact`` profile the compact briefing is the system prompt from the start.
    """
    budget = budget_tokens * CHARS_PER_TOKEN
    has_compact = f"{system}_compact" in template_names()
    start_compact = profile == "compact" and has_compact
    sys_values = {name: clean_text(value) for name, value in (system_fields or {}).items()}
    sys_text = template(f"{system}_compact" if start_compact else system).substitute(sys_values)
    # the compact profile may bring its own human turn: fewer sections, in the order a small model reads
    tmpl = template(f"{human}_compact" if start_compact and f"{human}_compact" in template_names() else human)
    # Clean at the last boundary before the provider: every request encodes the prompt as UTF-8.
    values = {name: clean_text(value) for name, value in fields.items()}
    trimmable = dict(trimmable or {})
    trimmed: dict[str, int] = {}

    shots = tuple((clean_text(a), clean_text(b)) for a, b in shots)
    shot_chars = sum(len(a) + len(b) for a, b in shots)

    def total() -> int:
        return len(sys_text) + len(tmpl.substitute(values)) + shot_chars

    over = total() - budget
    while over > 0:
        candidates = [n for n in trimmable if len(values[n]) > TRIM_FLOOR + _MARKER_ROOM]
        if not candidates:
            break
        name = max(candidates, key=lambda n: len(values[n]))
        before = len(values[name])
        target = max(TRIM_FLOOR, before - over)
        values[name] = trim_text(values[name], target, trimmable[name], min_keep=TRIM_FLOOR)
        trimmed[name] = trimmed.get(name, 0) + before - len(values[name])
        trimmable.pop(name)  # each section is cut once, to its headroom; then the next largest
        over = total() - budget
    compact = False
    if over > 0 and has_compact and not start_compact:
        sys_text = template(f"{system}_compact").substitute(sys_values)
        compact = True
    return Prompt(phase=phase, system=sys_text, human=tmpl.substitute(values), budget_chars=budget,
                  trimmed=trimmed, compact=compact, profile=profile, shots=shots)


# --------------------------------------------------------------------------- renderers


def render_results(results: Sequence[StepResult], *, excerpt: int = 600, newest_first: bool = True) -> str:
    """Step results as fenced-safe lines: ``[id] completed: output`` / ``[id] FAILED (kind): error``."""
    if not results:
        return "(none yet)"
    ordered = list(reversed(results)) if newest_first else list(results)
    lines = []
    for r in ordered:
        if r.success:
            body = r.output.strip() or "(no output)"
            head = f"[{r.step_id}] completed"
        else:
            body = (r.error or r.output or "no error text").strip()
            head = f"[{r.step_id}] FAILED ({r.error_type or 'error'})"
        if len(body) > excerpt:
            body = body[: excerpt - 1] + "…"
        lines.append(f"{head}: {escape_data(body)}")
    return "\n".join(lines)


CAPABILITY_DESCRIPTION_CHARS = 200
"""A description longer than this is cut at a word: the list is paid for on every generation call."""


def _short(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= CAPABILITY_DESCRIPTION_CHARS:
        return text
    return text[: CAPABILITY_DESCRIPTION_CHARS].rsplit(" ", 1)[0] + "…"


def render_capabilities(capabilities: Sequence[Capability], *, description_chars: int | None = None) -> str:
    """One line per capability: a tool with its arguments (``read_file(path, start_line?: int)``),
    marked read-only when it changes nothing; a subagent or remote graph by name and kind."""
    if not capabilities:
        return "(none: every step is a model step)"
    lines = []
    for c in capabilities:
        about = _short(c.description) or "no description"
        if description_chars is not None and len(about) > description_chars:
            # the compact profile: the first clause of what the tool does (a small model copies long text)
            first = re.split(r" \(|; |\. ", about, maxsplit=1)[0].rstrip(".,;:")
            about = first if len(first) <= description_chars else first[:description_chars].rsplit(" ", 1)[0] + "…"
        if c.kind == "tool":
            mark = " [read-only]" if c.read_only else ""
            lines.append(f"- {c.name}({signature(c.args_schema)}){mark}: {about}")
        else:
            lines.append(f"- {c.name} ({c.kind}): {about}")
    return "\n".join(lines)


def render_assessment(a: StatusAssessment | None) -> str:
    if a is None:
        return "(none)"
    note = " [degraded: the planner could not assess]" if a.degraded else ""
    summary = f" — {escape_data(a.summary)}" if a.summary else ""
    return f"{a.status}, progress {a.goal_progress:.2f}, confidence {a.confidence:.2f}{summary}{note}"
