"""What the checks make of an assessment: may a ``done`` stand, and is a ``continue`` really one?

One place where an assessment meets the checks, so the planner core reads as a general planner:

- Every model: a ``done`` whose deliverable is not delivered (``contract.unmet``: no file, a blank
  or changed file, a count no tool counted, a line the searches found left out) becomes ``replan``,
  the reasons written at the front of its summary (``guard_note``) where the next plan reads them.
- With the small-model rules (``small_model/``): a ``done`` over a fact no tool returned
  (``require_grounded_answer``), over an answer about something else than a value the goal names,
  over a file the goal names that no step looked in, over tool outputs with no answer step, over
  an echo of the goal's words, over facts read only from lines that share no word with the
  request (``small_model/support.py``), or over a file that carries lines found only in places the
  goal does not name (a list that may be cut short: "Produce REPORT.md listing the TODO lines"
  searched one module and wrote two of three), becomes ``replan`` too; and a ``continue`` over a finished plan whose
  deliverable is delivered and whose answer every tool output vouches for becomes ``done``. A count
  is never promoted (what a tool counted may not be what the goal asks, and only the assessing model,
  shown what was counted, can say so), nor is a file for carrying every line found (a model's
  "every match" and its choice of search were seen wrong together).
- With the small-model rules, a count no tool counted whose answer's numbers lines about the
  request state is held to the checks of an answer that is a number (``assessed_deliverable``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence

from soothe_planner.deliverable import Deliverable
from soothe_planner.models import (
    AgentDecision,
    Capability,
    PlanStep,
    StatusAssessment,
    StepAction,
    StepResult,
)
from soothe_planner.planner.contract import (
    answer_text,
    counts_found,
    lines_left_out,
    narrow_searches,
    read_back,
    unmet,
)
from soothe_planner.planner.small_model.crosscheck import delivered
from soothe_planner.planner.small_model.echo import echoed_goal
from soothe_planner.planner.small_model.grounding import (
    gave_no_answer,
    grounded_answer,
    guard_note,
    off_subject,
    parts_left_unanswered,
    states_nothing_read,
    ungrounded_facts,
    unread_files,
    wrong_kind,
)
from soothe_planner.planner.small_model.reading import unread_hits
from soothe_planner.planner.small_model.support import (
    common_words,
    other_sibling,
    stated_count,
    unsupported_facts,
    unsupported_parts,
    workspace_words,
)

__all__ = ["assessed_deliverable", "guard_assessment"]

logger = logging.getLogger(__name__)


def assessed_deliverable(
    goal: str,
    deliverable: Deliverable | None,
    decision: AgentDecision | None,
    nodes: Sequence[PlanStep | StepAction],
    results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None,
    workspace: str | None,
    *,
    small_model: bool,
) -> Deliverable | None:
    """The deliverable an assessment is held to: the declared one, except, with the small-model rules,
    a count that no tool counted and whose answer's numbers lines about the request state, which is
    held to the checks of an answer that is a number (``support.stated_count``: a total written down
    is no count, and a small model declares one anyway)."""
    if not small_model or deliverable is None or deliverable.kind != "count":
        return deliverable
    read = stated_count(goal, deliverable, answer_text(decision, results), nodes, results, capabilities,
                        common_words(workspace), workspace_words(workspace))
    if read is None:
        return deliverable
    logger.info("plan-assess: no tool counted, and every number the answer states is stated by a line about the "
                "request: the count is held to the checks of an answer that is a number")
    return read


def guard_assessment(
    goal: str,
    a: StatusAssessment,
    deliverable: Deliverable | None,
    decision: AgentDecision | None,
    nodes: Sequence[PlanStep | StepAction],
    results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None,
    workspace: str | None,
    *,
    plan_finished: bool,
    small_model: bool,
    grounded: bool,
) -> tuple[StatusAssessment, str]:
    """``(the assessment as the checks leave it, why it changed or "")`` (see the module docstring)."""
    reasons = unmet(deliverable, decision, nodes, results, capabilities, workspace, goal)
    if small_model:
        unread = unread_files(goal, nodes, results, capabilities, workspace, deliverable)
        if unread:
            reasons.append(f"the goal names {', '.join(unread)}, and no completed step looked in it")
        hits = unread_hits(deliverable, decision, nodes, results, capabilities)
        if hits:
            reasons.append(f"the answer rests on search lines, and no step read {', '.join(hits)}, where they were "
                           "found: read the file, then answer from it")
        given = delivered(deliverable, decision, results, workspace) if deliverable is not None else ""
        common = common_words(workspace)
        if deliverable is not None and _list_from_one_place(goal, deliverable, given, nodes, results, workspace):
            reasons.append(f"{', '.join(deliverable.files)} carries lines found only in "
                           f"{', '.join(repr(p) for p in narrow_searches(goal, results))}, a place the goal does not "
                           "name: the list may be cut short; search '.' (the whole workspace) or the path the goal names")
        # the answer's checks hold for a "done" and for a "continue" read as one alike
        if a.status in ("done", "continue"):
            reasons += _answer_reasons(goal, deliverable, decision, nodes, results, grounded=grounded, common=common)
            if grounded and not reasons:
                facts, lines = unsupported_facts(goal, deliverable, given, nodes, results, capabilities, common,
                                                 workspace_words(workspace))
                if facts:
                    reasons.append(
                        f"{', '.join(repr(f) for f in facts[:3])} (what was delivered) comes from lines that share no word with "
                        f"the request ({'; '.join(repr(x[:80]) for x in lines[:2])}): they are about something else; find "
                        "the line that states what the goal asks, or answer that the workspace does not say")
                else:
                    parts = unsupported_parts(goal, deliverable, given, nodes, results, capabilities, common)
                    if parts:
                        reasons.append(
                            f"no fact of what was delivered comes from a line about {'; '.join(repr(p) for p in parts[:3])}: "
                            "find the line that states it, or say that the workspace does not")
                    other = other_sibling(goal, deliverable, given, nodes, results, capabilities, workspace, common)
                    if other is not None:
                        reasons.append(
                            f"{', '.join(repr(f) for f in other[0][:3])} (what was delivered) comes only from {other[1]}, "
                            f"and the goal names {other[2]} beside it, not {other[1]}: answer from {other[2]}, or "
                            "answer that it does not say")
    if a.status == "done":
        if not reasons:
            return a, ""
        why = "; ".join(reasons)
        update = {"status": "replan", "goal_progress": min(a.goal_progress, 0.5), "summary": guard_note(why, a.summary)}
        return a.model_copy(update=update), f"'done' turned into 'replan': {why}"
    if a.status != "continue" or not plan_finished or reasons or not small_model or deliverable is None \
            or deliverable.kind == "count" or not grounded:
        return a, ""
    why = _every_line_written(goal, deliverable, nodes, results, workspace)
    if not why and deliverable.every_match:
        return a, ""  # a list's facts may each be found and the list still short: only every line written vouches
    if not why:
        step_id, facts = grounded_answer(goal, decision, nodes, results)
        if not step_id:
            return a, ""
        why = (f"the plan ran to its end; {step_id} answers with {', '.join(repr(f) for f in facts[:5])}, "
               "each from a tool output")
    update = {"status": "done", "goal_progress": 1.0, "summary": guard_note(why, a.summary)}
    return a.model_copy(update=update), f"'continue' turned into 'done': {why}"


def _answer_reasons(
    goal: str, deliverable: Deliverable | None, decision: AgentDecision | None,
    nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult], *, grounded: bool,
    common: Collection[str] | None = None,
) -> list[str]:
    """Why a small model's answer (or the text written for a file) does not end the goal ([] if nothing)."""
    kind = deliverable.kind if deliverable is not None else None
    if kind == "answer" and gave_no_answer(decision, results):
        return ["the last plan ends in tool outputs, not in an answer step: end it with an answer step that "
                "answers the goal from them"]
    if kind == "answer" and echoed_goal(goal, decision, results):
        return ["the answer only repeats words of the goal"]
    if not grounded:
        return []
    reasons = []
    step_id, missing = ungrounded_facts(goal, decision, nodes, results)
    if missing and kind == "count":
        # a search of one file that listed every line holding its pattern counted them, though no
        # output writes the number: "3" for three rows listed is grounded by that count
        made = {str(n) for _, n, _ in counts_found(nodes, results, None)}
        missing = [f for f in missing if f not in made]
    if missing:
        reasons.append(f"the answer in {step_id} states {', '.join(repr(f) for f in missing[:5])}, found in no tool "
                       "output")
    unseen, added = off_subject(goal, decision, nodes, results, common)
    if unseen:
        reasons.append(f"the goal names {', '.join(repr(v) for v in unseen[:3])}, which no tool output holds, yet "
                       f"the answer states {', '.join(repr(f) for f in added[:3])}: it is about something else; if "
                       "the workspace lacks it, the answer says so")
    if kind == "answer" and states_nothing_read(goal, decision, nodes, results):
        reasons.append("the answer states nothing a tool returned (no name, number, path or quoted text of the "
                       "evidence): answer with what the outputs say")
    lacking = wrong_kind(deliverable, decision, results)
    if lacking:
        reasons.append(f"the goal asks for {lacking}, and the answer states none")
    gap = parts_left_unanswered(goal, deliverable, decision, nodes, results)
    if gap[0] and deliverable is not None:
        reasons.append(f"the goal asks for {gap[0]} things ({'; '.join(deliverable.parts)}), and the answer states "
                       f"{gap[1]} fact{'' if gap[1] == 1 else 's'} of the evidence: give each one")
    return reasons


