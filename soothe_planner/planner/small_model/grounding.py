"""Is a small model's "done" backed by what the tools returned, or only by what it wrote?

A small model asked "is the goal done?" after its plan ran says yes to nearly anything, including
an answer step that guessed a value. Nothing cheap can check that an answer is right; something
cheap can check that the facts it states came from somewhere. The answer of a plan is the output
of its final model step (or the text a final write was fed); its *checkable facts* are the tokens
a model cannot paraphrase — numbers, file paths, e-mail addresses, URLs, handles. Each must
appear, as a whole token, in the output of a tool step the answer depends on (directly or not) or
in the goal itself. A fact that appears in none was made up or computed by the model, and a
"done" resting on it is turned into "replan" with the facts named (``require_grounded_answer``,
on with the small-model rules). A goal the workspace cannot satisfy is then answered "not found"
or fails; it does not end ``done`` with an invented value.

Two more checks on a small model's "done": a goal that names a file of the workspace (its path,
found by looking the workspace's own file names up in the goal, in any language) is not done
until a step looked in it (``unread_files``); and a ``continue`` over a finished plan is read as
the ``done`` it is when the contract's checks pass and the answer's facts all come from tool
outputs, or the deliverable's file carries every line the searches found (``promote``).

Weighed: these checks cost no call. What they cannot see, a fact taken from the wrong place, is
left to the blind second reading (``crosscheck``), which costs one call per ``done``. The rule refuses some right answers —
a sum is computed, never copied — which is the side it should err on: a refused right answer is
a failure the user sees, a wrong answer called done is a false success they do not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from soothe_planner.dag import ancestors, free_step_id
from soothe_planner.deliverable import Deliverable
from soothe_planner.models import AgentDecision, Capability, PlanStep, StepAction, StepResult
from soothe_planner.planner.contract import (
    LINE_LABEL,
    as_evidence,
    delivered_text,
    final_outputs,
    is_model_step,
    lines_left_out,
    mentions,
    path_key,
    write_target,
    writes_of,
)
from soothe_planner.planner.small_model.reading import reader_of
from soothe_planner.tools import workspace_files

if TYPE_CHECKING:
    from soothe_planner.planner.run_steps import RunSteps

__all__ = [
    "Dropped",
    "answer_facts",
    "checked_steps",
    "dropped_lines",
    "gave_no_answer",
    "grounded_answer",
    "guard_note",
    "guard_reasons",
    "off_subject",
    "states_nothing_read",
    "ungrounded_facts",
    "unread_files",
    "words",
]

Step = PlanStep | StepAction
_FACT = re.compile(
    r"\b[a-z][a-z0-9+.-]{1,15}://[^\s\"'<>`)\]]+"  # a URL (https://, s3://, ...)
    r"|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # an e-mail address
    r"|(?:[\w.-]+/)+[\w.-]+"  # a path with a folder
    r"|\b[\w-]+\.(?:py|md|txt|toml|yaml|yml|json|csv|cfg|ini|js|ts|rs|go|java|c|h|sh|bib|sql|mod|env)\b"  # a file name
    r"|(?<![\w&])#[\w][\w-]*"  # a channel or tag
    r"|(?<![\w-])--[^\W\d_][\w-]*"  # a command-line flag
    r"|`[^`\n]{2,80}`"  # a quoted command or name
    r"|\b[^\W\d_a-z][^\W_]+(?:[ ][^\W\d_a-z][^\W_]+)+"  # a name of capitalised words
    r"|\b\d+(?:[.,]\d+)*\b"  # a number, a version
)
_ALL_FILES = 1_000_000


def answer_facts(text: str) -> list[str]:
    """The checkable facts ``text`` states, in order, each once (trailing punctuation dropped; a
    quoted span is checked without its backticks)."""
    out: dict[str, None] = {}
    for m in _FACT.finditer(text):
        fact = m.group(0).rstrip(".,;:").strip("`").strip()
        if fact:
            out[fact] = None
    return list(out)


def _contains(haystack: str, fact: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(fact)}(?![\w])", haystack, re.IGNORECASE) is not None


_GUARD_NOTE = "[guard: "


def guard_note(why: str, summary: str) -> str:
    """``summary`` with a check's reason for changing the assessment put in front (``guard_reasons`` reads it back)."""
    return f"{_GUARD_NOTE}{why}] {summary}".strip()


