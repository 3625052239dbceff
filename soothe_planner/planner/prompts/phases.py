"""Which facts each phase's prompt carries, rendered from the loop's state.

Phase 1 (assess) is deliberately small: the goal, the iteration, the plan in flight as ids and
statuses only, the evidence new since the last plan and the previous assessment — enough to answer
"done?" and nothing that would make the cheap question expensive. Phase 2 (generate) carries
everything a planner must decide with: the plan in flight with ids, statuses and dependencies,
failed steps with their errors, evidence, working memory, the prior conversation, the capabilities
it may use and the step limit. State sections are trimmable under the budget; instructions are not.

Each result is sent once per prompt, and in full only while it is new: a result is old when its step
is in the goal-wide ``PlanManager`` and was finished by an earlier plan (it is not in
``LoopState.current_decision``, the decision in flight when the last plan was made). Old results reach
phase 2 as the short excerpts under their steps in the plan rendering, and phase 1 through the
previous assessment, which was made from them; sending them in full on every call would make a
goal's cost grow with the square of its length. Without a manager nothing else carries them, so every
latest result is sent.

Steps and results are read from the call's ``RunSteps`` (``run_steps.py``), which chose once between
the manager and the state; no function here makes that choice again.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

from soothe_planner.dag import dag_prompt, latest_results
from soothe_planner.models import (
    LoopState,
    Plan,
    PlanContext,
    PlannerSettings,
    PlanStep,
    Reflection,
    StatusAssessment,
    StepAction,
    StepResult,
)
from soothe_planner.planner.contract import path_key
from soothe_planner.planner.prompts import (
    Prompt,
    build,
    escape_data,
    render_assessment,
    render_capabilities,
    render_results,
    template,
)
from soothe_planner.planner.prompts.examples import ExampleSyntax, own_example_turns, render_own_examples
from soothe_planner.planner.prompts.questions import (
    answer_prompt,
    continuation_prompt,
    conversation,
    deliverable_prompt,
    intake_prompt,
)
from soothe_planner.planner.run_steps import RunSteps, deliverable_of
from soothe_planner.planner.small_model.grounding import checked_steps, dropped_lines, guard_reasons
from soothe_planner.tools import WRITE_TOOL_NAME, write_echo
from soothe_planner.wire import COMPACT_MODEL_STEP, model_step_name

if TYPE_CHECKING:
    from soothe_planner.dag import PlanManager

__all__ = [
    "answer_prompt",
    "assess_prompt",
    "continuation_prompt",
    "deliverable_prompt",
    "generate_prompt",
    "intake_prompt",
    "latest_results",
    "new_results",
    "reflect_prompt",
    "revise_prompt",
]

ASSESS_EVIDENCE_RESULTS = 8
"""Phase 1 sees only the newest results: it judges the latest state, not the history."""
ASSESS_EXCERPT = 300
COMPACT_ASSESS_EXCERPT = 200
"""The compact assessment shows an output's first whole lines within this many characters, and how
many lines it leaves out: its time is the prompt read, most of it outputs, at 60-100 tokens a
second on two cores; the start of an output tells what a step found, and the checks in code read
every line (``grounding``)."""
GENERATE_EXCERPT = 800


def deliverable_line(state: LoopState, pm: PlanManager | None) -> str:
    """The line a plan or assessment prompt shows under the goal: what the goal must hand back."""
    d = deliverable_of(state, pm)
    return f"It must hand back: {escape_data(d.describe())}.\n" if d is not None else ""


def new_results(run: RunSteps) -> list[StepResult]:
    """Every latest result except those of steps an earlier plan finished (the manager holds them)."""
    if run.manager is None or run.decision is None:
        return run.results
    current = {s.id for s in run.decision.steps}
    earlier = {n.id for n in run.manager.nodes if n.result is not None and n.id not in current}
    return [r for r in run.results if r.step_id not in earlier]


def _steps_text(steps: Sequence[PlanStep], *, compact: bool, shown_elsewhere: Collection[str] = ()) -> str:
    """Steps as a prompt shows them, whatever holds them (a manager, a decision, a plan).

    One rendering (``dag/render.py``): phase 1 gets ids and statuses only; everything else gets the
    DAG's text, with a result excerpt under each step whose result is not in the prompt already.
    """
    if compact:
        return escape_data("\n".join(f"{s.id} [{s.status}]" for s in steps)) or "(no steps yet)"
    return escape_data(dag_prompt(steps, shown_elsewhere=shown_elsewhere))


def _plan_text(
    state: LoopState, run: RunSteps, *, compact: bool, shown_elsewhere: Collection[str] = ()
) -> str:
    steps: Sequence[PlanStep] | None = run.plan_nodes(ordered=not compact)
    if steps is None and state.previous_plan is not None:
        steps = state.previous_plan.steps
    if steps is None:
        return "(no plan yet)"
    return _steps_text(steps, compact=compact, shown_elsewhere=shown_elsewhere)


def _failed_text(run: RunSteps) -> str:
    pm = run.manager
    if pm is not None:
        failed = [n.result for n in pm.nodes if n.status in ("failed", "skipped") and n.result is not None]
        remaining = [n.id for n in pm.nodes if not n.finished]
    else:
        failed = [r for r in run.results if not r.success]
        remaining = []
    lines = []
    for r in failed:
        if r is None:
            continue
        kind = "blocked by a failed dependency" if r.error_type == "blocked" else (r.error_type or "error")
        if pm is not None:  # the error is in the evidence (new) or under the step in the plan (older)
            lines.append(f"- {r.step_id} ({kind})")
        else:
            lines.append(f"- {r.step_id} ({kind}): {escape_data((r.error or r.output or '')[:300])}")
    if remaining:
        lines.append(f"Not finished yet: {', '.join(remaining)}")
    return "\n".join(lines) or "(none)"


def _working_memory(state: LoopState, context: PlanContext) -> str:
    text = state.working_memory or context.working_memory_excerpt
    return escape_data(text) if text else "(empty)"


def assess_prompt(goal: str, state: LoopState, run: RunSteps, settings: PlannerSettings) -> Prompt:
    """The phase-1 prompt; ``run`` is what the call read of the run's steps (``RunSteps.of``)."""
    newest = new_results(run)[-ASSESS_EVIDENCE_RESULTS:]
    return build(
        "plan-assess",
        "assess_system",
        "assess_human",
        {
            "goal": escape_data(goal),
            "deliverable": deliverable_line(state, run.manager),
            "iteration": str(state.iteration + 1),
            "max_iterations": str(state.max_iterations),
            "previous_assessment": render_assessment(state.previous_assessment),
            "plan": _plan_text(state, run, compact=True),
            "evidence": render_results(newest, excerpt=ASSESS_EXCERPT),
            **({"steps": _steps_with_outputs(run, [*_inputs_of(run, newest), *newest])}
               if settings.prompt_profile == "compact" else {}),
        },
        trimmable={"evidence": "head", "plan": "head"},
        budget_tokens=settings.prompt_budget_tokens,
        profile=settings.prompt_profile,
    )


