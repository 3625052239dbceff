"""What a small model's plan must hold beyond the DAG's own rules (the compact prompt profile).

The DAG validator (``dag/``) judges any plan: ids, dependencies, references, arguments. These
rules judge what a plan is *for*, and apply only under the compact profile, where the planner is
a small model that was seen to break them on real goals: a plan that only reads, re-planned every
iteration without ever answering; a question answered by writing over the file just read; and an
answer that found its data lacking, asked again of the same data every iteration.
Each returns the re-ask's words, so the model is told exactly what to change. One change holds under
every profile, for it guards against chance, not a model's habit: a plan's writes of one file run
in the plan's order (``order_writes``).

One rule is also a guard on the assessment (``grounding``): a goal that asks for a named file to be
written is not done until a step that changes things wrote it (``unwritten_files``). A 1.5B model
planned the README's goal ("... write those lines to TODO_REPORT.md") as a search and an answer
that listed the lines, and the answer, every fact of it from the search, was taken as the goal done
with no report on disk.

A goal may also name the file with "in": "Summarise the TODO lines by file in TODO_SUMMARY.md".
"in" names files to read as often ("Summarise the TODO lines in src/app.py"), so that reading is
taken only with the workspace at hand, for a name no file of it has (or one the run's own steps
write); a 1.5B planned the first goal as a search and an answer, with no report written.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence

from soothe_planner.dag import REFERENCE_RE, call_key, map_arg_strings, parse_token
from soothe_planner.models import AgentDecision, Capability, PlanStep, StepAction
from soothe_planner.tools import WRITE_TOOL_NAME, workspace_files, wrote_blank

__all__ = ["FILE_NAME", "answers_meant_as_writes", "ends_in_gathering", "files_to_write", "finished_steps",
           "never_writes_asked_file", "order_writes", "path_key", "paths_written", "repeats_finished_work",
           "retries_missing_data", "unwritten_files", "workspace_listing", "write_owed", "writes_not_asked_for",
           "writes_path", "writing_tools"]

_WRITE_VERB = re.compile(r"\b(?:write|save|store|put|copy|record|export|create|append)\b", re.IGNORECASE)
_TARGET = re.compile(
    r"\b(?:to|into|as|named|called)\s+(?:(?:a|the)\s+(?:new\s+)?file\s+(?:named|called)\s+)?[`'\"]?(?P<name>[\w./-]*\w)"
)
_FILE_LIKE = re.compile(r"[\w./-]*\.[A-Za-z0-9]{1,8}|[\w.-]*/[\w./-]+|[A-Z][A-Z0-9_]{2,}")
# "in NAME" after a verb that makes something: only a name with a file's extension (not "in CSV",
# "in v2.3.1"), and only where the workspace says it is new (``files_to_write``)
_MAKE_VERB = re.compile(r"\b(?:write|save|store|put|copy|record|export|create|append|summari[sz]e|list|collect|gather"
                        r"|compile|tabulate)\b", re.IGNORECASE)
_IN_TARGET = re.compile(r"\bin\s+[`'\"]?(?P<name>[\w./-]*\w)")
FILE_NAME = re.compile(r"[\w./-]*\w\.[A-Za-z][A-Za-z0-9]{0,7}")
"""A name with a file's extension (``notes/a.md``; not ``v2.3.1``), as goals name files."""
_ALL_FILES = 1_000_000  # the workspace walk's limit when every name is wanted


def files_to_write(goal: str, workspace: str | None = None, written: Iterable[str] = ()) -> list[str]:
    """The files a goal asks to be written: a name that looks like a file (``REPORT.md``,
    ``notes/a.txt``, ``VERSION``) after "to", "into", "as", "(a file) named", following a verb of
    writing ("Search in src/app.py and write the result to OUT.md" asks for OUT.md only). ``[]`` for
    a question ("Which port does config/server.toml set?"). It errs on the side of asking for less:
    a file it misses is only not checked.

    Where those name none, and ``workspace`` (its root folder) is given, a name with a file's
    extension after "in", following a verb that makes something ("Summarise ... by file in
    SUMMARY.md"), is asked for when it is new: no file of the workspace has it, or it is one of
    ``written`` (the paths the run's own steps write, so a file the run made stays asked for)."""
    verb = _WRITE_VERB.search(goal)
    names = [m.group("name").rstrip(".") for m in _TARGET.finditer(goal, verb.end())] if verb else []
    asked = list(dict.fromkeys(n.lstrip("./") for n in names if _FILE_LIKE.fullmatch(n)))
    return asked or (_new_files_named_in(goal, workspace, written) if workspace else [])


