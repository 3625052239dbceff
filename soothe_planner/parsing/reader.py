"""Reading a plan, or a small structured answer, out of whatever a model actually wrote.

This is the only lenient code in the package, because its input is a language model and not a
caller: everywhere else a malformed value is a bug and an error. It is used when structured
output is unavailable or failed, and on every raw reply. Weighed against it: trusting
structured output alone (weak local models and some providers do not honour it), and a stricter
parser plus more re-asks (each re-ask is a paid call that a small model often fails the same way).
What decides is what is checked after the reading: ids, dependencies, cycles, the step cap and
the capability list are enforced here whatever shape the text came in.

Tolerances, every one (anything not listed is an error, ``PlanParseError``, carrying the text):

Finding the JSON
  - a JSON value anywhere in the text: inside a ```` ``` ```` or ```` ```json ```` fence, wrapped in
    prose or HTML-ish tags (``<plan>{...}</plan>``); closed ``<think>…</think>`` blocks are removed
    first. Several values: the one holding a plan is used; two *different* plans are an error
    (which one did the model mean?), identical repeats are one plan.
  - step objects with no enclosing array: one per line, or separated by commas or whitespace,
    taken in the order they appear (models asked for an array often answer like this).
  - JSON encoded twice: an answer that is one JSON string literal holding the JSON is decoded.
  - an apostrophe in bracketed prose (``[it's``) opens no string that hides the plan: a value cut
    off by the end of the text that holds no plan is scanned into.
Repairing the JSON (each repair is named once in the warnings)
  - trailing and doubled commas; a missing comma between values; ``//`` and ``/* */`` comments;
    ``True``/``False``/``None`` (any case of true/false/null/none); single-quoted strings and
    typographic ``“…”`` quotes around keys or values; unquoted keys; unquoted single-word values
    (``"plan_action": keep``); a double quote inside a string when a word follows it
    (``"say "hi" twice"``); unknown backslash escapes kept as written.
  - truncated output: open strings, arrays and objects are closed. Steps that were whole when the
    text ended are kept; a cut-off last step is dropped with a warning; if no whole step remains
    the answer is an error.
  - not repaired: mismatched brackets, nesting deeper than 64 levels, numbers such as ``NaN``. A
    plan read from inside a value that broke this way is refused rather than salvaged, because
    its steps may be missing. Time is linear in practice and capped by a scan budget.
Shapes of a plan
  - the wire shape ``{"plan_action", "execution_mode", "next_action", "steps": [...]}``; the runtime
    shape ``{"type": "execute_steps", "steps": [...], "execution_mode", "reasoning"}``; ``tasks`` for
    ``steps``; ``steps`` as an object keyed by id (``{"s1": {...}}``; a key is the id of a step
    that states none, a stated id wins with a warning), also with no ``steps`` key at all when
    every value is a step (``{"Step 1": {...}, "Step 2": {...}}``); a bare array of steps; a wrapper
    ``{"plan": ...}`` or ``{"decision": ...}`` (up to three levels) whose outer keys count as plan
    fields.
  - ``plan_action`` missing: ``new`` when there are steps. ``keep`` with no steps: keep (no
    decision). ``keep`` with steps: keep, the steps ignored with a warning. ``plan_action`` and
    ``execution_mode`` are read case-insensitively; ``parallel``, a mode once offered that ran
    exactly as ``dependency``, is read as ``dependency`` without a warning (old replies and
    checkpoints hold it); any other unknown ``execution_mode`` becomes ``dependency`` (the mode
    that honours dependencies) with a warning. ``type: final`` is an
    error: this parser reads plans.
Fields of a step (the canonical name wins; an alias next to it is ignored with a warning)
  - id: ``id``, ``step_id``, ``stepId``; a number under ``step`` when no id is given. Ids and
    dependencies are normalised by ``str()`` and ``strip()`` only (``1`` becomes ``"1"``), never
    renamed — except an id that breaks the one id rule (``models.STEP_ID_PATTERN``: a title such
    as ``"1. Web search"``), rewritten with each run of other characters as ``_`` and cut to 32,
    the same rewrite applied to the dependencies naming it (two ids rewriting to one are an
    error). ``name`` is not read: it is as often a tool or a title as an id.
  - description: ``description``, ``desc``, ``task``, ``action``, ``instruction``, ``step`` (a string).
  - depends_on: ``depends_on``, ``dependencies``, ``deps``, ``depends``, ``dependsOn``; a string
    (``"s1"`` or ``"s1, s2"``), a number, or null are accepted; repeats are removed.
  - tools (a step handed to an agent over them): ``tools``, a list or a comma-separated string; an
    entry may be an object with a ``name`` (``{"name": "search", "args": {...}}``), anything else
    that is not a name is an error. subagent: ``subagent``, ``agent``, ``sub_agent``.
    expected_output: ``expected_output``, ``expected``, ``expectedOutput``, ``expected_result``.
    ``execution_hint`` is read when valid, otherwise derived as in ``wire.py``.
Typed tool steps (``typed_args``; a step with neither tool nor subagent is a model step)
  - tool: ``tool``, ``tool_name``, ``function``; a one-element list; a call object
    ``{"name": "read_file", "arguments": {...}}`` (its arguments are the step's args unless args
    are given too); several names under ``tool`` are read as its tools list; ``""``, ``"none"``
    and ``"null"`` mean no tool (a model step).
  - args: ``args``, ``arguments``, ``parameters``, ``params``, ``input``; a JSON string holding
    an object is decoded (JSON repairs apply); any other non-object is dropped with a warning.
  - ``tools`` with one name and non-empty args is that step's ``tool`` (also a one-element list
    entry ``{"name": ..., "args": {...}}``); a typed step's own ``tools`` list is dropped.
  - args on a step with no tool (a model step) are dropped, after their references became
    dependencies.
  - with the tool's argument schema known: JSON-schema keywords it takes no argument for
    (``additionalProperties``, ``type``, ``properties``, ``required``, ``$schema``, ``$defs``,
    ``title``) are dropped from args, args written as a schema are read from under
    ``properties``, a number or boolean for a text argument is written as text, and an optional
    argument given as ``""`` where the tool takes a number, boolean, list or object is read as not
    given (small models fill every optional argument, with ``""`` for "none"). With no
    schema known only ``additionalProperties``, ``$schema`` and ``$defs`` are dropped.
  - an argument the tool does not declare (or any, with no schema known) whose whole value is the
    step's own output (``"output": "{{s1.output}}"`` on s1) is dropped: it names where the output
    goes; one the tool declares is left for the validator to refuse.
  - references in args written ``{{s1}}``, ``{{ s1.output }}``, ``{{s1.result}}``,
    ``{{step_s1.output}}``, ``{{steps.s1.output}}``, ``{s1.output}``, ``$s1.output`` or
    ``${s1.output}`` (a field may follow) become the canonical ``{{s1.output}}``; a double-brace
    reference to no known step is left for the validator to name. A reference to a known step
    not waited for (directly or through this plan's dependencies) adds that dependency.
  - missing ids: a step without one gets ``s<position>`` (warning). When no step had an id, a
    number ``k`` in a dependency means the k-th step, counted from 1 — unless some dependency is
    ``0``: then the numbering is ambiguous and no number is read as a position.
  - step field names in any case (``"Description"``); any other key of a step or of the plan is
    dropped with a warning.
Size
  - a reply over a byte cap is refused before any of it is read: ``REPLY_BASE_BYTES`` plus
    ``REPLY_BYTES_PER_STEP`` for each step ``max_steps`` allows (``WIRE_MAX_STEPS`` when no cap is
    given). The reader is linear but pure Python: a 9 MB reply of 100,000 steps took some 40 s to
    refuse *after* reading it whole; over the cap no honest plan can be, so none of it is read.
Rules that are never guessed away
  - a step naming a tool or subagent outside ``known_capabilities`` is dropped with a warning,
    never remapped to a similar name. A dependency on a dropped or nonexistent step, or on the
    step itself, is removed with a warning (a dependency on a step already in the goal's DAG,
    ``existing_ids``, is kept for the plan validator to judge).
  - errors: duplicate ids (dependents would be ambiguous), a cycle (named: ``cycle: s1 -> s2 ->
    s1``), more whole steps than ``max_steps`` (a cap fails the plan, it never truncates it), a
    plan whose every step was dropped, a step with no description, a step that is not an object,
    pure prose or a markdown list (no ids, dependencies or tools to read: inventing them would be
    inventing a plan), and anything ``AgentDecision`` rejects.

``parse_object`` (``answers.py``) reads the small wire answers with the same finding and repairs;
its own tolerances are listed there. The step-level reading and rules live in ``plan_steps.py``,
the JSON scanner in ``json_repair.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import ValidationError

from soothe_planner.errors import PlanParseError
from soothe_planner.models import (
    AgentDecision,
    ExecutionMode,
    StepAction,
    clean_text,
    clean_value,
    execution_mode_of,
)
from soothe_planner.parsing.json_repair import Arr, Found, Obj, Scan, json_type, scan_values, strip_think
from soothe_planner.parsing.plan_steps import (
    ID_KEYS,
    apply_rules,
    assign_ids,
    conform_ids,
    fold_keys,
    is_step_like,
    norm_id,
    read_step,
)
from soothe_planner.wire import WIRE_MAX_STEPS

__all__ = [
    "REPLY_BASE_BYTES",
    "REPLY_BYTES_PER_STEP",
    "ParsedDecision",
    "check_reply_size",
    "check_whole",
    "find_values",
    "parse_decision",
    "read_decision",
    "repair_warnings",
    "reply_byte_cap",
    "validation_errors",
]

REPLY_BASE_BYTES = 32 * 1024
"""Bytes any reply may take besides its steps: prose, a ``<think>`` block, the plan's own fields."""
REPLY_BYTES_PER_STEP = 8 * 1024
"""Bytes one step may take: an id, a description of 300 characters, a tool and its arguments (a
file's content written literally among them), with room for the repairs a small model needs."""

