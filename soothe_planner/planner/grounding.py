"""Is a "done" backed by what the tools returned, or only by what a model wrote?

A small model asked "is the goal done?" after its plan ran says yes to nearly anything, including
an answer step that miscounted a listing or guessed a number. Nothing cheap can check that an
answer is right; something cheap can check that the facts it states came from somewhere. The
answer of a plan is the output of its final model step; its *checkable facts* are the tokens a
model cannot paraphrase — numbers, file paths, e-mail addresses, URLs. Each must appear, as a
whole token, in the output of a tool step the answer depends on (directly or not) or in the goal
itself. A fact that appears in none was made up or computed by the model, and a "done" resting on
it is turned into "replan" with the facts named (``PlannerSettings.require_grounded_answer``; on by default under the compact
prompt profile, where the assessing model is small).

A count is grounded only by a tool that counted: a model step asked for one ("how many",
"count", "the number of") computes it, and its number found somewhere in a tool's output proves
nothing (a 1.5B model answered "11 Python files", the total of a listing of 11 files, four of them
.py). Two ways to let a small model show its working were measured and dropped: a numbered list of
what it counted, and a yes/no verdict per candidate tallied here with the model's own sum required
to agree — both were consistently wrong together (8 of 11 files said to be Python; 3 of 4 CSV
rows), so each would have reported a wrong count as done. What counts instead is code: the
built-ins ``count_files`` and ``count_lines`` answer with the number first, and a count task's
number is grounded when it is the count one of them returned to a step the answer depends on —
unless the goal or the step qualifies the count ("not counting the header", "excluding tests"):
then the answer is the tool's count minus something, the model's arithmetic again. A counted
number grounds a "done"; it never turns a "continue" into one (``grounded_answer``): the count
is of what the tool was asked to count, which may not be what the goal asks (on the goal suite
the 1.5B answered the 5 lines of a CSV file for its 4 rows "not counting the header").

A goal that asks for *every* line of something ("find every line containing TODO and write those
lines to X") is checked for what it delivers, not only for where its facts came from: each line a
search step found must reach the text the plan delivered (the content a final write was fed, or the
final answer). A 1.5B model planned search → answer → write for that goal, its answer step passed
on one of the five lines, and every fact it kept was grounded, so the assessment's "done" stood
over a report missing four lines (``unrelayed_lines``). A line counts as delivered when its text
after the searched word ("# TODO: reject empty notes" → "reject empty notes") appears in the
delivered text, case and spacing aside: a reformatted list passes, a dropped or reworded line
does not.

Weighed: asking the model again (self-consistency) costs a call and repeats its blind spot; a
judge model is what the small-model setting does not have. The rule refuses some right answers —
a sum is computed, never copied — which is the side it should err on: a refused right answer is
a failure the user sees, a wrong answer called done is a false success they do not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, NamedTuple

from soothe_planner.dag import BadReferenceError, ancestors, arg_strings, latest_results, resolve_args
from soothe_planner.models import (
    AgentDecision,
    Capability,
    LoopState,
    PlanStep,
    StatusAssessment,
    StepAction,
    StepResult,
)
from soothe_planner.parsing import is_count_task
from soothe_planner.planner.plan_rules import (
    FILE_NAME,
    files_to_write,
    path_key,
    paths_written,
    unwritten_files,
    workspace_listing,
    writes_path,
    writing_tools,
)
from soothe_planner.tools import (
    COUNTING_TOOL_NAMES,
    NEAREST_LINES_MARK,
    SEARCH_STOPPED_MARK,
    SEARCH_TOOL_NAME,
    WRITE_TOOL_NAME,
    wrote_blank,
)

if TYPE_CHECKING:
    from soothe_planner.dag import PlanManager

__all__ = ["Dropped", "answer_facts", "checked_steps", "echoed_goal", "grounded_answer", "guard_assessment",
           "guard_note", "guard_reasons", "relayed_every_line", "ungrounded_facts", "unread_files", "unrelayed_lines"]

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


def guard_assessment(
    goal: str,
    a: StatusAssessment,
    decision: AgentDecision | None,
    nodes: Sequence[PlanStep | StepAction],
    results: Sequence[StepResult],
    *,
    plan_finished: bool,
    writers: Collection[str] | None = None,
    workspace: str | None = None,
) -> tuple[StatusAssessment, str]:
    """``(the assessment as the rules leave it, why it changed or "")``.

    A "done" over an echo of the goal, over a fact no tool it read returned, or over a delivery
    missing lines an "every line" goal asked for (``unrelayed_lines``) becomes "replan". A
    "continue" over a finished plan (``plan_finished``: nothing of it left to run) whose answer
    ``grounded_answer`` vouches for, or whose write ``relayed_every_line`` vouches for, and which
    left out no such line, becomes "done". With
    ``writers`` (the tools that change things), a goal that asks for a named file is neither done nor
    vouched for until a completed step of one of them wrote it (``plan_rules.unwritten_files``, which
    reads a goal's "in NAME" as a file to write only with the ``workspace`` folder to look in).
    """
    dropped = unrelayed_lines(goal, decision, nodes, results, writers)
    # a write of blank text made the file, not what the goal asked to be in it
    completed = {r.step_id for r in results if r.success and not wrote_blank(r.output)}
    unwritten = unwritten_files(goal, nodes, writers, completed, workspace=workspace) if writers is not None else []
    unread = unread_files(goal, nodes, results, writers, workspace) if writers is not None else []
    if a.status == "done":
        step_id, missing = ungrounded_facts(goal, decision, nodes, results)
        echo = echoed_goal(goal, decision, nodes, results)
        if unwritten:
            why = f"the goal asks to write {', '.join(unwritten)}, and no completed step wrote it"
        elif unread:
            why = f"the goal names {', '.join(unread)}, and no completed step looked in it"
        elif echo:
            why = f"the answer in {echo} only repeats words of the goal"
        elif missing:
            why = f"the answer in {step_id} states {', '.join(repr(f) for f in missing[:5])}, found in no tool output"
        elif dropped:
            why = dropped.why()
        else:
            return a, ""
        update = {"status": "replan", "goal_progress": min(a.goal_progress, 0.5),
                  "summary": guard_note(why, a.summary)}
        return a.model_copy(update=update), f"'done' turned into 'replan': {why}"
    if a.status == "continue" and plan_finished and not dropped and not unwritten and not unread:
        step_id, facts = grounded_answer(goal, decision, nodes, results)
        relayed = None if step_id else relayed_every_line(goal, decision, nodes, results, writers, workspace)
        if step_id:
            why = (f"the plan ran to its end; {step_id} answers with {', '.join(repr(f) for f in facts[:5])}, "
                   "each from a tool output")
        elif relayed:
            why = (f"the plan ran to its end; {relayed[0]} wrote every one of the {relayed[1]} lines its "
                   "searches found to the file the goal names")
        else:
            return a, ""
        update = {"status": "done", "goal_progress": 1.0, "summary": guard_note(why, a.summary)}
        return a.model_copy(update=update), f"'continue' turned into 'done': {why}"
    return a, ""


_GUARD_NOTE = "[guard: "


def guard_note(why: str, summary: str) -> str:
    """``summary`` with a check's reason for changing the assessment put in front (``guard_reasons`` reads it back)."""
    return f"{_GUARD_NOTE}{why}] {summary}".strip()


def guard_reasons(a: StatusAssessment | None) -> list[str]:
    """Why the planner's checks turned ``a`` away from "done", from its summary's ``[guard: why]``
    notes (``guard_note``; none when no check did, or ``a`` says "done")."""
    if a is None or a.status == "done":
        return []
    text = a.summary.strip()
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
    goal: str, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult], writers: Collection[str],
    workspace: str | None,
) -> list[str]:
    """The files of ``workspace`` that ``goal`` names to be read, which no step that succeeded looked in.

    "Looked in" is generous: a tool step whose ``path`` is the file or a folder above it (no
    ``path`` at all: the whole workspace); and after a step of an agent with tools of its own (a
    subagent, a model step given tools), nothing is checked. A file the goal asks to write, or one
    the run's steps write (with a tool of ``writers``), is not one to read. ``[]`` without a
    workspace to look in. The workspace is walked only for a goal that names a file. A 1.5B answered "List the second-level headings in README.md" with a name from a listing of
    docs/, every fact of it from a tool output, and said done.
    """
    if not workspace:
        return []
    written = paths_written(nodes, writers)
    outputs = {*files_to_write(goal, workspace, written), *(path_key(w) for w in written)}
    named = [n.rstrip(".") for n in dict.fromkeys(FILE_NAME.findall(goal)) if n.rstrip(".") not in outputs]
    present = workspace_listing(workspace) if named else None
    if present is None:  # no listing, no check: the guard lets the model's word stand
        return []
    to_read = [n.lstrip("./") for n in named if any(writes_path(f, n) for f in present)]
    ok = {r.step_id for r in results if r.success}
    if any(s.id in ok and (s.subagent or s.tools) for s in nodes):
        return []  # an agent that chose its own tools looked where it liked: nothing to check
    looked = [str(s.args.get("path", ".")).strip() for s in nodes if s.tool and s.id in ok and s.tool not in writers]

    def covers(where: str, name: str) -> bool:
        folder = where.strip("/").removeprefix("./")
        return folder in ("", ".") or writes_path(where, name) or name.startswith(folder + "/")
    return [n for n in to_read if not any(covers(w, n) for w in looked)]