def _list_from_one_place(
    goal: str, deliverable: Deliverable, text: str, nodes: Sequence[PlanStep | StepAction],
    results: Sequence[StepResult], workspace: str | None,
) -> bool:
    """Whether a file deliverable (``text``: its files as they are on disk) carries two or more lines
    the searches found while the searches looked only in places the goal does not name: a list that
    may be cut short, however right each line ("Produce REPORT.md listing the TODO lines" searched
    one module and wrote two of three)."""
    if deliverable.kind != "file" or deliverable.every_match or workspace is None or not narrow_searches(goal, results):
        return False  # a file of every match is held to the searches' reach by the contract already (``unmet``)
    found, missing, _ = lines_left_out(text, nodes, results)
    return found - len(missing) >= 2


def _every_line_written(
    goal: str, deliverable: Deliverable, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult],
    workspace: str | None,
) -> str:
    """Why a file that must carry every match is done, or "": it holds every line the searches found,
    the searches looked literally for text the goal writes out, whole (not cut, over the workspace or
    a path the goal names), and found two lines or more. A single line found is no evidence that a
    list was asked for: a model's "every match" and a search for a heading were seen wrong together,
    and the one line written whole would have been read as done."""
    if deliverable.kind != "file" or not deliverable.every_match or workspace is None:
        return ""
    searches = [r for r in results if r.success and isinstance(r.outcome.get("lines"), list)]
    folded = goal.casefold()
    if not searches or any(r.outcome.get("regex") or r.outcome.get("complete") is False
                           or not str(r.outcome.get("pattern") or "").strip()
                           or str(r.outcome.get("pattern") or "").strip().casefold() not in folded for r in searches):
        return ""
    text = "\n".join(read_back(workspace, f) or "" for f in deliverable.files)
    found, missing, _ = lines_left_out(text, nodes, results)
    if found < 2 or missing:  # the caller checked the rest of the contract (``unmet``) already
        return ""
    return f"the plan ran to its end and {', '.join(deliverable.files)} holds every one of the {found} lines found"