_LIST_KEYS = ("steps", "tasks")
_WRAPPERS = ("plan", "decision")
_PLAN_FIELDS = ("plan_action", "execution_mode", "next_action", "type", "reasoning")
_MODES: tuple[ExecutionMode, ...] = ("sequential", "dependency")


@dataclass
class ParsedDecision:
    """What a model's plan text said, after the tolerances and rules in this module's docstring."""

    plan_action: Literal["new", "keep"]
    decision: AgentDecision | None
    warnings: list[str] = field(default_factory=list)
    execution_mode: ExecutionMode = "dependency"
    next_action: str = ""


# --------------------------------------------------------------------------- finding


def reply_byte_cap(max_steps: int | None) -> int:
    """The most bytes a reply may hold to be read as a plan of at most ``max_steps`` steps."""
    steps = WIRE_MAX_STEPS if max_steps is None else max(1, max_steps)
    return REPLY_BASE_BYTES + REPLY_BYTES_PER_STEP * steps


def check_reply_size(text: str, cap: int, what: str) -> None:
    """Refuse ``text`` before reading it when it is over ``cap`` bytes (UTF-8)."""
    if len(text) <= cap // 4:  # no string of this many characters can be over the cap
        return
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > cap:
        raise PlanParseError(
            f"the answer is {size} bytes, over the cap of {cap} bytes for {what}; none of it was read: "
            "answer with the JSON alone",
            text[:2000],
        )


