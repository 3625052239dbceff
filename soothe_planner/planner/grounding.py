"""Is a "done" backed by what the tools returned, or only by what a model wrote?

A small model asked "is the goal done?" after its plan ran says yes to nearly anything, including
an answer step that miscounted a listing or guessed a number. Nothing cheap can check that an
answer is right; something cheap can check that the facts it states came from somewhere. The
answer of a plan is the output of its final model step; its *checkable facts* are the tokens a
model cannot paraphrase — numbers, file paths, e-mail addresses, URLs. Each must appear, as a
whole token, in the output of a tool step of the goal or in the goal itself. A fact that appears
in none was made up or computed by the model, and a "done" resting on it is turned into "replan"
with the facts named (``PlannerSettings.require_grounded_answer``; on by default under the compact
prompt profile, where the assessing model is small).

Weighed: asking the model again (self-consistency) costs a call and repeats its blind spot; a
judge model is what the small-model setting does not have. The rule refuses some right answers —
a count is computed, never copied — which is the side it should err on: a refused right answer is
a failure the user sees, a wrong answer called done is a false success they do not.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from soothe_planner.models import AgentDecision, PlanStep, StepAction, StepResult

__all__ = ["answer_facts", "ungrounded_facts"]

_FACT = re.compile(
    r"https?://[^\s\"'<>`)\]]+"  # a URL
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # an e-mail address
    r"|(?:[\w.-]+/)+[\w.-]+"  # a path with a folder
    r"|\b[\w-]+\.(?:py|md|txt|toml|yaml|yml|json|csv|cfg|ini|js|ts|rs|go|java|c|h|sh)\b"  # a file name
    r"|\b\d+(?:[.,]\d+)*\b"  # a number, a version
)


def answer_facts(text: str) -> list[str]:
    """The checkable facts ``text`` states, in order, each once (trailing punctuation dropped)."""
    out: dict[str, None] = {}
    for m in _FACT.finditer(text):
        fact = m.group(0).rstrip(".,;:")
        if fact:
            out[fact] = None
    return list(out)


def _contains(haystack: str, fact: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(fact)}(?![\w])", haystack) is not None


def ungrounded_facts(
    goal: str, decision: AgentDecision | None, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult]
) -> tuple[str, list[str]]:
    """``(the answer step's id, its facts found in no tool output nor the goal)``; ``("", [])`` when
    the last plan does not end in one model step that succeeded."""
    if decision is None or not decision.steps:
        return "", []
    needed = {d for s in decision.steps for d in s.depends_on}
    finals = [s for s in decision.steps if s.id not in needed]
    by_id = {r.step_id: r for r in results}
    # the answer is the final model step's output; a final write carries it in its content
    answer_steps = [s for s in finals if not (s.tool or s.tools or s.subagent)]
    if not answer_steps:
        writes = [s for s in finals if s.tool]
        fed = {d for s in writes for d in s.depends_on}
        answer_steps = [s for s in decision.steps if s.id in fed and not (s.tool or s.tools or s.subagent)]
    if len(answer_steps) != 1:
        return "", []
    step = answer_steps[0]
    result = by_id.get(step.id)
    if result is None or not result.success:
        return "", []
    tool_ids = {n.id for n in nodes if n.tool or n.tools}
    sources = "\n".join([goal, *(r.output for r in results if r.success and r.step_id in tool_ids)])
    missing = [f for f in answer_facts(result.output) if not _contains(sources, f)]
    return step.id, missing