def guard_reasons(summary: str | None) -> list[str]:
    """The ``[guard: why]`` notes at the front of an assessment's ``summary`` (``guard_note``)."""
    text = (summary or "").strip()
    reasons: list[str] = []
    while text.startswith(_GUARD_NOTE):
        end = _guard_end(text)
        if end < 0:
            break
        reasons.append(text[len(_GUARD_NOTE):end].strip())
        text = text[end + 1:].strip()
    return reasons


def _guard_end(text: str) -> int:
    """The index of the ``]`` closing the note that opens ``text`` (brackets inside it balanced), or -1."""
    depth = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return i
    return -1


def unread_files(
    goal: str, nodes: Sequence[Step], results: Sequence[StepResult], capabilities: Mapping[str, Capability] | None,
    workspace: str | None, deliverable: Deliverable | None,
) -> list[str]:
    """The files of ``workspace`` whose path the goal writes out, which no step that succeeded looked in.

    A file is named when its workspace-relative path (with its folder, or a name with an
    extension) appears in the goal as a whole token: the workspace's names are looked up in the
    goal, not words of the goal in a list. The deliverable's files and those the run wrote are not
    ones to read. For a count, "looked in" is generous: a tool step whose ``path`` is the file or a
    folder above it (no ``path``: the whole workspace). For an answer or a file it means read: a
    step of the tool that reads one file (``reader_of``) with that file as its ``path``, when one is
    offered: a search shows the lines that hold its pattern, not the lines the goal asks about (a
    1.5B searched docs/api.md for "endpoint" and wrote the two heading lines it found as the list of
    endpoints the file holds below them). After a step of an agent with tools of its own, nothing is
    checked. ``[]`` without a workspace to look in. A 1.5B answered "List the second-level headings
    in README.md" from a listing of docs/ and said done.
    """
    if not workspace:
        return []
    try:
        present = workspace_files(workspace, limit=_ALL_FILES)[0]
    except Exception:  # no listing, no check: the guard lets the model's word stand
        return []
    outputs = set(deliverable.files if deliverable else ()) | {w.path for w in writes_of(nodes, results, capabilities)}
    folded = goal.casefold()
    named = [f for f in present if ("." in f.rsplit("/", 1)[-1] or "/" in f) and f not in outputs
             and f.casefold() in folded and mentions(goal, f)]
    if not named:
        return []
    ok = {r.step_id for r in results if r.success}
    if any(s.id in ok and (s.subagent or s.tools) for s in nodes):
        return []  # an agent that chose its own tools looked where it liked: nothing to check
    reader = reader_of(capabilities) if deliverable is None or deliverable.kind != "count" else None
    looked = [path_key(str(s.args.get("path", "."))) for s in nodes
              if s.tool and s.id in ok and not write_target(s, capabilities) and (reader is None or s.tool == reader)]

    def covers(where: str, name: str) -> bool:
        folder = where.strip("/")
        return folder in ("", ".") or where == name or name.startswith(folder + "/")
    return [n for n in named if not any(covers(w, n) for w in looked)]


class _Judged(NamedTuple):
    step_id: str
    facts: list[str]
    missing: list[str]
    read: list[str]  # the facts a tool output holds (not only the goal)


def _judge(
    goal: str, decision: AgentDecision | None, nodes: Sequence[Step], results: Sequence[StepResult]
) -> _Judged | None:
    if decision is None or not decision.steps:
        return None
    needed = {d for s in decision.steps for d in s.depends_on}
    finals = [s for s in decision.steps if s.id not in needed]
    by_id = {r.step_id: r for r in results}
    # the answer is the final model step's output; a final write carries it in its content
    answer_steps = [s for s in finals if is_model_step(s)]
    if not answer_steps:
        fed = {d for s in finals if s.tool for d in s.depends_on}
        answer_steps = [s for s in decision.steps if s.id in fed and is_model_step(s)]
    if not answer_steps:
        return None
    # several final answers are one answer in parts: each is judged against what fed it
    graph = {n.id: n.depends_on for n in nodes}
    facts: list[str] = []
    missing: list[str] = []
    read_facts: list[str] = []
    for step in answer_steps:
        result = by_id.get(step.id)
        if result is None or not result.success:
            return None
        # only what fed the answer is a source: a write that runs after it echoes the answer's own text
        fed_by = ancestors(graph, step.id)
        tools = {n.id: n for n in nodes if (n.tool or n.tools) and n.id in fed_by}
        read = "\n".join(_without_line_labels(as_evidence(tools[r.step_id], r)) for r in results
                         if r.success and r.step_id in tools)
        said = LINE_LABEL.sub(_label_path, result.output)  # a line copied with its label: its number is no fact
        mine = [f for f in (_as_found(f, read, goal) for f in answer_facts(said)) if f]
        facts += mine
        read_facts += [f for f in mine if _contains(read, f)]
        missing += [f for f in mine if not (_contains(read, f) or _contains(goal, f))]
    return _Judged(", ".join(s.id for s in answer_steps), list(dict.fromkeys(facts)), list(dict.fromkeys(missing)),
                   list(dict.fromkeys(read_facts)))