def find_values(text: str, useful: Callable[[Any], bool], warnings: list[str]) -> Scan:
    """The JSON values in a model's text (``<think>`` blocks removed, JSON encoded twice decoded)."""
    body = strip_think(text)
    stripped = body.strip()
    if len(stripped) > 1 and stripped[0] == stripped[-1] == '"':
        # JSON encoded twice: the whole answer is one string literal whose content is the JSON.
        try:
            inner = json.loads(stripped)
        except ValueError:
            inner = None
        if isinstance(inner, str) and inner.lstrip()[:1] in ("{", "["):
            warnings.append("the answer was a JSON string holding the JSON; decoded it")
            body = inner
    return scan_values(body, useful)


def repair_warnings(found: list[Found]) -> list[str]:
    repairs = sorted({r for f in found for r in f.repairs} - {"cut off"})
    return [f"repaired JSON: {', '.join(repairs)}"] if repairs else []


def _is_step(v: Any) -> bool:
    return is_step_like(v) and not _is_container(v)


def _is_keyed_steps(v: Any) -> bool:
    # {"Step 1": {...}, "Step 2": {...}}: every value a step, keyed by its name.
    return isinstance(v, dict) and bool(v) and all(is_step_like(x) for x in v.values())


def _is_container(v: Any) -> bool:
    if not isinstance(v, dict):
        return False
    if any(k in v for k in _LIST_KEYS) or _is_keyed_steps(v):
        return True
    return any(isinstance(v.get(k), dict | list) for k in _WRAPPERS)