def _inputs_of(run: RunSteps, shown: Sequence[StepResult]) -> list[StepResult]:
    """The results of earlier plans' steps that this plan's steps read (their direct dependencies),
    in the order they are depended on, unless ``shown`` has them.

    A re-plan that builds on finished work (a write of ``{{s1.output}}``) runs only its own steps;
    shown that write alone, a 1.5B model judged "continue" over a report holding every line, the
    search it copied out of sight.
    """
    pm = run.manager
    if pm is None or run.decision is None:
        return []
    have = {r.step_id for r in shown}
    wanted = dict.fromkeys(d for s in run.decision.steps for d in s.depends_on if d not in have)
    found = [pm.node(d).result for d in wanted if d in pm]
    return [r for r in found if r is not None][:ASSESS_EVIDENCE_RESULTS]


def _steps_with_outputs(run: RunSteps, results: Sequence[StepResult]) -> str:
    """Each new result under what its step did: a small model cannot tell what "8443" answers
    from the id alone (the compact assessment's one section)."""
    if not results:
        return "(no step has run yet)"
    steps = run.steps
    described = {s.id: s.description for s in steps}
    tools = {s.id: s.tool for s in steps}
    replaced = _replaced_writes(steps, results)
    lines = []
    shown: dict[str, list[str]] = {}  # an output's text -> the steps shown with it, in order
    for r in results:
        if r.step_id in replaced:
            continue
        what = described.get(r.step_id, "")
        body = (r.output if r.success else f"FAILED ({r.error_type or 'error'}): {r.error or r.output}").strip()
        repeated = _repeated(r, tools.get(r.step_id), shown) if r.success else None
        if r.success and body:
            shown.setdefault(body, []).append(r.step_id)
        if repeated:
            body = repeated
            if tools.get(r.step_id) == WRITE_TOOL_NAME:  # the path and the text written are in the output
                what = WRITE_TOOL_NAME
        else:
            body = _first_lines(body, COMPACT_ASSESS_EXCERPT)
        lines.append(f"- {r.step_id} {what}\n  output: {body or '(empty)'}")
    return escape_data("\n".join(lines))


