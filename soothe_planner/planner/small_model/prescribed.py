"""When every plan a small model writes is refused, can the planner write the steps that mend it?

For a file that must carry every line a search found, the check knows which search's output holds
the lines a write left out (``grounding.Dropped``), and the re-plan prompt shows the model that
write. A 1.5B model was seen to write the refused plan again on every re-ask instead, and the run
failed with the lines in hand. The planner then plans the write itself: the search's output
verbatim, to the file the earlier write wrote; the assessment still judges the result. Only with
the small-model rules (the caller's switch), never after a transport failure (the model was not
heard: not a refusal, and the run should say so), and only when the step passes every rule a
model's plan must pass.

The reading (``prescribed_reading``): after an answer from a search's lines was refused (its facts
not found, not confirmed by the second reading, or about something else), a 1.5B model planned the
same search and the same answer step on every re-ask, each refused as a repeat, and the goal failed
with the files that hold the answer named in the search's own output. A search line is a line; the
answer is often in the lines around it. The planner then plans what a careful reader would do next:
read the files the searches found and no step has read (the first three, in the order found), with
the offered tool that reads one file by its path, and answer from every file read (and, for a file
deliverable, write that answer with the built-in write). When every file found was read already,
the answer from all of them is the whole plan: a model that wrote a search's heading line where the
command below it was asked, with the file read in hand, is given the file to answer from. It is
planned only from the run's own results, never from the goal's words, and never twice: the same
answer over the same inputs is refused as a repeat, like any plan.

The count's answer (``prescribed_count``): a 1.5B model asked how many rows of a CSV hold a value
searched the file (every row holding it, listed: a count) and counted lines with a phrase of the
request that no row holds (0), with no answer step; its three plans after that were the same two
steps, each refused as a repeat, and the goal failed in six calls with the count made. The planner
then plans the answer the plans lacked: one answer step over every count the run made (a counting
tool's, or a search of one file that listed every line it found), told to give the number counted
if it counted what the request asks for. Which count answers is the model's reading; the count
contract, the assessment and the second reading judge it as any answer.

The widening (``prescribed_widening``): a 1.5B model that searched a folder that does not exist
planned the same failing call on every re-ask, each refused as a repeat of a failed call; another
searched one file that does not hold the word, and planned that search again; a third, asked for
every matching line of the code, searched one module, and its plans, each refused as looking only
in a place the goal does not name, searched that module again or read it (reading is no cure
there: the lines asked for are in other files, so for such a deliverable the widening is tried
before the reading). Where the tool's
``path`` is optional (its schema does not require it), the planner plans the same call over the
whole workspace, then an answer from it (and the write, for a file). Nothing is read from the
error's text: the call failed, or found no line, with a path, and the tool can run without one.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Collection, Mapping, Sequence

from soothe_planner.dag import free_step_id
from soothe_planner.deliverable import Deliverable
from soothe_planner.errors import PlanGenerationError
from soothe_planner.models import AgentDecision, Capability, PlanStep, StepAction, StepResult
from soothe_planner.planner.contract import counts_found, mentions, path_key
from soothe_planner.planner.generation import Generated
from soothe_planner.planner.small_model.grounding import dropped_lines
from soothe_planner.planner.small_model.reading import READ_AT_MOST, reader_of, searched
from soothe_planner.tools import WRITE_TOOL_NAME

__all__ = ["prescribed_count", "prescribed_reading", "prescribed_widening", "prescribed_write"]


logger = logging.getLogger("soothe_planner.planner")


def _refused(exc: PlanGenerationError) -> bool:
    """Whether the model was heard and refused: after a transport failure it was not, and the run says so."""
    return not any(a.error_type == "transport" for a in exc.attempts)


def _sought(
    deliverable: Deliverable | None, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None,
) -> list[str]:
    """The deliverable's files that the run looked for as a source and did not find: a read-only
    call with that path failed, or a model step failed for data it lacked (``missing_data``) naming
    the file. The planner writes no such file on its own: "Summarise the changes in CHANGELOG.md",
    the file missing, was declared a file to write; its answer step failed naming CHANGELOG.md as
    what it lacked, the model's plans were refused, and the prescribed widening's answer-and-write
    made a CHANGELOG.md nobody asked for. A model's own plan may still write it (it may be asked to
    create what it first looked for)."""
    if deliverable is None or deliverable.kind != "file":
        return []
    failed = {r.step_id: r for r in results if not r.success}
    out = []
    for n in nodes:
        r = failed.get(n.id)
        if r is None:
            continue
        cap = (capabilities or {}).get(n.tool or "")
        if cap is not None and cap.read_only and not cap.writes_path_arg:
            looked = [path_key((n.args or {}).get("path"))]
        elif r.error_type == "missing_data":
            looked = [f for f in deliverable.files if mentions(r.error or "", f)]
        else:
            looked = []
        out += [f for f in looked if f in deliverable.files and f not in out]
    return out


def _prescribed(
    exc: PlanGenerationError, steps: list[StepAction], next_action: str, validate: Callable[[Generated], list[str]],
    what: str,
) -> Generated | None:
    """``steps`` as the plan the planner prescribes, told in its warning and the log, or None when the
    plan rules refuse it too (a prescription passes every rule a model's plan must pass)."""
    gen = Generated("new", AgentDecision(steps=steps), next_action=next_action, warnings=[
        f"{exc.phase}: every plan the model wrote was refused ({len(exc.attempts)} attempts); {what}"])
    if validate(gen):
        return None
    logger.warning("%s: every plan refused; %s", exc.phase, what)
    return gen


def prescribed_write(
    deliverable: Deliverable | None,
    nodes: Sequence[PlanStep | StepAction],
    results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None,
    validate: Callable[[Generated], list[str]],
    exc: PlanGenerationError,
) -> Generated | None:
    """The write the delivery check prescribes, as a one-step plan, or None (see the module docstring)."""
    if not _refused(exc) or _sought(deliverable, nodes, results, capabilities):
        return None
    dropped = dropped_lines(deliverable, nodes, results, capabilities)
    if dropped is None:
        return None
    step = dropped.remedy_step({n.id for n in nodes})
    return _prescribed(exc, [step], step.description, validate,
                       f"the planner wrote the search's output to {dropped.path} itself ({step.id}), as the delivery "
                       f"check prescribes: {dropped.why()}")


def prescribed_reading(
    deliverable: Deliverable | None,
    nodes: Sequence[PlanStep | StepAction],
    results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None,
    validate: Callable[[Generated], list[str]],
    exc: PlanGenerationError,
) -> Generated | None:
    """Read the files the searches found, then answer (and write), as a plan; or None (see the module docstring)."""
    if deliverable is None or deliverable.kind == "count" or not _refused(exc) \
            or _sought(deliverable, nodes, results, capabilities):
        return None
    reader = reader_of(capabilities)
    if reader is None:
        return None
    seen = searched(nodes, results, reader)
    files = [f for f in seen.found if f not in seen.read][:READ_AT_MOST]
    searches, earlier = seen.searches, seen.reads
    if not files and not earlier:
        return None
    ids = _Ids({n.id for n in nodes})
    new_reads = [StepAction(id=ids.next(), description=f"{reader} {path}", tool=reader, args={"path": path})
                 for path in files]
    steps = _answered(new_reads, [*searches, *earlier, *(s.id for s in new_reads)], deliverable, capabilities, ids,
                      "answer the request from what these files say")
    if steps is None:
        return None
    return _prescribed(exc, steps, steps[-1].description, validate,
                       f"the planner planned the reading itself: {', '.join(files) or 'nothing new'} read, then an "
                       "answer from every file read")


class _Ids:
    """Step ids not yet taken, ``s1`` upwards."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = set(taken)

    def next(self) -> str:
        sid = free_step_id(self.taken)
        self.taken.add(sid)
        return sid


def _answered(
    steps: list[StepAction], sources: list[str], deliverable: Deliverable,
    capabilities: Mapping[str, Capability] | None, ids: _Ids, task: str, *, write_whole: bool = False,
) -> list[StepAction] | None:
    """``steps`` then an answer step over ``sources`` (and, for one file, its write with the built-in
    write tool); None when the file cannot be written so. ``write_whole``: a file that must carry
    every match gets the one source's output written whole, with no answer step to cut it short."""
    answer = StepAction(id=ids.next(), description=task, depends_on=list(dict.fromkeys(sources)))
    if write_whole and deliverable.kind == "file" and len(sources) == 1:
        answer = next(s for s in steps if s.id == sources[0])
        out = list(steps)
    else:
        out = [*steps, answer]
    if deliverable.kind == "file":
        write = (capabilities or {}).get(WRITE_TOOL_NAME)
        if write is None or write.writes_path_arg != "path" or len(deliverable.files) != 1:
            return None
        target = deliverable.files[0]
        out.append(StepAction(id=ids.next(), description=f"{WRITE_TOOL_NAME} {target}", tool=WRITE_TOOL_NAME,
                              args={"path": target, "content": "{{" + answer.id + ".output}}"}, depends_on=[answer.id]))
    return out


def prescribed_widening(
    deliverable: Deliverable | None,
    nodes: Sequence[PlanStep | StepAction],
    results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None,
    validate: Callable[[Generated], list[str]],
    exc: PlanGenerationError,
    *,
    narrow: Collection[str] = (),
) -> Generated | None:
    """The last failed call with an optional ``path``, run over the whole workspace, then an answer; or None.

    ``narrow``: the paths searched when a deliverable of every match was refused for its searches
    looking only there (``contract.narrow_searches``); a search of one of them that found lines is
    widened too."""
    if deliverable is None or not _refused(exc) or _sought(deliverable, nodes, results, capabilities):
        return None
    # a call that failed, or a search that found nothing where it looked: either may find it elsewhere
    missed = {r.step_id for r in results
              if not r.success or (isinstance(r.outcome.get("lines"), list) and not r.outcome["lines"])}
    narrowed: set[str] = set()
    if narrow and deliverable.every_match:
        places = {path_key(p) for p in narrow}
        by_id = {n.id: n for n in nodes}
        narrowed = {r.step_id for r in results if r.success and r.step_id in by_id and r.outcome.get("lines")
                    and path_key(str((by_id[r.step_id].args or {}).get("path") or ".")) in places}
        missed |= narrowed
    for node in reversed(list(nodes)):
        cap = (capabilities or {}).get(node.tool or "")
        args = dict(node.args or {})
        if node.id not in missed or cap is None or "path" not in args \
                or path_key(args.get("path")) in ("", "."):
            continue
        schema = cap.args_schema or {}
        if "path" not in (schema.get("properties") or {}) or "path" in (schema.get("required") or []) \
                or cap.writes_path_arg:
            continue
        args.pop("path")
        if not args:
            continue  # a listing of everything is no widening of what was looked for
        ids = _Ids({n.id for n in nodes})
        wide = StepAction(id=ids.next(), description=f"{node.tool} {json.dumps(args, ensure_ascii=False)}",
                          tool=node.tool, args=args)
        task = "answer the request from what this found" if deliverable.kind != "count" else \
            "give the number this counted, if it counted what the request asks for"
        steps = _answered([wide], [wide.id], deliverable, capabilities, ids, task,
                          write_whole=deliverable.every_match and not cap.counts)
        if steps is None:
            return None
        why = "found lines only" if node.id in narrowed else "failed or found nothing"
        return _prescribed(exc, steps, wide.description, validate,
                           f"{node.id} {why} with path {node.args.get('path')!r}; the planner ran it over "
                           f"the whole workspace ({wide.id})")
    return None


def prescribed_count(
    deliverable: Deliverable | None,
    nodes: Sequence[PlanStep | StepAction],
    results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None,
    validate: Callable[[Generated], list[str]],
    exc: PlanGenerationError,
) -> Generated | None:
    """An answer over every count the run made, as a plan; or None (see the module docstring)."""
    if deliverable is None or deliverable.kind != "count" or not _refused(exc):
        return None
    sources = list(dict.fromkeys(sid for sid, _, _ in counts_found(nodes, results, capabilities)))
    if not sources:
        return None
    ids = _Ids({n.id for n in nodes})
    steps = _answered([], sources, deliverable, capabilities, ids,
                      "give the number counted, from the count that counted what the request asks for")
    if steps is None:
        return None
    return _prescribed(exc, steps, steps[-1].description, validate,
                       f"the planner planned the count's answer itself: an answer from what {', '.join(sources)} counted")
