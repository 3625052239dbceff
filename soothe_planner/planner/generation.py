"""How is one plan-generation answer read and judged, whichever way the model gave it?

The planner's generation call (``llm_planner``) asks for a plan through the structured-output
ladder (``calls``/``ladder``): the answer comes back either as a schema object or as text for the
lenient parser. Both are read into one ``Generated`` here, with the parser's repair rules applied
to both (``readers``), and judged by one validator (``decision_validator``): the DAG's rules via
the goal's ``PlanManager``, the contract's rules over the goal's deliverable (every model), and
the small-model rules (``small_model/plan_rules``) when they are on.
Kept apart from the planner class so the class holds the loop's phases and this module the shape
of one answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel

from soothe_planner.dag import (
    PlanManager,
    ToolDescriptions,
    call_key,
    copy_stands,
    describes_tool,
    follow_renames,
    rename_references,
    validate_steps,
)
from soothe_planner.deliverable import Deliverable
from soothe_planner.errors import GenerationAttempt
from soothe_planner.models import AgentDecision, Capability, PlanContext, StepAction
from soothe_planner.parsing import ParsedDecision, derived_description, parse_decision, read_decision
from soothe_planner.planner.contract import order_writes, owed_writes, writes_outside
from soothe_planner.planner.plan_syntax import calls_text_reader
from soothe_planner.planner.prompts.examples import copied_example
from soothe_planner.planner.small_model.plan_rules import (
    answers_meant_as_writes,
    ends_in_gathering,
    repeats_failed_calls,
    repeats_finished_work,
    retries_missing_data,
    writes_a_receipt,
)
from soothe_planner.wire import GeneratePlan, generation_model, model_step_name

__all__ = ["REFUSED_NOTE", "Generated", "by_name", "calls_reader", "decision_validator", "plan_schema",
           "readers", "with_refusals", "writable", "writes_in_order"]


@dataclass
class Generated:
    """A generation answer, from the structured path or the lenient parser alike."""

    plan_action: Literal["new", "keep"]
    decision: AgentDecision | None
    next_action: str = ""
    warnings: list[str] = field(default_factory=list)
    raw: str = ""  # what the model wrote, for PlanResult.full_output


def _rules(context: PlanContext, max_steps: int, pm: PlanManager | None) -> dict[str, Any]:
    return {
        "known_capabilities": context.capability_names() or None,
        "max_steps": max_steps,
        "existing_ids": frozenset(n.id for n in pm.nodes) if pm is not None else frozenset(),
        "tool_schemas": {c.name: c.args_schema for c in context.available_capabilities if c.args_schema},
    }


def relabel_copied(decision: AgentDecision | None, context: PlanContext, warnings: list[str]) -> AgentDecision | None:
    """``decision`` with each tool step whose description copies an offered tool's own description
    labelled by its call instead (``derived_description``), with a warning naming the step.

    A small model copies the tool's description under its call; the call (tool and arguments) is
    the step's work, so the copy costs the step only its label. The DAG's rule against such
    descriptions (``dag.typed_steps``) stays for steps without a tool, where the description is the
    whole step: refusing a whole plan, and paying a re-ask, for a label a call already gives would
    spend calls on nothing (a 1.5B repeated the copy on every re-ask and lost the plan). A step
    calling that very tool with no arguments keeps the copy: its call would say only the tool's
    name, and the tool's description says what that call does. So does a copy of the called tool's
    description with a word of its own (``adds_to_tool``): "analyze the DNA sequence 'A' to identify
    genetic variations" says which sequence, and reads better than the call written out.

    A tool step labelled with a step of the prompt's own example plan (``prompts.examples``: the
    1.5B labelled a call of ``get_event_for_today_in_history`` "get today's euro to yen rate") is
    labelled by its call too: the call is the step's work, the copy says nothing of it. A model
    step with such a task is left as it is: a re-ask for it was measured, and the 1.5B wrote the
    copy again reworded ("which train reaches Central first"), or let the example into another
    step ("the total value of the text files in yen"), at more calls.
    """
    if decision is None or not context.available_capabilities:
        return decision
    tools = ToolDescriptions({c.name: c for c in context.available_capabilities})
    steps = []
    for s in decision.steps:
        copy = _copied_label(s, tools)
        if copy is None:
            steps.append(s)
            continue
        warnings.append(f"step {s.id!r}: its description was {copy}; labelled by its call instead")
        steps.append(s.model_copy(update={"description": derived_description(s.tool, s.args)}))
    return decision.model_copy(update={"steps": steps})


def _copied_label(step: StepAction, tools: ToolDescriptions) -> str | None:
    """What a tool step's description copies, for a warning, when its call is to label it instead; else None."""
    if not step.tool:
        return None
    copied = describes_tool(step.description, tools)
    if copied is not None:
        return None if copy_stands(step.description, step.tool, step.args, copied, tools) else f"tool {copied!r}'s own"
    example = copied_example(step.description)
    return None if example is None else f"a step of the prompt's example plan (for the goal {example.goal!r})"