def _is_header(v: Any) -> bool:
    return isinstance(v, dict) and not _is_container(v) and not _is_step(v) and "plan_action" in v


def _is_step_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v) and any(_is_step(x) for x in v)


def check_whole(scan: Scan, chosen: list[Found], text: str, what: str = "plan") -> None:
    """Refuse values that sit inside a bracket that failed to parse: parts may be missing."""
    # Both lists are in text order; sweep them together, keeping the furthest failure so far.
    furthest, b = -1, 0
    reason = ""
    for f in chosen:
        while b < len(scan.broken) and scan.broken[b].start < f.start:
            if scan.broken[b].pos > furthest:
                furthest, reason = scan.broken[b].pos, scan.broken[b].reason
            b += 1
        if furthest > f.start:
            raise PlanParseError(
                f"the JSON around the {what} is malformed at offset {furthest} ({reason}); "
                f"the {what} read from inside it may be missing parts",
                text,
            )


def _locate_plan(text: str) -> tuple[dict[str, Any], list[Any] | None, list[str]]:
    """The plan-level fields, the raw step list (None when no steps were written), warnings."""
    decoded: list[str] = []
    scan = find_values(
        text, lambda v: _is_container(v) or _is_step_list(v) or _is_step(v) or _is_header(v), decoded
    )
    plans = [f for f in scan.found if _is_container(f.value) or _is_step_list(f.value)]
    headers = [f for f in scan.found if _is_header(f.value)]
    distinct = len({repr(f.value) for f in plans})
    if distinct > 1:
        raise PlanParseError(f"found {distinct} different plans in the answer; write exactly one plan", text)
    used = plans[-1:] or [f for f in scan.found if _is_step(f.value)] or headers
    warnings = decoded + repair_warnings(used)
    if used and any(f.value.cut and f.start >= used[0].start for f in scan.found):
        # The text ended inside the plan or after it began (not in prose that opened a quote).
        warnings.append("the answer was cut off; closed the open JSON")
    if plans:
        chosen = plans[-1]
        check_whole(scan, [chosen], text)
        head: dict[str, Any] = {}
        if isinstance(chosen.value, list) and len(headers) == 1:
            head = dict(headers[0].value)
        return _unwrap(chosen.value, head, warnings, text)
    bare = [f for f in scan.found if _is_step(f.value)]
    if bare:
        check_whole(scan, bare, text)
        head = dict(headers[0].value) if len(headers) == 1 else {}
        steps: list[Any] = Arr(f.value for f in bare)
        return head, steps, warnings
    if len(headers) == 1:
        return dict(headers[0].value), None, warnings
    if scan.exhausted:
        raise PlanParseError(
            "no plan found before the scan budget ran out (the text is mostly not JSON)", text
        )
    if scan.broken and not scan.found:
        worst = max(scan.broken, key=lambda x: x.pos - x.start)
        raise PlanParseError(f"no readable JSON plan: malformed at offset {worst.pos} ({worst.reason})", text)
    cut = " (the answer was cut off)" if any(f.value.cut for f in scan.found) else ""
    raise PlanParseError(
        f"no JSON plan found{cut} (expected an object with 'steps', an array of steps, or step objects)", text
    )