def _new_files_named_in(goal: str, workspace: str, written: Iterable[str]) -> list[str]:
    verb = _MAKE_VERB.search(goal)
    if verb is None:
        return []
    names = [m.group("name").rstrip(".").lstrip("./") for m in _IN_TARGET.finditer(goal, verb.end())]
    named = [n for n in dict.fromkeys(names) if FILE_NAME.fullmatch(n)]
    present = workspace_listing(workspace) if named else None
    if present is None:  # no listing, no reading of "in": the rule errs on asking for less
        return []
    ours = [str(p) for p in written]
    return [n for n in named
            if any(writes_path(p, n) for p in ours) or not any(writes_path(f, n) for f in present)]


def workspace_listing(workspace: str) -> list[str] | None:
    """Every file of ``workspace``, workspace-relative (``tools.workspace_files``' walk); None when
    it cannot be listed, for a check that rests on it is then not made."""
    try:
        return workspace_files(workspace, limit=_ALL_FILES)[0]
    except Exception:
        return None


def writing_tools(capabilities: Iterable[Capability]) -> set[str]:
    """The names of the tools among ``capabilities`` that change things (not read-only)."""
    return {c.name for c in capabilities if c.kind == "tool" and not c.read_only}


def path_key(path: object) -> str:
    """A ``path`` argument as the rules compare it: stripped, its leading ``./`` taken off; "" if not text."""
    return path.strip().lstrip("./") if isinstance(path, str) else ""


def writes_path(path: object, name: str) -> bool:
    """Whether a write's ``path`` is the file ``name`` a goal asks for (``./`` and folders above it aside)."""
    p = path_key(path)
    return bool(p) and (p == name or p.endswith("/" + name))


def _write_target(step: StepAction, capabilities: Mapping[str, Capability] | None) -> str | None:
    """The ``path`` ``step`` writes: its text ``path`` argument when its tool, among ``capabilities``, changes things."""
    cap = capabilities.get(step.tool) if capabilities and step.tool else None
    path = step.args.get("path") if cap is not None and not cap.read_only else None
    return path if isinstance(path, str) else None


def unwritten_files(
    goal: str, steps: Sequence[PlanStep | StepAction], writers: Collection[str], done: Collection[str] | None = None,
    *, workspace: str | None = None, run: Sequence[PlanStep | StepAction] = (),
) -> list[str]:
    """The files ``goal`` asks to be written (``files_to_write``, in ``workspace`` if given) that no
    step of ``steps`` writes with a tool of ``writers`` (the tools that change things); with
    ``done``, only steps whose ids are in it count (the steps that completed). ``run``: the run's
    other steps, whatever their state; what they write is the run's own file, not the workspace's."""
    wanted = files_to_write(goal, workspace, paths_written([*steps, *run], writers))
    written = [s.args.get("path") for s in steps
               if s.tool in writers and (done is None or s.id in done)]
    return [name for name in wanted if not any(writes_path(p, name) for p in written)]


def paths_written(steps: Iterable[PlanStep | StepAction], writers: Collection[str]) -> list[str]:
    """The ``path`` of each step of ``steps`` that runs a tool of ``writers``, whatever its state."""
    return [str(s.args["path"]) for s in steps if s.tool in writers and isinstance(s.args.get("path"), str)]


def finished_steps(nodes: Sequence[PlanStep]) -> list[PlanStep]:
    """The completed steps of ``nodes``, less those that wrote blank text (``tools.BLANK_WRITE_MARK``):
    the file such a write made holds nothing the goal asked for, so its write is still owed."""
    return [n for n in nodes if n.status == "completed" and not (n.result is not None and wrote_blank(n.result.output))]


def write_owed(
    goal: str, nodes: Sequence[PlanStep], capabilities: Iterable[Capability], workspace: str | None = None
) -> str | None:
    """``WRITE_TOOL_NAME`` when that tool is offered and the goal names a file no finished step of
    ``nodes`` has written: a new plan must write it (``never_writes_asked_file``), so a plan in
    calls is held to end with it (``plan_syntax.plan_grammar``). None otherwise."""
    writers = writing_tools(capabilities)
    if WRITE_TOOL_NAME not in writers:
        return None
    finished = finished_steps(nodes)
    return WRITE_TOOL_NAME if unwritten_files(goal, finished, writers, workspace=workspace, run=nodes) else None


def never_writes_asked_file(
    goal: str, decision: AgentDecision, nodes: Sequence[PlanStep], capabilities: Mapping[str, Capability] | None,
    workspace: str | None = None,
) -> list[str]:
    """A plan for a goal that asks for a named file, which neither it nor a finished earlier step writes."""
    if not capabilities:
        return []
    earlier = finished_steps(nodes)
    missing = unwritten_files(goal, [*decision.steps, *earlier], writing_tools(capabilities.values()),
                              workspace=workspace, run=nodes)
    return [f"the goal asks to write {name}, and no step writes it: end the plan with the write, "
            f"for example write_file(path=\"{name}\", content=...)" for name in missing]


