"""What a small model's plan must hold beyond the DAG's and the contract's rules.

The DAG validator (``dag/``) judges any plan; the contract's rules (``planner/contract/rules.py``)
judge it against the goal's deliverable. These rules catch a small model's habits, seen on real
goals: a plan that only reads, re-planned every iteration without ever answering; an answer step
meant as the deliverable's file, with no write of it; an answer that found its data lacking,
asked again of the same data every iteration; the very plan that just ran, planned again; and a
plan that leaves the deliverable's file unwritten. Each returns the re-ask's words, so the model
is told exactly what to change. None reads the goal's words.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from soothe_planner.dag import REFERENCE_RE, call_key, map_arg_strings, parse_token
from soothe_planner.deliverable import Deliverable
from soothe_planner.models import AgentDecision, Capability, PlanStep, StepAction
from soothe_planner.planner.contract import is_model_step, owed_files, write_target, writer_names

__all__ = ["answers_meant_as_writes", "ends_in_gathering", "repeats_failed_calls", "repeats_finished_work",
           "retries_missing_data", "write_owed", "writes_a_receipt"]


def write_owed(
    deliverable: Deliverable | None, nodes: Sequence[PlanStep], capabilities: Mapping[str, Capability] | None
) -> str | None:
    """The writing tool a new plan must end with (``plan_syntax.plan_grammar``'s ``ends_with``): the
    first tool that writes files, when the deliverable names a file no finished step has written."""
    writers = writer_names(capabilities)
    if not writers or not owed_files(deliverable, None, nodes, capabilities):
        return None
    return writers[0]


def answers_meant_as_writes(
    deliverable: Deliverable | None, decision: AgentDecision, capabilities: Mapping[str, Capability] | None,
) -> list[str]:
    """Final answer steps whose task names a file of the deliverable, which no later step writes.

    An answer step writes no file; its output goes where a later step sends it. A 1.5B re-plan
    ended with "copy the install command ... into INSTALL.md" as an answer step after a write of
    the wrong text, and the run was judged done with the right text in no file.
    """
    writers = writer_names(capabilities)
    if deliverable is None or deliverable.kind != "file" or not writers:
        return []
    needed = {d for s in decision.steps for d in s.depends_on}
    problems = []
    for s in decision.steps:
        if not is_model_step(s) or s.id in needed:
            continue
        task = " ".join([s.description, *(str(v) for v in (s.args or {}).values())]).casefold()
        named = [name for name in deliverable.files if name.casefold() in task]
        if named:
            arg = (capabilities or {})[writers[0]].writes_path_arg
            problems.append(f"{s.id} is an answer step, and an answer writes no file, so {named[0]} would not get "
                            f"what {s.id} gives: end the plan with {writers[0]}({arg}=\"{named[0]}\", "
                            f"content={s.id}) of {s.id}'s output")
    return problems


def ends_in_gathering(
    decision: AgentDecision, capabilities: Mapping[str, Capability] | None, deliverable: Deliverable | None = None
) -> str:
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
        # a count is the answer when the deliverable is a count; otherwise it is one more reading
        counted = cap is not None and cap.counts and deliverable is not None and deliverable.kind == "count"
        return cap is not None and cap.read_only and not counted
    if finals and all(gathers(s) for s in finals):
        ids = ", ".join(f"{s.id} ({s.tool})" for s in finals)
        return (f"the plan ends with {ids}, which only read: end it with an answer step that depends on "
                "them (for a question) or with the write the goal asks for")
    return ""


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


def repeats_finished_work(
    decision: AgentDecision, nodes: Sequence[PlanStep], capabilities: Mapping[str, Capability] | None = None
) -> list[str]:
    """A plan every step of which already ran, with the same input, and did not finish the goal.

    The embedded model decodes greedily: the same call on the same data gives the same output.
    After a plan ran and the goal was not done, a 1.5B model planned the very same steps again
    every iteration (the same listing, the same answer task over it, the same write), three times,
    each time with the same wrong file at the end. Two steps are the same when their tool and
    arguments are (a reference compared by what it refers to), or for an answer step, its task and
    the steps it reads. A plan with anything new in it (one other file, pattern or task) stands.
    A write whose file a later write of the goal replaced did not leave its effect, so writing it
    again is no repeat (with ``capabilities``, which say what each tool writes): a 1.5B plan wrote
    a search's lines and then a write's receipt over them, and the one write that mends it was
    refused as a repeat of the first.
    """
    done = [n for n in nodes if n.status == "completed"]
    last_write: dict[str, str] = {}
    for n in done:
        target = write_target(n, capabilities)
        if target:
            last_write[target] = n.id
    done = [n for n in done if not write_target(n, capabilities) or last_write[write_target(n, capabilities)] == n.id]
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


def repeats_failed_calls(decision: AgentDecision, nodes: Sequence[PlanStep]) -> list[str]:
    """Tool steps that make a call, tool and arguments alike, that failed before with a tool's error.

    A tool given the same arguments fails the same way; a 1.5B model planned
    ``count_files(pattern=".go")`` four iterations running, each time after the tool's error said
    which pattern to use. The re-ask shows the error again beside the call to change.
    """
    failed = {call_key(n.tool, n.args): n for n in nodes
              if n.tool and n.status == "failed" and n.result is not None and n.result.error_type == "tool_error"}
    problems = []
    for s in decision.steps:
        old = failed.get(call_key(s.tool, s.args)) if s.tool else None
        if old is not None and old.result is not None:
            error = (old.result.error or "").split(": ", 1)[-1][:200]
            problems.append(f"step {s.id} calls {s.tool} with the arguments that failed in {old.id} ({error}): "
                            "change the arguments as the error says")
    return problems


def writes_a_receipt(decision: AgentDecision, capabilities: Mapping[str, Capability] | None) -> list[str]:
    """Writes whose text refers to a write step's output: a write answers with a receipt, not data.

    A 1.5B plan ended ``s5 = write_file(path=..., content=s4)`` with ``s4`` itself a write, and the
    file was left holding "wrote 46 bytes to ..." in place of the lines.
    """
    writes = {s.id for s in decision.steps if write_target(s, capabilities)}
    problems = []
    for s in decision.steps:
        if s.id not in writes:
            continue
        text = " ".join(str(v) for v in s.args.values())
        used = [m.group(1).split(".")[0] for m in REFERENCE_RE.finditer(text)]
        receipts = [u for u in used if u in writes]
        if receipts:
            problems.append(f"step {s.id} writes the output of {receipts[0]}, which is a write (its output only says "
                            f"what it wrote): write the data itself, the output of the step {receipts[0]} wrote")
    return problems