def _without_line_labels(result: StepResult) -> str:
    """A tool's output as evidence: a search's ``path:N:`` labels kept for the path, not the line
    number (a line number grounds no count or port: "10" was taken from ``staging.toml:10:``)."""
    if not isinstance(result.outcome.get("lines"), list):
        return result.output
    return LINE_LABEL.sub(_label_path, result.output)


def _label_path(m: re.Match[str]) -> str:
    """``path:N: `` as ``path `` (the path kept, the line number dropped)."""
    return m.group("path") + " "


def _as_found(fact: str, read: str, goal: str) -> str:
    """``fact`` as it is checked: a name of capitalised words may have taken in the capitalised word
    that opens its sentence ("Page Dariusz Mensah"), so a name not found whole is looked up without
    its first word, and a two-word one that leaves one word is no name at all ("" : not a fact)."""
    words = fact.split(" ")
    if len(words) < 2 or not all(w[:1].isupper() for w in words) or _contains(read, fact) or _contains(goal, fact):
        return fact
    return " ".join(words[1:]) if len(words) > 2 else ""


def ungrounded_facts(
    goal: str, decision: AgentDecision | None, nodes: Sequence[Step], results: Sequence[StepResult]
) -> tuple[str, list[str]]:
    """``(the answer step's id, its facts found in no tool output nor the goal)``; ``("", [])`` when
    the last plan does not end in one model step that succeeded."""
    judged = _judge(goal, decision, nodes, results)
    return (judged.step_id, judged.missing) if judged else ("", [])


def grounded_answer(
    goal: str, decision: AgentDecision | None, nodes: Sequence[Step], results: Sequence[StepResult]
) -> tuple[str, list[str]]:
    """``(the answer step's id, its facts)`` when the last plan ran every step to success and its
    answer states checkable facts, every one found in the tool outputs it read or the goal, and at
    least one in a tool output; ``("", [])`` otherwise."""
    judged = _judge(goal, decision, nodes, results)
    if judged is None or judged.missing or not judged.read or decision is None:
        return "", []
    ok = {r.step_id for r in results if r.success}
    if not all(s.id in ok for s in decision.steps):
        return "", []
    return judged.step_id, judged.facts


def checked_steps(run: RunSteps) -> tuple[Sequence[PlanStep | StepAction], list[StepResult]]:
    """What the checks read of a run: ``(its steps, their latest results)``, as the call read them once."""
    return run.steps, list(run.results)


class Dropped(NamedTuple):
    """Lines the run's searches found that a write of the deliverable's file left out."""

    delivered_by: str  # the write whose file was checked
    found: int
    missing: list[str]
    holders: tuple[str, ...]  # the searches that found the lines left out
    path: str
    writer: str  # the writing tool
    path_arg: str

    def why(self) -> str:
        kept = self.found - len(self.missing)
        shown = "; ".join(repr(m) for m in self.missing[:3]) + (" ..." if len(self.missing) > 3 else "")
        whole = " and ".join(f"{s}'s output" for s in self.holders)
        return (f"the deliverable must carry every line the searches found, and {self.delivered_by} wrote {kept} of "
                f"the {self.found} lines (left out: {shown}); {whole} itself holds them")

    def remedy(self, *, calls: bool) -> str:
        """The step that writes every line as found, in the plan's syntax.

        A 1.5B model told only that a search's output "holds every line" planned the same lossy
        answer step again or wrote a listing; shown this step, it wrote the search's output.
        """
        if calls:
            holders = self.holders
            content = holders[0] if len(holders) == 1 else 'f"' + "\\n".join("{" + h + "}" for h in holders) + '"'
            return f"{self.writer}({self.path_arg}={json.dumps(self.path)}, content={content})"
        return json.dumps({"tool": self.writer, "args": self._args()})

    def remedy_step(self, taken: Collection[str]) -> StepAction:
        """``remedy``'s write as a typed step under an id not in ``taken``."""
        args = self._args()
        return StepAction(id=free_step_id(taken), description=f"{self.writer} {json.dumps(args, ensure_ascii=False)}",
                          tool=self.writer, args=args, depends_on=list(self.holders))

    def _args(self) -> dict[str, str]:
        return {self.path_arg: self.path, "content": "\n".join("{{" + h + ".output}}" for h in self.holders)}


