"""May the run say ``done``? What the deliverable requires, checked against what verifiably happened.

Each check reads the goal's deliverable (``soothe_planner.deliverable``), the steps' recorded
results as data (``evidence``) and the workspace as it is now. A failed check is a reason: the
assessment's ``done`` becomes ``replan`` and the reason is shown to the next plan, never a silent
pass. They hold for every model (the small-model rules add more, ``planner/small_model/``):

- **A file** the deliverable names is done only when a completed step of a writing tool wrote it,
  the file is on disk, not blank, still holds what that write wrote (a later write or another
  process did not change it), and the write carried what the steps it depends on returned: a write
  that depends on a step but whose text refers to none of the plan's outputs wrote words of the
  plan's own, not the data it waited for.
- **A count** is done only when the answer states a number that a counting tool counted (its
  result's ``count``; a count stopped at a cap grounds nothing), or the number of lines a search
  of one file found when it reports every line holding its pattern. What the tool counted is in its
  result (``counted``), shown to the assessment beside the number, so the model judges whether it
  counted what the goal asks.
- **Every match** (``every_match``): the delivery carries each line the run's searches found.
- **What it must hold** (``holds``, from a caller): each string is in the delivered text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from soothe_planner.dag import REFERENCE_RE, parse_token
from soothe_planner.deliverable import Deliverable
from soothe_planner.models import AgentDecision, Capability, PlanStep, StepAction, StepResult
from soothe_planner.planner.contract.declare import mentions
from soothe_planner.planner.contract.evidence import (
    LINE_LABEL,
    WHOLE_NUMBER,
    counted,
    delivered_text,
    found_lines,
    is_model_step,
    path_key,
    read_back,
    writes_of,
)

__all__ = ["answer_text", "count_problems", "counts_found", "final_outputs", "fold", "lines_left_out", "narrow_searches",
           "unmet"]

Step = PlanStep | StepAction
_SPACE = re.compile(r"\s+")
_LEAD = re.compile(r"^[\W_]+")


def fold(text: str) -> str:
    """Text as the checks compare it: case and runs of white space aside."""
    return _SPACE.sub(" ", text).strip().casefold()


def final_outputs(
    decision: AgentDecision | None, results: Sequence[StepResult], *, model_steps_only: bool
) -> list[str]:
    """The outputs of the last decision's final steps that succeeded (with ``model_steps_only``,
    of its final model steps: its answers), in plan order."""
    if decision is None:
        return []
    needed = {d for s in decision.steps for d in s.depends_on}
    ok = {r.step_id: r.output for r in results if r.success}
    return [ok[s.id] for s in decision.steps
            if s.id not in needed and s.id in ok and (is_model_step(s) or not model_steps_only)]


def answer_text(decision: AgentDecision | None, results: Sequence[StepResult]) -> str:
    """What the last decision answered: its final model steps' outputs, else its final steps' outputs."""
    answers = final_outputs(decision, results, model_steps_only=True)
    return "\n".join(answers or final_outputs(decision, results, model_steps_only=False))


def counts_found(
    nodes: Sequence[Step], results: Sequence[StepResult], capabilities: Mapping[str, Capability] | None
) -> list[tuple[str, int, str]]:
    """``(step id, count, what it counted)`` for each count made in the run: a counting tool's, or a
    search's of one file that reported every line holding its pattern (``lines``, ``exact`` and
    ``complete``, every line from the file it searched): the rows it lists are what a count of
    "cruiser berths in berths_seed.csv" counts. A search over a folder is no count: its lines are
    not the files, or the entries, a count over a folder asks for ("how many Go files?" is not the
    number of lines holding ".go"), nor is one line found (a search for a setting's name finds
    its one line: "port = 8443" counted 1, and a run asked for the port ended done on an answer
    that listed the port and that 1). The assessment and the second reading are shown what each
    one counted, as for any count."""
    tools = {n.id: n.tool for n in nodes}
    out = []
    for r in results:
        cap = (capabilities or {}).get(tools.get(r.step_id) or "")
        n = counted(r, cap)
        if n is not None:
            out.append((r.step_id, n, str(r.outcome.get("counted") or "")))
            continue
        lines = found_lines(r)
        where = path_key(r.outcome.get("path"))
        if lines is not None and len(lines) >= 2 and r.outcome.get("complete") is True and _all_in(lines, where):
            out.append((r.step_id, len(lines), f"lines of {where} holding {r.outcome.get('pattern')!r}"))
    return out


def _all_in(lines: Sequence[str], path: str) -> bool:
    """Whether every search line is labelled with ``path`` itself (the search looked in one file)."""
    if not path or path == ".":
        return False
    for line in lines:
        m = LINE_LABEL.match(line)
        if m is None or path_key(m.group("path")) != path:
            return False
    return True


def count_problems(
    answer: str, nodes: Sequence[Step], results: Sequence[StepResult], capabilities: Mapping[str, Capability] | None
) -> list[str]:
    """Why a count's answer is not grounded by a counting tool ([] when it is)."""
    counts = counts_found(nodes, results, capabilities)
    stated = {int(m.group(0)) for m in WHOLE_NUMBER.finditer(answer)}
    if any(n in stated for _, n, _ in counts):
        return []
    if not counts:
        return ["the goal's deliverable is a count, and no counting tool counted anything (a number a model "
                "wrote is not a count): count with a tool that counts"]
    seen = "; ".join(f"{sid} counted {n}" + (f" ({what})" if what else "") for sid, n, what in counts[-3:])
    return [f"the goal's deliverable is a count, and the answer states none of the numbers the counting tools "
            f"returned ({seen})"]