def _replaced_writes(steps: Sequence[PlanStep | StepAction], results: Sequence[StepResult]) -> set[str]:
    """The writes among ``results`` (in the order they finished) whose file a later write among them
    wrote again: what they wrote is no longer there. Shown both, a 1.5B took a listing's write for
    what DOCS_LIST.md held, where a search's line had replaced it, and said done."""
    paths = {s.id: path_key(s.args.get("path")) for s in steps if s.tool == WRITE_TOOL_NAME}
    last: dict[str, str] = {}
    replaced: set[str] = set()
    for r in results:
        path = paths.get(r.step_id)
        if r.success and path:
            if path in last:
                replaced.add(last[path])
            last[path] = r.step_id
    return replaced


def _first_lines(text: str, limit: int) -> str:
    """``text`` if it fits in ``limit`` characters; else its first whole lines that do (or the start
    of the first line) and how many lines are left out."""
    if len(text) <= limit:
        return text
    lines = text.splitlines()
    kept: list[str] = []
    size = 0
    for line in lines:
        size += len(line) + 1
        if size > limit:
            break
        kept.append(line)
    if not kept:
        return text[: limit - 1] + "…"
    left = len(lines) - len(kept)
    return "\n".join(kept) + f"\n… ({left} more line{'' if left == 1 else 's'})"


def _repeated(result: StepResult, tool: str | None, shown: dict[str, list[str]]) -> str | None:
    """The output told in a few words when it repeats, whole, the output of a step shown above it.

    An answer step that copied a search, and the write of that answer, each showed the same lines
    again: the assessment read one result three times, most of its prompt, at 60-100 prompt tokens
    a second on two cores. Only a whole repeat is told this way; anything else is shown as it is.
    """
    text = result.output.strip()
    if text and text in shown:
        return f"the same as the output of {shown[text][0]}"
    if tool != WRITE_TOOL_NAME:
        return None
    head, sep, echo = result.output.partition(":\n")
    if not sep or not head.startswith("wrote "):
        return None
    for earlier, step_ids in shown.items():
        if echo.strip() and echo.strip() == write_echo(earlier).strip():
            return f"{head}: the whole output of {step_ids[-1]}"  # the newest: the one a write names
    return None


def generate_prompt(
    goal: str,
    state: LoopState,
    context: PlanContext,
    assessment: StatusAssessment | None,
    run: RunSteps,
    settings: PlannerSettings,
    *,
    max_steps: int,
    instruction: str = "",
    calls: bool = False,
) -> Prompt:
    """The plan-generation prompt; ``run`` is what the call read of the run's steps (``RunSteps.of``);
    ``calls``: its briefing asks for the plan as calls (``plan_syntax``)."""
    fresh = new_results(run)
    compact = settings.prompt_profile == "compact"
    return build(
        "plan-generate",
        "generate_calls_system" if calls else "generate_system",
        "generate_human",
        {
            "goal": escape_data(goal),
            "deliverable": deliverable_line(state, run.manager),
            "iteration": str(state.iteration + 1),
            "max_iterations": str(state.max_iterations),
            "assessment": render_assessment(assessment),
            "previous_assessment": render_assessment(state.previous_assessment),
            "plan": _plan_text(state, run, compact=False, shown_elsewhere={r.step_id for r in fresh}),
            "failed": _failed_text(run),
            "evidence": render_results(fresh, excerpt=GENERATE_EXCERPT),
            "working_memory": _working_memory(state, context),
            "conversation": conversation(state, context),
            "capabilities": render_capabilities(context.available_capabilities),
            "max_steps": str(max_steps),
            "instruction": instruction,
            **(_compact_fields(state, context, run, fresh, goal, assessment, calls=calls) if compact else {}),
        },
        trimmable={"evidence": "head", "working_memory": "tail", "plan": "head"},
        budget_tokens=settings.prompt_budget_tokens,
        profile=settings.prompt_profile,
        system_fields=compact_system_fields(context, calls=calls, settings=settings),
        shots=example_shots(context, settings, calls=calls),
    )