def ungrounded_facts(
    goal: str, decision: AgentDecision | None, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult]
) -> tuple[str, list[str]]:
    """``(the answer step's id, its facts found in no tool output nor the goal)``; ``("", [])`` when
    the last plan does not end in one model step that succeeded."""
    judged = _judge(goal, decision, nodes, results)
    return (judged.step_id, judged.missing) if judged else ("", [])


def grounded_answer(
    goal: str, decision: AgentDecision | None, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult]
) -> tuple[str, list[str]]:
    """``(the answer step's id, its facts)`` when the last plan ran every step to success and its
    answer states checkable facts, every one found in the tool outputs it read or the goal, and
    at least one in a tool output;
    ``("", [])`` otherwise, and always for a count: a counting tool's number shows that something
    was counted, not that it was what the goal asked to count ("5 lines in sales.csv" answered
    "how many data rows, not counting the header"), so only the assessing model's own "done" ends
    a count.

    This is what lets a small assessment's "continue" over a finished, sourced answer be read as
    the "done" it is (``llm_planner``): nothing of the plan is left to continue.
    """
    judged = _judge(goal, decision, nodes, results)
    # at least one fact must come from a tool: one the goal itself states vouches for nothing
    if judged is None or judged.counts or judged.missing or not judged.read or decision is None:
        return "", []
    if echoed_goal(goal, decision, nodes, results):
        return "", []
    ok = {r.step_id for r in results if r.success}
    if not all(s.id in ok for s in decision.steps):
        return "", []
    return judged.step_id, judged.facts