def merge_repeats(decision: AgentDecision | None, warnings: list[str]) -> AgentDecision | None:
    """``decision`` with each step that repeats an earlier step of it dropped, and what depended on
    it or used its output pointed at that earlier step, with a warning naming both.

    A repeat does the same work on the same inputs: the same call (tool and arguments) or, for a
    model step, the same task (its description, without case or spacing), tools and subagent —
    after the same dependencies. Both would run at once and the second would add only its cost (a
    1.5B wrote one call four times over, in parallel). A plan that means work done twice orders it:
    the second waits on the first, and is not a repeat. Merged, not refused: a re-ask costs a call,
    and the 1.5B wrote the same repeats again when asked (one plan was lost that way). Steps whose
    id is given twice are left to the DAG's rule on ids.
    """
    if decision is None or len(decision.steps) < 2:
        return decision
    given = [s.id for s in decision.steps]
    ids = frozenset(given)
    first: dict[tuple[object, ...], str] = {}
    renamed: dict[str, str] = {}
    for s in decision.steps:
        if given.count(s.id) > 1:
            continue
        deps = tuple(sorted({renamed.get(d, d) for d in s.depends_on}))
        if s.tool:
            key: tuple[object, ...] = ("tool", call_key(s.tool, rename_references(s.args, renamed, ids)), deps)
        else:
            task = rename_references({"d": s.description}, renamed, ids)["d"]
            key = ("model", " ".join(task.casefold().split()), tuple(sorted(s.tools)), s.subagent, deps)
        earlier = first.setdefault(key, s.id)
        if earlier != s.id:
            renamed[s.id] = earlier
            warnings.append(f"step {s.id!r} repeated step {earlier!r} (the same work on the same inputs): "
                            f"merged into it")
    if not renamed:
        return decision
    steps = [follow_renames(s, renamed, ids) for s in decision.steps if s.id not in renamed]
    return decision.model_copy(update={"steps": steps})


def repaired(pd: ParsedDecision, context: PlanContext, warnings: list[str] | None = None) -> Generated:
    """A read answer as the planner uses it: repeated steps merged, copied tool descriptions
    relabelled, every warning kept (``warnings``: the reader's before ``pd``'s own)."""
    notes = [*(warnings or []), *pd.warnings]
    return Generated(pd.plan_action, relabel_copied(merge_repeats(pd.decision, notes), context, notes),
                     pd.next_action, notes)


def calls_reader(context: PlanContext, max_steps: int, pm: PlanManager | None) -> Callable[[str], Generated]:
    """How a plan written in the calls syntax is read (``plan_syntax``): its lines into the compact
    JSON shape, then the same reader and repairs as a JSON plan."""
    rules = _rules(context, max_steps, pm)
    tools = [c.name for c in context.available_capabilities if c.kind == "tool"]

    def read_json(data: Mapping[str, Any], warnings: list[str]) -> Generated:
        return repaired(read_decision(data, **rules), context, warnings)

    return calls_text_reader(
        read_json, tool_schemas=rules["tool_schemas"], known_tools={*tools, model_step_name(context.capability_names())},
        existing_ids=rules["existing_ids"], max_steps=max_steps,
    )


def readers(
    context: PlanContext, max_steps: int, pm: PlanManager | None
) -> tuple[Callable[[BaseModel], Generated], Callable[[str], Generated]]:
    """How a generation answer is read: (from a structured answer, from text).

    A structured answer gets the same repairs as a written one. Grammar-constrained output is
    well-formed but not always sound: small models list a tool or a made-up name as a
    dependency, or name a tool outside the allow-list. Both readers apply the lenient parser's
    rules, so what those rules drop is dropped (with a warning) instead of spending a re-ask
    on it; what the rules refuse (duplicate ids, cycles, a plan over the cap) is still refused.
    """
    rules = _rules(context, max_steps, pm)

    def read(obj: BaseModel) -> Generated:
        assert isinstance(obj, GeneratePlan)
        if obj.plan_action != "new":
            return Generated(obj.plan_action, None, obj.next_action)
        return repaired(read_decision(obj.model_dump(), **rules), context)

    def parse(text: str) -> Generated:
        return repaired(parse_decision(text, **rules), context)

    return read, parse