def _keyed_steps(steps: dict[str, Any], warnings: list[str]) -> list[Any]:
    """``{"s1": {...}, "s2": {...}}``: each key is the id of a step that does not state one."""
    out = []
    for key, step in steps.items():
        folded = fold_keys(step)
        given = next((folded[k] for k in ID_KEYS if k in folded), None)
        if given is None:
            step["id"] = key  # mutated in place: a cut-off step stays marked as cut
        elif norm_id(given) != key.strip():
            warnings.append(f"step keyed {key!r} states id {given!r}; used the stated id")
        out.append(step)
    return out


def _unwrap(
    value: Any, head: dict[str, Any], warnings: list[str], text: str
) -> tuple[dict[str, Any], list[Any] | None, list[str]]:
    for _ in range(4):
        if isinstance(value, list):
            return head, value, warnings
        key = next((k for k in _LIST_KEYS if k in value), None)
        if key is not None:
            steps = value[key]
            head.update({k: v for k, v in value.items() if k != key})
            if steps is None:
                return head, None, warnings
            if isinstance(steps, dict) and steps and all(isinstance(v, dict) for v in steps.values()):
                steps = _keyed_steps(steps, warnings)
            if not isinstance(steps, list):
                raise PlanParseError(
                    f"'{key}' must be a list of step objects, got a JSON {json_type(steps)}", text
                )
            return head, steps, warnings
        wrapper = next((k for k in _WRAPPERS if isinstance(value.get(k), dict | list)), None)
        if wrapper is None and _is_keyed_steps(value):
            return head, _keyed_steps(value, warnings), warnings
        if wrapper is None:
            head.update(value)  # a wrapper holding plan fields but no steps (or cut before them)
            return head, None, warnings
        head.update({k: v for k, v in value.items() if k != wrapper})
        value = value[wrapper]
    raise PlanParseError("the plan is wrapped more than three levels deep", text)


# --------------------------------------------------------------------------- plan fields


def _plan_fields(
    head: dict[str, Any], has_steps: bool, warnings: list[str], text: str
) -> tuple[str, ExecutionMode, str, str]:
    for k in head:
        if k not in _PLAN_FIELDS:
            warnings.append(f"ignored unknown plan field {k!r}")
    kind = head.get("type")
    if kind is not None:
        kind = str(kind).strip().lower()
        if kind == "final":
            raise PlanParseError("a 'final' decision holds no steps to run; answer with a plan", text)
        if kind != "execute_steps":
            raise PlanParseError(f"decision type {head['type']!r} is not 'execute_steps'", text)
    raw_action = head.get("plan_action")
    if raw_action is None:
        if not has_steps:
            raise PlanParseError("the answer holds neither steps nor a plan_action", text)
        action = "new"
    else:
        action = str(raw_action).strip().lower()
        if action not in ("new", "keep"):
            raise PlanParseError(f"plan_action {raw_action!r} is not 'new' or 'keep'", text)
    mode: ExecutionMode = "dependency"
    raw_mode = head.get("execution_mode")
    if raw_mode is not None:
        m = execution_mode_of(str(raw_mode).strip().lower())
        if m in _MODES:
            mode = m
        else:
            warnings.append(
                f"execution_mode {raw_mode!r} is not one of {', '.join(_MODES)}; using 'dependency'"
            )
    next_action = head.get("next_action")
    reasoning = head.get("reasoning")
    return (
        action,
        mode,
        "" if next_action is None else str(next_action),
        "" if reasoning is None else str(reasoning),
    )