def echoed_goal(
    goal: str, decision: AgentDecision | None, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult]
) -> str:
    """The id of a final answer step whose answer is nothing but words of the goal, or "".

    "Which module imports the requests library?" answered "requests": no fact to check, and a
    small assessment called it done. An answer that adds no word to the question answers nothing.
    Only a question's answers (final model steps, every one of them) are judged: content fed to a
    write may rightly repeat the goal ("write hello to X"). Glue words ("is", "the") do not make
    an echo an answer: "The module that imports requests is requests." is one too.
    """
    if decision is None:
        return ""
    needed = {d for s in decision.steps for d in s.depends_on}
    answers = [s.id for s in decision.steps if s.id not in needed and not (s.tool or s.tools or s.subagent)]
    outputs = {r.step_id: r.output for r in results if r.success}
    goal_words = set(_WORDS.findall(goal.lower())) | _GLUE
    said = [set(_WORDS.findall(outputs[sid].lower())) for sid in answers if sid in outputs]
    # every final answer the plan gave echoes the goal (a plan may end in several)
    if said and len(said) == len(answers) and all(words and words <= goal_words for words in said):
        return answers[0]
    return ""


_WORDS = re.compile(r"[^\W_]+")
_GLUE = frozenset(["a", "an", "the", "is", "are", "was", "it", "its", "this", "that", "of", "in", "to", "by", "from"])


class _Judged(NamedTuple):
    step_id: str
    facts: list[str]
    missing: list[str]
    counts: bool
    read: list[str]  # the facts a tool output holds (not only the goal)


