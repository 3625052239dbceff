"""Does a second, blind reading of the tool outputs agree with what a small model delivered?

The checks in ``grounding`` ask whether an answer's facts came from somewhere; they cannot ask
whether they came from the right place. Measured on the embedded 1.5B, that is where the false
successes left are: the staging password given for the production one (both were read), a search's
heading line written into a file where the command under it was asked for, a licence named after
the project, a count of every line of a CSV given as its data rows. Each one is a fact that a tool
did return, so no check on facts alone can tell.

So before a small model's ``done`` stands, the model reads the tool outputs once more, in a
separate call that is *not shown the answer, the plan or the steps that wrote it*: the request, what
the deliverable says it must give (its ``parts``, declared in the request's own language), and the
outputs of the run's tool steps (not of model steps, whose text is the planner's own, nor of writes,
which echo what was delivered). Grammar-held, it copies one value per part, or, for a count, every
item counted, one per entry. Code then compares:

- an answer or a file: a value agrees when most of its informative tokens (its tokens that are not
  words of the request; a token keeps its ``.``, ``-``, ``@`` and ``/`` joins, so a version or a path
  is one token) appear in the delivered text (the answer, or the deliverable's files as they are
  on disk). A value with no informative token, or one the outputs do not hold, says nothing, nor
  does a value with no digit where the answer is to be a number (asked "how many lines hold
  TODO?", the 1.5B's reading copied a TODO line as "the lines with TODO", and refused the right
  count for lacking it). A
  reading that gives more values than things asked is held to its first value for each thing:
  confirming a thing by any one of several values was tried and, measured, let an answer that
  named the protocol's owner and left out the email asked with it end ``done`` (the reading's
  extra value was the sign that the declared parts had missed one);
- a count: the reading sees no counting tool's output (it is to count anew); the number it copies
  where the outputs state one (a setting: "how many connections may the pool hold"), else the
  number of distinct items it lists that the outputs hold, must be a number the answer states (a
  list that reached the schema's cap says nothing).

A disagreement turns the ``done`` into ``replan``, naming the part that was not confirmed but *not
the value the reading found*: told the value, the next plan would copy it, and a wrong reading
would then be confirmed by itself. Each ``done`` is read afresh, with the outputs of the steps run
since.

Weighed: this costs one call per ``done`` (grammar-held, a few hundred tokens of output at most)
and refuses some right answers when the reading errs, which is the side to err on: a refused right
answer is a failure the user sees, a wrong answer called done is one they do not. It does not
help when the reading makes the same mistake as the plan; it catches the mistakes that depend on
the plan's path (which output a step was fed, which line a search returned first), which are most
of those measured. A provider model gets none of it unless the small-model rules are configured.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from soothe_planner.deliverable import Deliverable
from soothe_planner.models import AgentDecision, Capability, PlannerSettings, PlanStep, StepAction, StepResult
from soothe_planner.planner.contract import answer_text, as_evidence, is_model_step, read_back
from soothe_planner.planner.prompts import Prompt, build, escape_data
from soothe_planner.wire import CrossCheck

__all__ = ["crosscheck_prompt", "delivered", "disagreements", "evidence_of", "wants_crosscheck"]

Step = PlanStep | StepAction
_TOKEN = re.compile(r"[^\W_]+(?:[.@/:+-]+[^\W_]+)*")
_LIST_CAP = 30  # ``CrossCheck.values``' max_length: a list this long may have been cut
_EVIDENCE_CHARS = 6000

_COPY_EACH_PART = (
    "values: one entry per numbered thing below, in its order: that thing as the outputs state it, copied "
    "word for word and as short as it can be (a name, a number, a path, a command, a line); \"\" when the "
    "outputs do not state it."
)
_LIST_EVERY_ITEM = (
    "values: when the outputs state the asked number itself (a setting, a limit, a total written in a file), "
    "that number as the only entry; otherwise every single item the request counts, one entry each, copied "
    "from the outputs (a line, a name, a file); [] when the outputs show none."
)


def _tokens(text: str) -> set[str]:
    return {t.casefold() for t in _TOKEN.findall(text)}


def _flat(text: str) -> str:
    return " ".join(text.casefold().split())


def evidence_of(
    nodes: Sequence[Step], results: Sequence[StepResult], capabilities: Mapping[str, Capability] | None,
    deliverable: Deliverable | None = None,
) -> list[tuple[Step, StepResult]]:
    """The run's tool steps that succeeded, with their results as evidence (``contract.as_evidence``),
    writes left out (their outputs echo what was delivered) and model steps too (their text is the
    planner's own); for a count, counting tools too: the reading is to count anew, not to copy the
    number a tool gave."""
    by_id = {r.step_id: r for r in results if r.success}
    out = []
    for n in nodes:
        r = by_id.get(n.id)
        if r is None or is_model_step(n) or not n.tool or n.tools:
            continue
        cap = (capabilities or {}).get(n.tool)
        if cap is not None and (cap.writes_path_arg or (cap.counts and deliverable is not None
                                                         and deliverable.kind == "count")):
            continue
        out.append((n, as_evidence(n, r)))
    return out


def wants_crosscheck(deliverable: Deliverable | None, evidence: Sequence[tuple[Step, StepResult]]) -> bool:
    """Whether a reading could say anything: a deliverable to compare with and outputs to read."""
    return deliverable is not None and bool(evidence) and any(r.output.strip() for _, r in evidence)


def _asked(goal: str, deliverable: Deliverable) -> list[str]:
    if deliverable.kind == "count":
        return [deliverable.count_of or goal]
    return list(deliverable.parts) or [goal]


def crosscheck_prompt(
    goal: str, deliverable: Deliverable, evidence: Sequence[tuple[Step, StepResult]], settings: PlannerSettings
) -> Prompt:
    """The blind reading's prompt: the request, what it asks for, the tool outputs; never the answer."""
    asked = _asked(goal, deliverable)
    listed = "\n".join(f"{i}. {a}" for i, a in enumerate(asked, 1))
    if deliverable.kind == "count":
        listed = f"every item of: {asked[0]}"
    shown = []
    for step, result in evidence:
        args = json.dumps(step.args or {}, ensure_ascii=False, sort_keys=True)
        shown.append(f"[{step.id}] {step.tool} {args}\n{result.output.strip()}")
    return build(
        "crosscheck",
        "crosscheck_system",
        "crosscheck_human",
        {"goal": escape_data(goal), "asked": escape_data(listed),
         "outputs": escape_data("\n\n".join(shown)[:_EVIDENCE_CHARS]),
         "task": _LIST_EVERY_ITEM if deliverable.kind == "count" else _COPY_EACH_PART},
        trimmable={"outputs": "head"},
        budget_tokens=settings.prompt_budget_tokens,
        profile=settings.prompt_profile,
    )


def _holds(text_flat: str, text_tokens: set[str], tokens: set[str]) -> bool:
    """Whether most of ``tokens`` (more than half; all of one) are in the text, whole or inside a longer token."""
    found = sum(1 for t in tokens if t in text_tokens or t in text_flat)
    return found * 2 > len(tokens)


def delivered(
    deliverable: Deliverable, decision: AgentDecision | None, results: Sequence[StepResult], workspace: str | None
) -> str:
    """What the run hands back: the deliverable's files as they are on disk, else the answer."""
    if deliverable.kind == "file":
        return "\n".join(read_back(workspace, f) or "" for f in deliverable.files)
    return answer_text(decision, results)


def disagreements(
    goal: str, deliverable: Deliverable, reading: CrossCheck, delivered_text: str,
    evidence: Sequence[tuple[Step, StepResult]],
) -> list[str]:
    """Why the blind reading does not confirm what was delivered ([] when it does, or says nothing)."""
    read = "\n".join(r.output for _, r in evidence)
    read_flat, read_tokens = _flat(read), _tokens(read)
    goal_tokens = _tokens(goal)
    text_flat, text_tokens = _flat(delivered_text), _tokens(delivered_text)
    where = ", ".join(deliverable.files) if deliverable.kind == "file" else "the answer"
    if deliverable.kind == "count":
        items = {_flat(v) for v in reading.values if v.strip()}
        held = [v for v in items if v in read_flat or _holds(read_flat, read_tokens, _tokens(v))]
        if not held or len(reading.values) >= _LIST_CAP:
            return []
        stated = {t for t in text_tokens if t.isdigit()}
        number = held[0] if len(held) == 1 and held[0].isdigit() else str(len(held))  # a number stated, or a list
        if number in stated:
            return []
        return [f"a second reading of the tool outputs, blind to the answer, lists a different number of "
                f"{_asked(goal, deliverable)[0]!r} than {where} states: count exactly what the request asks for"]
    out = []
    numeric = deliverable.kind == "answer" and deliverable.answer_is == "number"
    for part, value in zip(_asked(goal, deliverable), reading.values, strict=False):
        informative = _tokens(value) - goal_tokens
        if numeric:  # a number asked is compared by its numbers: the words around it are the outputs' language
            informative = {t for t in informative if any(ch.isdigit() for ch in t)}
        if not value.strip() or not informative:
            continue  # nothing to compare; a number asked, and no number read, says nothing of the number
        if not (_flat(value) in read_flat or _holds(read_flat, read_tokens, informative)):
            continue  # the reading did not copy it from the outputs: it says nothing
        if _flat(value) in text_flat or _holds(text_flat, text_tokens, informative):
            continue
        out.append(f"a second reading of the tool outputs, blind to the answer, does not find {part!r} in {where} "
                   "as the outputs state it: take it from the output that states it")
    return out