OVERVIEW_FILES = 120
"""At most this many workspace paths in the compact planning prompt (the count of the rest is said)."""
OVERVIEW_CHARS = 2_400
COMPACT_TOOL_CHARS = 70
_EXAMPLE_TOOLS = frozenset({"read_file", "search_text", "write_file"})


def files_overview(workspace: str | None) -> str:
    """The workspace's files as one line, bounded; what a plan's paths should be taken from."""
    if not workspace:
        return "(no workspace)"
    from soothe_planner.tools import workspace_files  # a filesystem walk, only where it is shown

    try:
        names, total = workspace_files(workspace, limit=OVERVIEW_FILES)
    except Exception as exc:  # an overview is a help, never a reason for planning to fail
        return f"(not listed: {type(exc).__name__})"
    if not names:
        return "(the workspace is empty)"
    text = ", ".join(names)
    if len(text) > OVERVIEW_CHARS:
        text = text[:OVERVIEW_CHARS].rsplit(", ", 1)[0]
        total_shown = text.count(", ") + 1
    else:
        total_shown = len(names)
    more = f", ... ({total - total_shown} more; list_dir shows them)" if total > total_shown else ""
    return escape_data(text + more)


def _compact_fields(
    state: LoopState,
    context: PlanContext,
    run: RunSteps,
    fresh: Sequence[StepResult],
    goal: str,
    assessment: StatusAssessment | None,
    *,
    calls: bool,
) -> dict[str, str]:
    """The compact human turn's own fields: the examples its tools allow, the files, the progress.

    The compact assessment is a status alone, so the only reasons a re-plan can be told are the
    checks' own (``grounding.guard_assessment``: a report missing lines, a fact no tool returned, a
    file never written), and the delivery check's (``grounding.unrelayed_lines``) whatever the model
    said; they go last, after the results they speak of, with the step that writes every line when
    the delivery dropped some.
    """
    progress = ""
    plan = _plan_text(state, run, compact=False, shown_elsewhere={r.step_id for r in fresh})
    if plan != "(no plan yet)":
        progress += f"\nSteps so far (id [status] what it did):\n<plan>\n{plan}\n</plan>\n"
    failed = _failed_text(run)
    if failed and failed != "(none)":
        progress += f"Failed steps (plan them again differently, or another way):\n{failed}\n"
    if fresh:
        progress += f"Results:\n<evidence>\n{render_results(fresh, excerpt=GENERATE_EXCERPT)}\n</evidence>\n"
    reasons = guard_reasons(assessment.summary if assessment is not None and assessment.status != "done" else "")
    nodes, results = checked_steps(run)
    # checked here too: a "continue" over a report missing lines is no check's override, yet it is why
    caps = {c.name: c for c in context.available_capabilities} or None
    dropped = dropped_lines(deliverable_of(state, run.manager), nodes, results, caps) if results else None
    if dropped is not None and dropped.why() not in reasons:
        reasons.append(dropped.why())
    if reasons:
        progress += f"Not done yet: {escape_data('; '.join(reasons))}\n"
    remedy = dropped.remedy(calls=calls) if dropped is not None else ""
    if remedy:
        progress += f"To write every line as found, write the search's output itself:\n{escape_data(remedy)}\n"
    return {"files": files_overview(context.workspace), "progress": progress}


