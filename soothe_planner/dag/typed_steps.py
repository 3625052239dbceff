"""Is a typed tool step a call that can run, and is each step's description about the work?

The rules ``validate_steps`` adds for typed tool steps (a step naming one ``tool`` and its
``args``, run with no model call) and for descriptions. Each message names the step, the value and
the rule, and ends with the way out, because the planner's re-ask shows it to the model as is:

- one tool *or* one subagent per step; ``args`` only with a ``tool`` (a step without one is a model
  step, which has no arguments); the tool is allowed, and is a tool, not a subagent;
- the args fit the tool's ``Capability.args_schema`` (``arg_schema.check_args``: required present,
  none unknown, scalar types right after the coercions the tool itself applies);
- every reference in the args (``step_refs``) names a step of the batch or of the DAG, not the
  step itself, and one the step waits for — directly or through its dependencies — because the
  executor resolves it from completed results only;
- no step's description is (nearly) an offered tool's own description: a small model copies it,
  and a plan of tool descriptions does nothing for the goal. Two exceptions, both steps calling
  that very tool: with no arguments, its work is exactly what the tool's description says; with a
  word the tool's description lacks (``adds_to_tool``), the copy says what this call is for.

Repairs are the lenient parser's (it adds a missing dependency, with a warning); here a plan that
breaks a rule is refused. Checks that need a schema or a description run only when capabilities
are given; the reference rules always run.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from difflib import SequenceMatcher

from soothe_planner.dag.arg_schema import check_args, signature
from soothe_planner.dag.step_refs import REFERENCE_RE, arg_strings, references_in
from soothe_planner.models import Capability, PlanStep, StepAction

__all__ = ["ToolDescriptions", "adds_to_tool", "copy_stands", "describes_tool", "text_words", "typed_step_errors"]

StepLike = StepAction | PlanStep
NEAR = 0.85
"""``SequenceMatcher`` ratio over normalised words at which a description counts as the tool's own."""
_WORD = re.compile(r"[^\W_]+")
"""A word: a run of letters or digits, in any script."""


def text_words(text: str) -> tuple[str, ...]:
    """``text``'s words (``_WORD``), without case."""
    return tuple(_WORD.findall(text.casefold()))


def _norm(text: str) -> str:
    return " ".join(text_words(text))


class ToolDescriptions:
    """The offered tools' descriptions, normalised once per validation."""

    def __init__(self, capabilities: Mapping[str, Capability]) -> None:
        self.items = [
            (c.name, n) for c in capabilities.values() if c.kind == "tool" and len((n := _norm(c.description)).split()) >= 2
        ]


def describes_tool(description: str, tools: ToolDescriptions) -> str | None:
    """The tool whose own description ``description`` (nearly) is, or None.

    Nearly: the same words; a cut-off copy (a prefix holding at least half of it, as the wire
    schema's length bound leaves it); or a ``SequenceMatcher`` ratio of at least ``NEAR``.
    """
    if not tools.items:
        return None
    step = _norm(description)
    if not step:
        return None
    for name, own in tools.items:
        if step == own:
            return name
        if len(step) * 2 >= len(own) and own.startswith(step):
            return name
        matcher = SequenceMatcher(None, step, own, autojunk=False)
        if matcher.real_quick_ratio() >= NEAR and matcher.quick_ratio() >= NEAR and matcher.ratio() >= NEAR:
            return name
    return None


def adds_to_tool(description: str, tool: str, tools: ToolDescriptions) -> bool:
    """``description`` has a word that tool ``tool``'s own description lacks: it says something of
    this step (an argument, a subject) beyond what the tool does, however near the rest copies it.
    A last word that begins one of the tool's words is a copy cut off (a length bound cut it), not
    a word of its own."""
    own = next((n.split() for name, n in tools.items if name == tool), None)
    if own is None:
        return False
    words, known = _norm(description).split(), set(own)
    if words and words[-1] not in known and any(w.startswith(words[-1]) for w in own):
        words = words[:-1]
    return any(w not in known for w in words)