def _judge(
    goal: str, decision: AgentDecision | None, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult]
) -> _Judged | None:
    if decision is None or not decision.steps:
        return None
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
        return None
    step = answer_steps[0]
    result = by_id.get(step.id)
    if result is None or not result.success:
        return None
    # only what fed the answer is a source: a write that runs after it echoes the answer's own text
    fed = ancestors({n.id: n.depends_on for n in nodes}, step.id)
    tool_ids = {n.id for n in nodes if (n.tool or n.tools) and n.id in fed}
    read = "\n".join(r.output for r in results if r.success and r.step_id in tool_ids)
    facts = answer_facts(result.output)
    count = is_count_task(step.description) or is_count_task(goal)
    # a count's number found somewhere in a tool's output proves nothing (a listing's total, a
    # date's day): a count task's whole numbers are grounded only by a counting tool's count
    qualified = _QUALIFIED.search(goal) or _QUALIFIED.search(step.description)
    counted = _counted(nodes, results, fed) if count and not qualified else set()
    in_read = {f for f in facts if _contains(read, f)}
    missing = [f for f in facts if (count and f.isdigit() and f not in counted) or not (f in in_read or _contains(goal, f))]
    return _Judged(step.id, facts, missing, count, [f for f in facts if f in in_read and f not in missing])


_COUNTED = re.compile(r"(\d+) ")
# a count with an exception is the tool's count minus something: the model's arithmetic
_QUALIFIED = re.compile(r"\b(?:not counting|excluding|except|without|other than|apart from|besides|minus|ignoring|"
                        r"but not|not including)\b", re.IGNORECASE)


def _counted(nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult], fed: set[str]) -> set[str]:
    """The numbers counted by the counting built-ins (``count_files``, ``count_lines``) among the
    steps in ``fed``: each answer starts with its count. "at least N" (a count stopped at its cap)
    grounds nothing."""
    tools = {n.id: n.tool for n in nodes}
    out = set()
    for r in results:
        if r.success and r.step_id in fed and tools.get(r.step_id) in COUNTING_TOOL_NAMES:
            m = _COUNTED.match(r.output)  # "at least N ..." does not match
            if m:
                out.add(m.group(1))
    return out


class Dropped(NamedTuple):
    """Lines a search found that an "every line" goal's delivery left out."""

    delivered_by: str  # the step whose text was checked
    search_ids: list[str]
    found: int  # distinct lines the searches found (a search run again finds the same lines)
    missing: list[str]  # "path:line: text" of each line left out, in the search's order
    holders: tuple[str, ...] = ()  # the searches that first found the lines left out
    path: str | None = None  # the file the delivery wrote, when it was a write

    def why(self) -> str:
        kept = self.found - len(self.missing)
        shown = "; ".join(repr(m) for m in self.missing[:3]) + (" ..." if len(self.missing) > 3 else "")
        holders = self.holders or self.search_ids
        whole = " and ".join(f"{s}'s output" for s in holders)
        return (f"the goal asks for every line, and {self.delivered_by} delivered {kept} of the {self.found} "
                f"lines {', '.join(self.search_ids)} found (left out: {shown}); {whole} itself holds them")

    def remedy(self, *, calls: bool) -> str:
        """The step that writes every line as found, in the plan's syntax ("" for a delivery that wrote no file).

        A 1.5B model told only that a search's output "holds every line" planned the same lossy
        answer step again or wrote a listing; shown this step, it wrote the search's output.
        """
        holders = self._to_write()
        if not holders:
            return ""
        if calls:
            content = holders[0] if len(holders) == 1 else 'f"' + "\\n".join("{" + h + "}" for h in holders) + '"'
            return f"{WRITE_TOOL_NAME}(path={json.dumps(self.path)}, content={content})"
        return json.dumps({"tool": WRITE_TOOL_NAME, "args": self._write_args(holders)})

    def remedy_step(self, taken: Collection[str]) -> StepAction | None:
        """``remedy``'s write as a typed step under an id not in ``taken`` (None with no file to write)."""
        holders = self._to_write()
        if not holders:
            return None
        n = 1
        while f"s{n}" in taken:
            n += 1
        args = self._write_args(holders)
        return StepAction(id=f"s{n}", description=f"{WRITE_TOOL_NAME} {json.dumps(args, ensure_ascii=False)}",
                          tool=WRITE_TOOL_NAME, args=args, depends_on=list(holders))

    def _to_write(self) -> list[str]:
        """The searches whose outputs the remedy writes (none when the delivery wrote no file)."""
        return list(self.holders or self.search_ids) if self.path is not None else []

    def _write_args(self, holders: Sequence[str]) -> dict[str, str]:
        assert self.path is not None
        return {"path": self.path, "content": "\n".join("{{" + h + ".output}}" for h in holders)}