def decision_validator(
    goal: str, context: PlanContext, pm: PlanManager | None, deliverable: Deliverable | None = None, *,
    small_model: bool, allow_keep: bool, replace: bool, max_steps: int, greedy: bool = False,
) -> Callable[[Generated], list[str]]:
    """What a generation answer must satisfy before it is used: the contract's rules over the goal's
    ``deliverable`` (no write it does not name), the DAG's rules (through ``pm``, with the offered
    tools' schemas) and, with ``small_model``, the small-model rules — the one against repeating
    finished work only for a model that decodes greedily (``greedy``), for which the same call on
    the same data gives the same output. ``goal`` is not read by any rule: it names the plan in errors."""
    names = context.capability_names() or None
    offered = context.available_capabilities or None
    by_name = {c.name: c for c in offered} if offered else None
    del goal

    def validate(gen: Generated) -> list[str]:
        if gen.plan_action == "keep":
            if allow_keep:
                return []
            return ["there is no plan in flight, so plan_action 'keep' is not possible: "
                    "answer plan_action 'new' with at least one step"]
        if gen.decision is None or not gen.decision.steps:
            return ["plan_action 'new' needs at least one step"]
        if len(gen.decision.steps) > max_steps:
            return [f"plan has {len(gen.decision.steps)} steps, over the limit of {max_steps}"]
        problems = writes_outside(deliverable, gen.decision, by_name)
        if small_model:
            nodes = pm.nodes if pm is not None else []
            owed = owed_writes(deliverable, gen.decision, nodes, by_name)
            problems += [p for p in (ends_in_gathering(gen.decision, by_name, deliverable),
                                     # a plan with no write of the file at all is told that, once
                                     *(owed or answers_meant_as_writes(deliverable, gen.decision, by_name)),
                                     *retries_missing_data(gen.decision, nodes),
                                     *writes_a_receipt(gen.decision, by_name),
                                     *repeats_failed_calls(gen.decision, nodes),
                                     *(repeats_finished_work(gen.decision, nodes, by_name) if greedy else []))
                         if p]
        if problems:
            return problems
        if pm is not None:
            # the offered tools' schemas and descriptions, whatever the manager was built with
            return pm.validate(gen.decision, replace=replace, capabilities=offered)
        return validate_steps(gen.decision.steps, max_steps=max_steps, allowed_capabilities=names,
                              capabilities=by_name)

    return validate


def plan_schema(context: PlanContext, max_steps: int, allow_keep: bool, *, compact: bool = False) -> type[GeneratePlan]:
    """The plan schema for what ``context`` offers: each step's tool one of the offered tools, or null
    (under the compact profile, or the ``answer`` pseudo-tool of a model step)."""
    caps = context.available_capabilities
    return generation_model(
        max_steps,
        allow_keep=allow_keep,
        tools=tuple(c.name for c in caps if c.kind == "tool"),
        subagents=tuple(c.name for c in caps if c.kind != "tool"),
        compact=compact,
    )


def writable(deliverable: Deliverable | None, capabilities: list[Capability]) -> list[Capability]:
    """The capabilities a plan's schema or grammar offers: without the tools that write files when
    the deliverable is not a file (such a write would be refused; held out, it cannot be written)."""
    if deliverable is None or deliverable.kind == "file":
        return capabilities
    return [c for c in capabilities if not c.writes_path_arg]


def by_name(capabilities: list[Capability]) -> dict[str, Capability] | None:
    return {c.name: c for c in capabilities} or None


REFUSED_NOTE = "refused, then mended by a re-ask: "
"""How a plan the checks refused, and a re-ask mended, is recorded among the result's warnings."""


def with_refusals(gen: Generated, attempts: list[GenerationAttempt]) -> Generated:
    """``gen`` with each refusal of an earlier answer of the same call among its warnings: a plan a
    re-ask mended was refused first, and a reviewer reads that in the run's state and its events,
    not only in a log line."""
    gen.warnings = [*gen.warnings, *(REFUSED_NOTE + a.error for a in attempts if a.error_type == "validation")]
    return gen


def writes_in_order(gen: Generated, context: PlanContext) -> Generated:
    """``gen`` with its plan's writes of one file run in the plan's order (``contract.order_writes``)."""
    if gen.decision is not None:
        gen.decision = order_writes(gen.decision, by_name(context.available_capabilities))
    return gen