def copy_stands(description: str, tool: str | None, args: Mapping[str, object], copied: str,
                tools: ToolDescriptions) -> bool:
    """A description that (nearly) copies tool ``copied``'s own still labels a step calling ``tool``
    with ``args``: the step calls that very tool, and with no arguments (its work is exactly what
    the description says) or with a word of its own in the copy (``adds_to_tool``)."""
    return copied == tool and (not args or adds_to_tool(description, copied, tools))


def _waits_for(step: StepLike, target: str, deps_of: Mapping[str, Sequence[str]]) -> bool:
    """``step`` depends on ``target``, directly or through its dependencies (in the merged graph)."""
    if target in step.depends_on:
        return True
    seen: set[str] = set()
    stack = [d for d in step.depends_on if d != step.id]
    while stack:
        node = stack.pop()
        if node == target:
            return True
        if node in seen or node not in deps_of:
            continue
        seen.add(node)
        stack.extend(deps_of[node])
    return False


def typed_step_errors(
    step: StepLike,
    q: str,
    *,
    known_ids: Collection[str],
    deps_of: Mapping[str, Sequence[str]],
    allowed: Collection[str] | None,
    capabilities: Mapping[str, Capability] | None,
    tool_descriptions: ToolDescriptions | None,
) -> list[str]:
    """What ``step`` breaks of the rules in the module docstring (``q`` is how messages quote its id)."""
    errors: list[str] = []
    tool = step.tool
    if tool is not None:
        if step.subagent:
            errors.append(
                f"step {q} names tool '{tool}' and subagent '{step.subagent}' "
                "(a step is one tool call or one delegation: split it into two steps)"
            )
        extra = [t for t in step.tools if t != tool]
        if extra:
            errors.append(
                f"step {q} names tool '{tool}' and also tools {extra} "
                "(a typed tool step calls exactly one tool: drop the tools list)"
            )
        cap = capabilities.get(tool) if capabilities is not None else None
        if allowed is not None and tool not in allowed:
            errors.append(f"step {q} uses tool '{tool}' which is not allowed (allowed: {', '.join(sorted(allowed)[:12])})")
        elif cap is not None and cap.kind != "tool":
            errors.append(f"step {q} names {cap.kind} '{tool}' as its tool (name it as the step's subagent instead)")
        elif cap is not None and cap.args_schema is not None:
            for problem in check_args(step.args, cap.args_schema, deferred=_holds_reference):
                errors.append(
                    f"step {q} (tool '{tool}'): {problem} "
                    f"({tool} takes: {signature(cap.args_schema) or 'no arguments'}; fix the args)"
                )
    elif step.args:
        errors.append(
            f"step {q} has args but no tool (args are a tool's arguments: name the tool, "
            "or drop the args to make it a model step)"
        )
    for where, text in arg_strings(step.args):
        for ref in references_in(text, known_ids):
            if ref.step_id == step.id:
                errors.append(
                    f"step {q} argument '{where}' refers to its own output {ref.text} "
                    "(a step cannot use its own output: refer to an earlier step)"
                )
            elif ref.step_id not in known_ids:
                shown = ", ".join(sorted(known_ids)[:12]) or "none"
                errors.append(
                    f"step {q} argument '{where}' refers to {ref.text}, but there is no step "
                    f"'{ref.step_id}' in this decision or the plan (steps: {shown}; a {{{{...}}}} reference "
                    "stands only for a step's output: text the goal gives goes into the argument as it is)"
                )
            elif not _waits_for(step, ref.step_id, deps_of):
                errors.append(
                    f"step {q} argument '{where}' uses {ref.text}, but step {q} does not depend on "
                    f"'{ref.step_id}' (add '{ref.step_id}' to its depends_on)"
                )
    if tool_descriptions is not None:
        copied = describes_tool(step.description, tool_descriptions)
        if copied is not None and not copy_stands(step.description, tool, step.args, copied, tool_descriptions):
            errors.append(
                f"step {q} describes the tool, not the work: say what this step does for the goal "
                f"(its description is tool '{copied}''s own)"
            )
    return errors


def _holds_reference(text: str) -> bool:
    return REFERENCE_RE.search(text) is not None