def _references(text: str, known: Mapping[str, Step]) -> set[str]:
    """The step ids ``text`` refers to (``{{s1.output}}``)."""
    return {parse_token(m.group(1), known)[0] for m in REFERENCE_RE.finditer(text)}


def lines_left_out(delivered: str, nodes: Sequence[Step], results: Sequence[StepResult]) -> tuple[int, list[str], list[str]]:
    """``(distinct lines the run's searches found, those ``delivered`` leaves out, the searches that found those)``.

    A line counts as delivered when its text after the searched pattern (or, failing that, the line
    without its leading marks) is in the delivered text, case and spacing aside: a reformatted list
    passes, a dropped or reworded line does not."""
    haystack = fold(delivered)
    by_id = {n.id: n for n in nodes}
    seen: set[str] = set()
    missing: list[str] = []
    holders: dict[str, None] = {}
    for r in results:
        lines = found_lines(r)
        if not lines:
            continue
        step = by_id.get(r.step_id)
        args = step.args if step is not None else {}
        pattern = "" if args.get("regex") else str(r.outcome.get("pattern") or args.get("pattern") or "")
        for line in lines:
            m = LINE_LABEL.match(line)
            text = line[m.end():] if m else line
            if fold(line) in seen:
                continue
            seen.add(fold(line))
            if _core(text, pattern) not in haystack:
                missing.append(line.strip())
                holders[r.step_id] = None
    return len(seen), missing, list(holders)


def _core(text: str, pattern: str) -> str:
    folded = fold(text)
    at = folded.find(fold(pattern)) if pattern.strip() else -1
    if at >= 0:
        rest = _LEAD.sub("", folded[at + len(fold(pattern)):])
        if rest:
            return rest
    return _LEAD.sub("", folded) or folded


def _shown(missing: list[str]) -> str:
    return "; ".join(repr(m) for m in missing[:3]) + (" ..." if len(missing) > 3 else "")