def answers_meant_as_writes(
    goal: str, decision: AgentDecision, capabilities: Mapping[str, Capability] | None, workspace: str | None = None,
    nodes: Sequence[PlanStep] = (),
) -> list[str]:
    """Final answer steps whose task names a file the goal asks to write, which no step writes out.

    An answer step writes no file; its output goes where a later step sends it. A 1.5B re-plan
    ended with "copy the install command ... into INSTALL.md" as an answer step after a write of
    the wrong text, and the run was judged done with the right text in no file.
    """
    writers = writing_tools(capabilities.values()) if capabilities else set()
    if not writers:
        return []
    wanted = files_to_write(goal, workspace, paths_written([*decision.steps, *nodes], writers))
    if not wanted:
        return []
    needed = {d for s in decision.steps for d in s.depends_on}
    problems = []
    for s in decision.steps:
        if s.tool or s.subagent or s.id in needed:
            continue
        task = " ".join([s.description, *(str(v) for v in (s.args or {}).values())]).lower()
        named = [name for name in wanted if name.lower() in task]
        if named:
            problems.append(f"{s.id} is an answer step, and an answer writes no file, so {named[0]} would not get "
                            f"what {s.id} gives: end the plan with write_file(path=\"{named[0]}\", "
                            f"content=...) of {s.id}'s output")
    return problems


def ends_in_gathering(decision: AgentDecision, capabilities: Mapping[str, Capability] | None) -> str:
    """Why a plan whose every final step only reads is refused (compact profile), or "".

    A final step's output goes nowhere but the evidence; a small model that stops at "search" or
    "list" never answers, and re-plans the same reading every iteration. The rule asks for what a
    plan is for: an answer step (a model step) or a step that changes something (a write).
    """
    needed = {d for s in decision.steps for d in s.depends_on}
    finals = [s for s in decision.steps if s.id not in needed]

    def gathers(step: StepAction) -> bool:
        if not step.tool:
            return False  # a model step writes the answer; a subagent does the work itself
        cap = capabilities.get(step.tool) if capabilities else None
        return cap is not None and cap.read_only
    if finals and all(gathers(s) for s in finals):
        ids = ", ".join(f"{s.id} ({s.tool})" for s in finals)
        return (f"the plan ends with {ids}, which only read: end it with an answer step that depends on "
                "them (for a question) or with the write the goal asks for")
    return ""


def order_writes(decision: AgentDecision, capabilities: Mapping[str, Capability] | None) -> AgentDecision:
    """``decision`` with each write of a ``path`` made to wait for the plan's earlier write of it (every profile).

    Two steps without an order between them run in either order, so which write a file keeps was
    chance. A plan is read as it is written, top to bottom: the later write is the one that stays
    (a plan in calls is a program, and that is what it would do). A 1.5B re-plan of INSTALL.md
    kept its first plan's wrong write and added the right one after it; a re-plan of DOCS_LIST.md
    wrote a listing and, after it, a search's line. A dependency that would make a cycle is not
    added (a JSON plan may list a step before one it depends on).
    """
    last: dict[str, str] = {}
    steps = {s.id: s for s in decision.steps}
    added: dict[str, list[str]] = {}
    for s in decision.steps:
        key = path_key(_write_target(s, capabilities))
        if not key:
            continue
        before = last.get(key)
        last[key] = s.id
        if before is None or before in s.depends_on or s.id in _upstream(before, steps, added):
            continue
        added.setdefault(s.id, []).append(before)
    if not added:
        return decision
    return decision.model_copy(update={"steps": [
        s.model_copy(update={"depends_on": [*s.depends_on, *added[s.id]]}) if s.id in added else s
        for s in decision.steps]})


def _upstream(step_id: str, steps: Mapping[str, StepAction], added: Mapping[str, list[str]]) -> set[str]:
    """The ids ``step_id`` waits for, directly or not (its own and ``added`` dependencies)."""
    seen: set[str] = set()
    todo = [step_id]
    while todo:
        s = steps.get(todo.pop())
        for d in [*(s.depends_on if s else []), *added.get(s.id if s else "", [])]:
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def writes_not_asked_for(goal: str, decision: AgentDecision, capabilities: Mapping[str, Capability] | None) -> list[str]:
    """Writes to a path the goal does not name (compact profile).

    A small model answering a question has written its answer over a source file it had just read.
    Under the compact profile a step that changes something may only write where the goal says:
    its ``path`` must appear in the goal's text. A goal that names no file gets no write at all.
    """
    problems = []
    for s in decision.steps:
        path = _write_target(s, capabilities)
        if path is not None and path_key(path) and path_key(path) not in goal:
            problems.append(f"step {s.id} writes {path!r}, which the goal does not name: write only the files "
                            "the goal asks for (a question is answered by an answer step, not a file)")
    return problems