def compact_system_fields(
    context: PlanContext, *, calls: bool = False, settings: PlannerSettings | None = None
) -> dict[str, str]:
    """The plan briefing's fields: the tools, the examples of a plan's shape, and the caller's own examples.

    The examples over the built-in file tools are shown when those tools are offered; with other
    tools, one example over tools that are said not to be the reader's (two independent calls, a
    step that needs both, the answer), so a plan over any tools is shown its shape: steps that need
    nothing from each other name nothing of each other, and a step's comment says what it does.
    Both are constant for a run, so they sit in the system prompt, a prefix every plan call shares; so
    do the caller's worked plans (``settings.examples``), which every profile's briefing ends with, in
    the syntax of the call.
    """
    tools = {c.name for c in context.available_capabilities if c.kind == "tool"}
    step = model_step_name(context.capability_names())
    name = "generate_examples_calls" if calls else "generate_examples_compact"
    examples = template(name if tools >= _EXAMPLE_TOOLS else f"{name}_any").template
    if step != COMPACT_MODEL_STEP:  # a real tool is named "answer": the examples write the model step by its name here
        examples = examples.replace(f'"tool": "{COMPACT_MODEL_STEP}"', f'"tool": "{step}"').replace(
            f"= {COMPACT_MODEL_STEP}(", f"= {step}(")
    writers = [c.name for c in context.available_capabilities if c.kind == "tool" and c.writes_path_arg]
    own = settings.examples if settings is not None and settings.examples_as == "briefing" else ()
    syntax = _example_syntax(settings, calls=calls)
    return {
        "own_examples": render_own_examples(own, syntax=syntax, model_step=step),
        "capabilities": render_capabilities(context.available_capabilities, description_chars=COMPACT_TOOL_CHARS),
        "examples": examples,
        "model_step": step,
        # the rules about files only where there are files to take paths from, and a tool that writes one
        "file_rules": ' Take paths from the listed files. Search "." (the whole workspace) unless the goal names '
                      'the file or folder.' if context.workspace else "",
        "write_rule": f" A goal that names a file to write ends with {writers[0]}." if writers else "",
        "writes_only": (f" Only {writers[0]} writes a file." if len(writers) == 1
                        else f" Only {', '.join(writers)} write files." if writers else ""),
    }


def example_shots(context: PlanContext, settings: PlannerSettings, *, calls: bool = False) -> list[tuple[str, str]]:
    """The caller's examples as turns before the request (``examples_as: turns``): the goal asked, the plan answered."""
    if settings.examples_as != "turns" or not settings.examples:
        return []
    step = model_step_name(context.capability_names())
    return [(f"<goal>\n{goal}\n</goal>", plan) for goal, plan in
            own_example_turns(settings.examples, syntax=_example_syntax(settings, calls=calls), model_step=step)]


def _example_syntax(settings: PlannerSettings | None, *, calls: bool) -> ExampleSyntax:
    """The plan syntax the call asks for, which the caller's examples are written in."""
    if calls:
        return "calls"
    return "compact" if settings is not None and settings.prompt_profile == "compact" else "json"


def keep_without_plan_note() -> str:
    return template("keep_without_plan").substitute()


def revise_prompt(
    goal: str, plan_text: str, reflection: Reflection, context: PlanContext, settings: PlannerSettings
) -> Prompt:
    reflection_text = reflection.assessment
    if reflection.feedback:
        reflection_text += "\n" + reflection.feedback
    if reflection.blocked_steps:
        reflection_text += "\nBlocked only by failed dependencies: " + ", ".join(reflection.blocked_steps)
    return build(
        "revise",
        "generate_system",
        "revise_human",
        {
            "goal": escape_data(goal),
            "plan": plan_text,
            "reflection": escape_data(reflection_text),
            "capabilities": render_capabilities(context.available_capabilities),
            "max_steps": str(settings.max_plan_steps),
        },
        trimmable={"plan": "head", "reflection": "head"},
        budget_tokens=settings.prompt_budget_tokens,
        profile=settings.prompt_profile,
        system_fields=compact_system_fields(context, settings=settings),
        shots=example_shots(context, settings),
    )


def reflect_prompt(goal: str, plan: Plan, results: Sequence[StepResult], settings: PlannerSettings) -> Prompt:
    latest = latest_results(results)
    return build(
        "reflect",
        "reflect_system",
        "reflect_human",
        {
            "goal": escape_data(goal),
            # each result once: in full as evidence, so not again under its step
            "plan": _steps_text(plan.steps, compact=False, shown_elsewhere={r.step_id for r in latest}),
            "evidence": render_results(latest, excerpt=GENERATE_EXCERPT),
        },
        trimmable={"plan": "head", "evidence": "head"},
        budget_tokens=settings.prompt_budget_tokens,
        profile=settings.prompt_profile,
    )
