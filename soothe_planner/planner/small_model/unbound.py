"""When every plan a small model writes is refused for its calls' arguments, is its plan still good?

A 1.5B model planning from a task text often writes the right steps with a call it cannot bind:
an argument that refers to data the goal gives as if it were a step's output
(``"data": "{{evidence.system_log_file}}"``), a required argument the goal does not give, a
float where the tool takes an integer. Told the rule, it wrote the same argument again at every
re-ask, and the goal was left with no plan at all — its steps, their order and their dependencies
lost for one argument each.

The executor has a kind of step for exactly this (``execution.step_kinds``: ``tool_args``): a step
that lists one tool with structured arguments and gives none, whose arguments one model call fills
in when the step runs, from the step's task and its dependencies' outputs, with that tool bound and
forced. So the planner keeps the model's plan and leaves each call it could not bind to that step:
the step keeps its description, its dependencies and its tool, and loses the arguments it wrote.
Nothing is invented: an argument the goal does not give is still to be found when the step runs,
and the step fails there, with its reason, if it cannot be.

Only steps whose call itself breaks a rule of calls (its arguments against the tool's schema, its
references) are changed, one at a time, each kept only when the plan breaks fewer rules without it
(a call refused as a repeat of finished work is not unbound: its arguments are fine); the plan must
then pass every rule a model's plan must pass, or it is not used. Never for a tool that takes one
string (such a step runs with its task text as that string: the description, not a command), nor
for one that writes a file (the contract judges a write by the path in its call: left to run time,
the path would escape that judgement); never after a transport failure (the model was not heard);
and the model's first answer is tried first (the greedy one; a re-ask's is sampled). The rows of
``bench worfbench`` and the goal suites measure it (RFC 0006).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from soothe_planner.dag import typed_step_errors
from soothe_planner.errors import PlanGenerationError
from soothe_planner.models import Capability, StepAction
from soothe_planner.planner.generation import Generated

__all__ = ["unbound_calls"]

logger = logging.getLogger("soothe_planner.planner")


def _filled_at_run_time(cap: Capability | None) -> bool:
    """The tool's arguments can be filled by a model call when its step runs: it declares them, and
    not as one string (a step listing such a tool runs with its task text as that string), and it
    writes no file (a write's path is judged in its call, when the plan is)."""
    if cap is None or cap.kind != "tool" or cap.writes_path_arg:
        return False
    props = (cap.args_schema or {}).get("properties") or {}
    if not props:
        return False
    if len(props) == 1:
        (spec,) = props.values()
        return not (isinstance(spec, Mapping) and spec.get("type") == "string")
    return True


def _call_refused(step: StepAction, deps_of: Mapping[str, Sequence[str]], capabilities: Mapping[str, Capability]
                  ) -> bool:
    """The step's call itself breaks a rule of calls (``dag.typed_steps``: its arguments against the
    tool's schema, its references), whatever else the plan breaks; ``deps_of``: every step of the
    plan and before it, with its dependencies."""
    return bool(typed_step_errors(step, repr(step.id), known_ids=deps_of, deps_of=deps_of, allowed=None,
                                  capabilities=capabilities, tool_descriptions=None))


def _unbound(gen: Generated, capabilities: Mapping[str, Capability], existing: Mapping[str, Sequence[str]],
             validate: Callable[[Generated], list[str]]) -> Generated | None:
    decision = gen.decision
    if gen.plan_action != "new" or decision is None:
        return None
    errors = validate(gen)
    deps_of = {**existing, **{s.id: s.depends_on for s in decision.steps}}
    steps: list[StepAction] = list(decision.steps)
    moved: list[str] = []
    for i, step in enumerate(decision.steps):
        if not errors:
            break
        if not step.tool or not _filled_at_run_time(capabilities.get(step.tool)) \
                or not _call_refused(step, deps_of, capabilities):
            continue
        left = step.model_copy(update={"tool": None, "args": {}, "tools": [step.tool]})
        trial = [*steps[:i], left, *steps[i + 1:]]
        now = validate(Generated("new", decision.model_copy(update={"steps": trial}), gen.next_action))
        if len(now) < len(errors):
            steps, errors = trial, now
            moved.append(step.id)
    if errors or not moved:
        return None
    names = ", ".join(repr(s) for s in moved)
    return Generated("new", decision.model_copy(update={"steps": steps}), gen.next_action, [
        *gen.warnings,
        f"every plan the model wrote was refused for its calls' arguments: its first such plan is kept, "
        f"the arguments of step(s) {names} left to a model call when each runs",
    ], gen.raw)


def unbound_calls(
    exc: PlanGenerationError,
    parse: Callable[[str], Generated],
    capabilities: Mapping[str, Capability] | None,
    validate: Callable[[Generated], list[str]],
    existing: Mapping[str, Sequence[str]] | None = None,
) -> Generated | None:
    """The model's refused plan with its unbindable calls left to run time, or None (see the module
    docstring): the first refused answer, in the order written, that the change makes pass.
    ``existing``: the plan's nodes so far, each with its dependencies (a reference may name one)."""
    if not capabilities or any(a.error_type == "transport" for a in exc.attempts):
        return None
    for attempt in exc.attempts:
        if attempt.error_type != "validation" or not attempt.raw_text:
            continue
        try:
            gen = parse(attempt.raw_text)
        except Exception:  # an answer that no longer reads is no plan to keep
            continue
        gen.raw = attempt.raw_text
        kept = _unbound(gen, capabilities, existing or {}, validate)
        if kept is not None:
            logger.warning("%s: every plan refused; %s", exc.phase, kept.warnings[-1])
            return kept
    return None