def _words(text: str) -> str:
    return " ".join(text.lower().split())


def retries_missing_data(decision: AgentDecision, nodes: Sequence[PlanStep]) -> list[str]:
    """Answer steps that ask again what a failed ``missing_data`` step asked, with no new data.

    A small model re-plans a step that answered "MISSING: ..." word for word, over the same
    search that found nothing, until the iterations run out (seen on three goals of four
    iterations each). Such a step is refused unless something it depends on, directly or not, is
    a tool call not made before: new data is the only thing that can change its answer.
    """
    missed = {_words(n.description): n for n in nodes
              if n.status == "failed" and n.result is not None and n.result.error_type == "missing_data"
              and not (n.tool or n.tools or n.subagent)}
    if not missed:
        return []
    made = {call_key(n.tool, n.args) for n in nodes if n.tool and n.status == "completed"}
    by_id = {s.id: s for s in decision.steps}

    def fresh_data(step: StepAction, seen: set[str]) -> bool:
        for dep in step.depends_on:
            d = by_id.get(dep)
            if d is None or dep in seen:
                continue  # a finished step of the goal: data the failed step could already read
            seen.add(dep)
            if (d.tool and call_key(d.tool, d.args) not in made) or d.tools or d.subagent or fresh_data(d, seen):
                return True
        return False

    problems = []
    for s in decision.steps:
        old = missed.get(_words(s.description)) if not (s.tool or s.tools or s.subagent) else None
        if old is not None and not fresh_data(s, set()):
            reason = (old.result.error or "").split(": ", 1)[-1][:120] if old.result else ""
            problems.append(
                f"step {s.id} asks again what {old.id} asked, and {old.id} found the answer missing in its data "
                f"({reason}): first add a step that gets other data (read a listed file that may hold it, or "
                f"search one distinctive word in \".\", the whole workspace) and make {s.id} depend on it"
            )
    return problems


def repeats_finished_work(decision: AgentDecision, nodes: Sequence[PlanStep]) -> list[str]:
    """A plan every step of which already ran, with the same input, and did not finish the goal.

    The embedded model decodes greedily: the same call on the same data gives the same output.
    After a plan ran and the goal was not done, a 1.5B model planned the very same steps again
    every iteration (the same listing, the same answer task over it, the same write), three times,
    each time with the same wrong file at the end. Two steps are the same when their tool and
    arguments are (a reference compared by what it refers to), or for an answer step, its task and
    the steps it reads. A plan with anything new in it (one other file, pattern or task) stands.
    """
    done = [n for n in nodes if n.status == "completed"]
    if not done or not decision.steps:
        return []
    earlier: dict[str, PlanStep | StepAction] = {n.id: n for n in nodes}
    known = {**earlier, **{s.id: s for s in decision.steps}}

    def sig(step: PlanStep | StepAction, table: Mapping[str, PlanStep | StepAction], depth: int = 0) -> str | None:
        """What the step computes: its call with each reference replaced by what it refers to
        (read as the executor reads it), or for an answer step its task and what it reads."""
        if depth > 16 or step.subagent or step.tools:
            return None
        if not step.tool:
            inputs = [sig(table[d], table, depth + 1) if d in table else None for d in step.depends_on]
            if any(i is None for i in inputs):
                return None
            return "answer\0" + _words(step.description) + "\0" + "|".join(sorted(i for i in inputs if i))
        unresolved: list[str] = []

        def referred(m: re.Match[str]) -> str:
            step_id, field = parse_token(m.group(1), table)
            target = table.get(step_id)
            inner = sig(target, table, depth + 1) if target is not None else None
            if inner is None:
                unresolved.append(step_id)
                return m.group(0)
            return "<" + inner + (f".{field}" if field else "") + ">"

        args = map_arg_strings(step.args, lambda text: REFERENCE_RE.sub(referred, text))
        return None if unresolved else call_key(step.tool, args)

    ran = {sig(n, earlier) for n in done} - {None}
    repeats = []
    for s in decision.steps:
        if sig(s, known) not in ran:
            return []
        repeats.append(f"{s.id} ({s.tool or 'answer ' + repr(s.description[:60])})")
    return [f"every step of this plan already ran with the same input ({', '.join(repeats)}), and the goal "
            "is not done: the same steps give the same outputs. Change what does not work: read another file, "
            "search another pattern, or give the answer step another task"]