# --------------------------------------------------------------------------- public


def parse_decision(
    text: str,
    *,
    known_capabilities: Collection[str] | None = None,
    max_steps: int | None = None,
    existing_ids: Collection[str] = (),
    tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
) -> ParsedDecision:
    """Read a plan (``new`` with steps, or ``keep``) from a model's text; see the module docstring.

    ``existing_ids``: steps already in the goal's DAG, which new steps may depend on.
    ``tool_schemas``: the offered tools' argument schemas, by name (for the typed-step repairs).
    """
    check_reply_size(text, reply_byte_cap(max_steps), f"a plan of at most {max_steps or WIRE_MAX_STEPS} steps")
    text = clean_text(text)
    head, raw_steps, warnings = _locate_plan(text)
    return _decision(head, raw_steps, warnings, text, known_capabilities, max_steps, existing_ids, tool_schemas)


def read_decision(
    data: Mapping[str, Any],
    *,
    known_capabilities: Collection[str] | None = None,
    max_steps: int | None = None,
    existing_ids: Collection[str] = (),
    tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
) -> ParsedDecision:
    """A plan that is already JSON (a structured answer): the same fields and rules as
    ``parse_decision``, without looking for it in text."""
    data = clean_value(dict(data))
    text = json.dumps(data, ensure_ascii=False, default=str)  # what errors quote
    head, raw_steps, warnings = _unwrap(data, {}, [], text)
    return _decision(head, raw_steps, warnings, text, known_capabilities, max_steps, existing_ids, tool_schemas)


def _decision(
    head: dict[str, Any],
    raw_steps: list[Any] | None,
    warnings: list[str],
    text: str,
    known_capabilities: Collection[str] | None,
    max_steps: int | None,
    existing_ids: Collection[str],
    tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
) -> ParsedDecision:
    has_steps = bool(raw_steps)
    action, mode, next_action, reasoning = _plan_fields(head, raw_steps is not None, warnings, text)
    if action == "keep":
        if has_steps:
            warnings.append(f"plan_action 'keep' came with {len(raw_steps or [])} step(s); they were ignored")
        return ParsedDecision("keep", None, warnings, mode, next_action)
    if not raw_steps:
        cut = any("cut off" in w for w in warnings)
        raise PlanParseError(
            "plan_action 'new' but no steps were written" + (" (the answer was cut off)" if cut else ""), text
        )
    whole = list(raw_steps)
    if isinstance(whole[-1], Obj) and whole[-1].cut:
        whole.pop()
        warnings.append(f"dropped the last step: it was cut off mid-step ({len(whole)} whole step(s) kept)")
    if not whole:
        raise PlanParseError("the answer was cut off before any step was whole", text)
    if max_steps is not None and len(whole) > max_steps:
        raise PlanParseError(
            f"plan has {len(whole)} steps, over max_steps={max_steps}; plans over the cap fail rather than being cut",
            text,
        )
    steps = [read_step(raw, i + 1, warnings, text) for i, raw in enumerate(whole)]
    conform_ids(steps, warnings, text)
    assigned = assign_ids(steps, warnings)
    kept = apply_rules(steps, known_capabilities, warnings, text, assigned, existing_ids, tool_schemas)
    try:
        decision = AgentDecision(
            type="execute_steps",
            steps=[StepAction(**s) for s in kept],
            execution_mode=mode,
            reasoning=reasoning or next_action,
        )
    except ValidationError as e:
        raise PlanParseError(f"the plan does not validate: {validation_errors(e)}", text) from e
    return ParsedDecision("new", decision, warnings, mode, next_action)


def validation_errors(e: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in err['loc']) or 'value'}: {err['msg']}" for err in e.errors()[:5]
    )