# "every line containing", "all TODO lines", "each of the lines that": a universal over lines
_EVERY_LINE_GOAL = re.compile(r"\b(?:every|all|each)(?:\s+of)?(?:\s+the)?(?:\s+(?!files?\b)[\w'-]+)?\s+lines?\b", re.IGNORECASE)
_MATCH_LINE = re.compile(r"^(?P<where>[^\s:][^:\n]*:\d+): (?P<text>.*)$")
_SPACE = re.compile(r"\s+")
_LEAD = re.compile(r"^[\W_]+")


def _fold(text: str) -> str:
    return _SPACE.sub(" ", text).strip().casefold()


def _core(text: str, pattern: str) -> str:
    """What of a matched line must be delivered: the text after the searched word, else the line
    without its leading comment marks ("# TODO: reject empty notes" → "reject empty notes")."""
    folded = _fold(text)
    at = folded.find(_fold(pattern)) if pattern.strip() else -1
    if at >= 0:
        rest = _LEAD.sub("", folded[at + len(_fold(pattern)):])
        if rest:
            return rest
    return _LEAD.sub("", folded) or folded


def _delivered(step: PlanStep | StepAction, completed: Mapping[str, StepResult]) -> str | None:
    """The text ``step`` delivered: a model step's output, or a tool step's string arguments with
    their references resolved as the executor resolved them (``None`` when one cannot be)."""
    if not (step.tool or step.tools or step.subagent):
        result = completed.get(step.id)
        return result.output if result is not None else None
    try:
        args, _ = resolve_args(step.args or {}, completed)
    except BadReferenceError:
        return None
    return "\n".join(text for _where, text in arg_strings(args))


def checked_steps(
    state: LoopState, pm: PlanManager | None, capabilities: Sequence[Capability]
) -> tuple[Sequence[PlanStep | StepAction], list[StepResult], set[str] | None]:
    """What the checks read of a run: ``(its steps, their latest results, the tools that change
    things)``; the tools are ``None`` when none are declared (then no check may rest on them)."""
    results = pm.step_results() if pm is not None else latest_results(state.step_results)
    nodes = pm.nodes if pm is not None else (state.current_decision.steps if state.current_decision else [])
    return nodes, list(results), writing_tools(capabilities) if capabilities else None


class _Delivery(NamedTuple):
    """One final step of the last decision that delivers text, with the searches it is checked against."""

    final: PlanStep | StepAction
    searches: list[PlanStep | StepAction]
    text: str  # what it delivered (a write's content, references resolved; an answer)
    outputs: dict[str, str]  # completed steps' outputs by id


def _deliveries(
    goal: str, decision: AgentDecision | None, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult],
    writers: Collection[str] | None,
) -> list[_Delivery]:
    """For a goal that asks for every line of something: each final step of the last decision with
    the searches it is checked against (those upstream of it and, for a final model step or a final
    step of a tool in ``writers``, every finished search of the goal for a pattern the goal names)."""
    if decision is None or not decision.steps or not _EVERY_LINE_GOAL.search(goal):
        return []
    completed = {r.step_id: r for r in results if r.success}
    outputs = {i: r.output for i, r in completed.items()}
    by_id: dict[str, PlanStep | StepAction] = {s.id: s for s in decision.steps}
    by_id.update((n.id, n) for n in nodes)
    graph = {i: n.depends_on for i, n in by_id.items()}
    needed = {d for s in decision.steps for d in s.depends_on}
    def matched(i: str) -> bool:
        # a search that found no exact match lists the lines nearest its words: candidates, not matches
        return by_id[i].tool == SEARCH_TOOL_NAME and i in outputs and NEAREST_LINES_MARK not in outputs[i]

    # a search for a word of the goal counts wherever it sits in the plan: a delivery fed something
    # else (a listing) was seen written in its place, with the search beside it and not upstream
    named: list[str] = []
    if writers is not None:
        wanted = _fold(goal)
        for i, n in by_id.items():
            pattern = _fold(str((n.args or {}).get("pattern", "")))
            if matched(i) and pattern and not (n.args or {}).get("regex") and pattern in wanted:
                named.append(i)
    found = []
    for final in (s for s in decision.steps if s.id not in needed):
        delivers = writers is not None and (final.tool in writers or not (final.tool or final.tools or final.subagent))
        upstream = [i for i in sorted(ancestors(graph, final.id)) if i in by_id and matched(i)]
        ids = dict.fromkeys([*upstream, *(named if delivers else [])])
        text = _delivered(final, completed)
        if ids and text is not None:
            found.append(_Delivery(final, [by_id[i] for i in ids], text, outputs))
    return found