def dropped_lines(
    deliverable: Deliverable | None, nodes: Sequence[Step], results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None,
) -> Dropped | None:
    """For a deliverable that must carry every match: the lines the last write of one of its files
    left out of what it wrote, with the searches that found them (None when nothing is left out,
    or nothing is checkable). The remedy writes with the builtin ``content`` argument, so only a
    writing tool that takes one gets it."""
    if deliverable is None or deliverable.kind != "file" or not deliverable.every_match:
        return None
    completed = {r.step_id: r for r in results if r.success}
    by_id = {n.id: n for n in nodes}
    for name in deliverable.files:
        mine = [w for w in writes_of(nodes, results, capabilities) if w.path == name]
        if not mine:
            continue
        step = by_id[mine[-1].step_id]
        cap = (capabilities or {}).get(step.tool or "")
        if cap is None or cap.writes_path_arg is None:
            continue
        text = delivered_text(step, completed) or ""
        found, missing, holders = lines_left_out(text, nodes, results)
        schema = (cap.args_schema or {}).get("properties") or {}
        if missing and "content" in schema:
            return Dropped(step.id, found, missing, tuple(holders), name, cap.name, cap.writes_path_arg)
    return None


_VALUE = re.compile(r"\b\d+(?:[.,]\d+)*\b|[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
"""A value a goal names: a number or version, an e-mail address (the shape, not a word of any language)."""


def off_subject(
    goal: str, decision: AgentDecision | None, nodes: Sequence[Step], results: Sequence[StepResult],
    common: Collection[str] | None = None,
) -> tuple[list[str], list[str]]:
    """``(values the goal names that no tool output holds, facts the answer adds)`` when both are
    non-empty, else ``([], [])``.

    A value the goal names (a version, a year, a number, an address) that no tool of the run
    returned means the evidence never reached the goal's subject; an answer that still states facts
    of its own is about something else. "What changed in 1.3.0?" was answered with the changes of
    1.2.1, every fact of it from the changelog, none about 1.3.0, which the changelog lacks. An
    answer that states no fact beyond the goal's ("1.3.0 is not in the changelog") passes. A bare
    whole number counts as held only on a line beside a word the goal puts around it (``_seen``):
    "What changed in version 3?" over a protocol at v2.1 was answered with v2.1's changes, while
    "3" stood in "3 mm deep".
    """
    asked = list(dict.fromkeys(m.group(0).rstrip(".,") for m in _VALUE.finditer(goal)))
    if not asked:
        return [], []
    tools = {n.id: n for n in nodes if n.tool or n.tools}
    outputs = "\n".join(as_evidence(tools[r.step_id], r).output for r in results if r.success and r.step_id in tools)
    unseen = [v for v in asked if not _seen(v, goal, outputs, common)]
    answer = _final_answer(decision, results)
    if not unseen or answer is None:
        return [], []
    added = [f for f in answer_facts(answer) if not _contains(goal, f)]
    # an answer that says the value is not there names it; one about something else does not
    unnamed = [v for v in unseen if not _contains(answer, v)]
    return (unseen, added or [f"no mention of {v}" for v in unnamed]) if added or unnamed else ([], [])


_AROUND = 2  # words either side of a bare number in the goal that say what it counts


def _seen(value: str, goal: str, outputs: str, common: Collection[str] | None) -> bool:
    """Whether the tool outputs hold ``value`` as the goal means it. A version, an address or a long
    number is itself; a bare whole number ("version 3") is found on an output line only beside one
    of the words around it in the goal ("version"; not words most of the workspace's files hold,
    nor short ones when that is unknown): "3 mm" and "step 3" are not version 3."""
    if not value.isdigit():
        return _contains(outputs, value)
    tokens = [w.casefold() for w in _TOKEN.findall(goal)]
    at = [i for i, w in enumerate(tokens) if w == value]
    around = {w for i in at for w in tokens[max(0, i - _AROUND):i + _AROUND + 1]
              if w != value and not w.isdigit() and (len(w) >= 4 if common is None else len(w) > 2 and w not in common)}
    if not around:
        return _contains(outputs, value)
    return any(_contains(line, value) and around & words(line) for line in outputs.splitlines())


def _final_answer(decision: AgentDecision | None, results: Sequence[StepResult]) -> str | None:
    """The text of the last decision's final model steps that succeeded (None when there is none)."""
    texts = final_outputs(decision, results, model_steps_only=True)
    return "\n".join(texts) if texts else None


_TOKEN = re.compile(r"[^\W_]+")


def words(text: str) -> set[str]:
    """``text``'s words, case aside: runs of letters or digits in any script (``_`` splits them)."""
    return {w.casefold() for w in _TOKEN.findall(text)}


def gave_no_answer(decision: AgentDecision | None, results: Sequence[StepResult]) -> bool:
    """Whether the last decision ends in no model step that succeeded: its outputs are tool
    outputs (a search's lines, a file), not an answer to the question."""
    return decision is not None and bool(decision.steps) and _final_answer(decision, results) is None


def states_nothing_read(
    goal: str, decision: AgentDecision | None, nodes: Sequence[Step], results: Sequence[StepResult]
) -> bool:
    """Whether the final answer states no fact a tool output holds (no name, number, path, address or
    quoted command of the evidence). A small model's answer that carries nothing of what the tools
    returned ("Yes, the rollback undoes migrations." over a runbook that says the opposite) cannot be
    told from a guess, so it does not end a goal; an answer that the fact is missing fails the goal
    instead, which is what a goal the workspace cannot satisfy should do."""
    judged = _judge(goal, decision, nodes, results)
    if judged is None:
        return False
    # a fact the goal itself names tells nothing ("`requests`" for "which module imports requests?"),
    # unless the answer chooses between values the goal names ("a.py or b.py?")
    options = {f.casefold() for f in answer_facts(goal)}
    new = [f for f in judged.read if not _contains(goal, f)]
    chose = len(options) >= 2 and any(f.casefold() in options for f in judged.read)
    return not new and not chose


def wrong_kind(deliverable: Deliverable | None, decision: AgentDecision | None, results: Sequence[StepResult]) -> str:
    """What the answer lacks when the deliverable says what an answer is and the answer states nothing of
    that kind ("" otherwise): "who" answered with a path, "which channel" with a Go file."""
    kind = deliverable.answer_is if deliverable is not None and deliverable.kind == "answer" else "text"
    answer = _final_answer(decision, results)
    if kind in ("text", "yes_no") or answer is None:
        return ""
    facts = answer_facts(answer)
    if kind == "number" and not any(f[:1].isdigit() for f in facts):
        return "a number"
    if kind == "path" and not any("/" in f or ("." in f and not f[:1].isdigit() and " " not in f) for f in facts):
        return "a path"
    if kind == "name" and not any((" " in f and f[:1].isupper()) or "@" in f or f.startswith("#") for f in facts):
        return "a name"
    return ""


def parts_left_unanswered(
    goal: str, deliverable: Deliverable | None, decision: AgentDecision | None, nodes: Sequence[Step],
    results: Sequence[StepResult],
) -> tuple[int, int]:
    """``(things asked, distinct facts from the tools the answer states)`` when the deliverable names
    two or more parts and the answer states fewer such facts than that, else ``(0, 0)``.

    "What port does the staging config listen on, and which port does the Dockerfile expose?" was
    answered with one port. Each thing asked needs something the evidence says; fewer facts than
    things asked is an answer that left one out (it errs on refusing a right answer that gives two
    things in one fact, which a failure shows, over calling a half answer done)."""
    if deliverable is None or len(deliverable.parts) < 2:
        return 0, 0
    judged = _judge(goal, decision, nodes, results)
    if judged is None:
        return 0, 0
    given = len({f.casefold() for f in judged.read})
    return (len(deliverable.parts), given) if given < len(deliverable.parts) else (0, 0)