def unmet(
    deliverable: Deliverable | None,
    decision: AgentDecision | None,
    nodes: Sequence[Step],
    results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None,
    workspace: str | None,
    goal: str = "",
) -> list[str]:
    """Why the deliverable is not yet delivered ([] when every check passes, or there is no deliverable).

    ``goal``: for ``every_match``, the lines found are all the lines only when a search covered the
    whole workspace or a path the goal writes out (a search of one file found one FIXME of four)."""
    if deliverable is None:
        return []
    completed = {r.step_id: r for r in results if r.success}
    by_id: dict[str, Step] = {n.id: n for n in nodes}
    if decision is not None:
        by_id.update((s.id, s) for s in decision.steps if s.id not in by_id)
    problems: list[str] = []
    delivered: list[str] = []
    if deliverable.kind == "file":
        writes = writes_of(list(by_id.values()), results, capabilities)
        for name in deliverable.files:
            mine = [w for w in writes if w.path == name]
            if not mine:
                problems.append(f"the goal's deliverable is the file {name}, and no completed step wrote it")
                continue
            last = mine[-1]
            step = by_id[last.step_id]
            on_disk = read_back(workspace, name) if workspace else None
            wrote = _content_of(step, completed, capabilities) or delivered_text(step, completed)
            if workspace and on_disk is None:
                problems.append(f"{last.step_id} wrote {name}, but there is no such file in the workspace")
                continue
            text = on_disk if on_disk is not None else (wrote or "")
            if not text.strip() or last.result.outcome.get("blank") is True:
                problems.append(f"{name} holds nothing but white space ({last.step_id} wrote blank text)")
                continue
            if on_disk is not None and wrote is not None and fold(wrote) not in fold(on_disk):
                problems.append(f"{name} no longer holds what {last.step_id} wrote: something changed it afterwards")
                continue
            used = _references(" ".join(str(v) for v in step.args.values()), by_id)
            waited = [d for d in step.depends_on if d in completed and completed[d].output.strip()]
            if waited and not used & set(waited):
                problems.append(f"{last.step_id} wrote {name} with text of the plan's own: it waits for "
                                f"{', '.join(waited)} but writes none of their outputs (refer to them: content=..."
                                f"{{{{{waited[-1]}.output}}}})")
                continue
            delivered.append(text)
    else:
        answer = answer_text(decision, results)
        if not answer.strip():
            problems.append(f"the goal's deliverable is {deliverable.describe()}, and the last plan gave no answer")
        else:
            delivered.append(answer)
            if deliverable.kind == "count":
                problems += count_problems(answer, list(by_id.values()), results, capabilities)
    if problems or not delivered:
        return problems
    whole = "\n".join(delivered)
    for h in deliverable.holds:
        if fold(h) not in fold(whole):
            problems.append(f"the delivered text does not hold {h!r}, which the goal's deliverable requires")
    if deliverable.every_match:
        narrow = narrow_searches(goal, results)
        if narrow:
            problems.append(f"the deliverable must carry every matching line, and the searches looked only in "
                            f"{', '.join(repr(p) for p in narrow)}: search '.' (the whole workspace) or the path "
                            "the goal names")
        found, missing, holders = lines_left_out(whole, list(by_id.values()), results)
        if missing:
            problems.append(f"the deliverable must carry every line the searches found, and it carries {found - len(missing)} "
                            f"of {found} (left out: {_shown(missing)}); {' and '.join(holders)}'s output holds them")
    return problems


def _content_of(step: Step, completed: Mapping[str, StepResult], capabilities: Mapping[str, Capability] | None) -> str | None:
    """The text a write step wrote: the argument that is not its path, references resolved."""
    cap = (capabilities or {}).get(step.tool or "")
    if cap is None or not cap.writes_path_arg:
        return None
    rest = {k: v for k, v in step.args.items() if k != cap.writes_path_arg}
    other = step.model_copy(update={"args": rest})
    return delivered_text(other, completed)


def narrow_searches(goal: str, results: Sequence[StepResult]) -> list[str]:
    """The paths searched, when no search that found lines covered the whole workspace or a path
    ``goal`` writes out ([] when one did, or no search reported its lines)."""
    paths = [str(r.outcome.get("path") or ".").strip().strip("/") or "." for r in results
             if r.success and isinstance(r.outcome.get("lines"), list) and r.outcome.get("exact") is not False]
    if not paths or any(p == "." or (goal and mentions(goal, p)) for p in paths):
        return []
    return list(dict.fromkeys(paths))