def _lines_left_out(d: _Delivery) -> tuple[int, list[str], list[str]]:
    """``(distinct lines the searches found, those the delivery left out, the searches that first found those)``."""
    haystack = _fold(d.text)
    seen: set[str] = set()
    missing: list[str] = []
    holders: dict[str, None] = {}
    for search in d.searches:
        args = search.args or {}
        pattern = "" if args.get("regex") else str(args.get("pattern", ""))
        for line in d.outputs[search.id].splitlines():
            m = _MATCH_LINE.match(line)
            if not m or _fold(line) in seen:
                continue
            seen.add(_fold(line))
            if _core(m.group("text"), pattern) not in haystack:
                missing.append(line.strip())
                holders[search.id] = None
    return len(seen), missing, list(holders)


def unrelayed_lines(
    goal: str, decision: AgentDecision | None, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult],
    writers: Collection[str] | None = None,
) -> Dropped | None:
    """For a goal that asks for every line of something: the lines a search step found that the
    plan's delivery left out (``Dropped``), or ``None`` when it delivered them all or nothing is
    checkable (no such goal, no search upstream of a delivery, a search that found no exact match).

    The delivery is each final step of the last decision: the text a final tool step was given
    (a write's content, its references resolved), or a final model step's answer. The searches are
    those upstream of it and, for a final model step or a final step of a tool in ``writers`` (the
    tools that change things), every finished search of the goal for a pattern the goal names.
    """
    for d in _deliveries(goal, decision, nodes, results, writers):
        found, missing, holders = _lines_left_out(d)
        if missing:
            path = (d.final.args or {}).get("path") if writers is not None and d.final.tool in writers else None
            return Dropped(d.final.id, [s.id for s in d.searches], found, missing, tuple(holders),
                           path if isinstance(path, str) else None)
    return None


def relayed_every_line(
    goal: str, decision: AgentDecision | None, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult],
    writers: Collection[str] | None, workspace: str | None = None,
) -> tuple[str, int] | None:
    """``(the write, the lines)`` when an "every line" goal's file holds every line its searches found, else None.

    The check vouches only where it saw the whole of what the goal asks: the final write is to a
    file the goal names; each search looked for a word of the goal, literally, over the whole
    workspace or a path the goal names, found at least one line and was not cut at its limit; and
    the write's content holds every line they found.
    """
    if writers is None:
        return None
    asked, wanted = files_to_write(goal, workspace, paths_written(nodes, writers)), _fold(goal)

    def whole(search: PlanStep | StepAction, output: str) -> bool:
        args = search.args or {}
        where = str(args.get("path", ".")).strip().strip("/") or "."
        pattern = _fold(str(args.get("pattern", "")))
        named = where == "." or re.search(rf"(?<![\w./-]){re.escape(where)}(?![\w-])", goal) is not None
        return (not args.get("regex") and bool(pattern) and pattern in wanted and named
                and SEARCH_STOPPED_MARK not in output)
    for d in _deliveries(goal, decision, nodes, results, writers):
        path = str((d.final.args or {}).get("path", ""))
        if d.final.tool not in writers or not any(writes_path(path, name) for name in asked):
            continue
        found, missing, _ = _lines_left_out(d)
        if found and not missing and all(whole(s, d.outputs[s.id]) for s in d.searches):
            return d.final.id, found
    return None
