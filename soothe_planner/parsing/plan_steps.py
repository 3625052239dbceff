"""The steps of a plan a model wrote: their fields, their ids, and the rules no reading may bend.

Part of the lenient parser (``parsing.py``), split out so that each module holds one concept:
``parsing.py`` finds the plan in the text and decides its shape; this reads each step's fields
through the aliases models use, gives ids to steps without one, and applies the rules that are
never guessed away (unknown capabilities dropped, never remapped; duplicate ids and cycles
refused). A typed tool step's ``tool`` and ``args`` are read by ``typed_args``. Every tolerance
here is listed in the docstring of ``reader``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any

from soothe_planner.dag import find_cycle
from soothe_planner.errors import PlanParseError
from soothe_planner.models import STEP_ID_RULE, is_step_id
from soothe_planner.parsing.json_repair import json_type
from soothe_planner.parsing.typed_args import (
    ARGS_KEYS,
    TYPED_TOOL_KEYS,
    read_args,
    read_tool,
    repair_typed,
    settle_tools,
)
from soothe_planner.wire import model_step_name

__all__ = [
    "ID_KEYS",
    "MODEL_STEP_TOOL",
    "apply_rules",
    "assign_ids",
    "conform_ids",
    "derived_description",
    "fold_keys",
    "is_step_like",
    "norm_id",
    "read_step",
]

ID_KEYS = ("id", "step_id", "stepId")
DESC_KEYS = ("description", "desc", "task", "action", "instruction", "step")
DEP_KEYS = ("depends_on", "dependencies", "deps", "depends", "dependsOn")
TOOL_KEYS = ("tools",)
SUB_KEYS = ("subagent", "agent", "sub_agent")
EXP_KEYS = ("expected_output", "expected", "expectedOutput", "expected_result")
STEP_KEYS = frozenset(
    (*ID_KEYS, *DESC_KEYS, *DEP_KEYS, *TOOL_KEYS, *TYPED_TOOL_KEYS, *ARGS_KEYS, *SUB_KEYS, *EXP_KEYS, "execution_hint")
)
# "function" and the args aliases are not markers: {"name": ..., "arguments": ...} is a tool call, not a step.
STEP_MARKERS = frozenset((*ID_KEYS, *DESC_KEYS, *DEP_KEYS, *TOOL_KEYS, "tool", "tool_name", *SUB_KEYS))
HINTS = ("tool", "subagent", "remote", "auto")
MODEL_STEP_TOOL = "answer"
"""The name under which a plan may write a model step as if it were a tool: ``{"tool": "answer",
"args": {"task": ...}}``. Small models fill one uniform step shape (a tool and its args) far more
reliably than a nullable tool beside a free-text description; the step is read as the model step
``task`` describes. A real tool of that name wins: the model step then goes by another name
(``model_step_name``), so the plan's reader, its schema and its prompt never offer two tools of one
name."""

_DESCRIPTION_CHARS = 300

_FOLDED = {k.lower(): k for k in STEP_KEYS}
_MARKERS_FOLDED = frozenset(k.lower() for k in STEP_MARKERS)


def is_step_like(value: Any) -> bool:
    """An object carrying at least one step field, under any alias and in any case."""
    return isinstance(value, dict) and any(str(k).lower() in _MARKERS_FOLDED for k in value)


def fold_keys(step: dict[str, Any]) -> dict[str, Any]:
    """``{"Description": ...}`` read as ``{"description": ...}``; an exact name already present wins."""
    out: dict[str, Any] = {}
    for k, v in step.items():
        name = k if k in STEP_KEYS else _FOLDED.get(str(k).lower(), k)
        if name in out or (name != k and name in step):
            name = k  # both spellings given: the odd one is reported as an unknown field
        out[name] = v
    return out


def _pick(step: dict[str, Any], keys: tuple[str, ...], sid: str, warnings: list[str]) -> Any:
    present = [k for k in keys if k in step]
    for k in present[1:]:
        warnings.append(f"step {sid}: ignored {k!r} (already have {present[0]!r})")
    return step[present[0]] if present else None


def norm_id(value: Any) -> str | None:
    """An id or dependency as ``str()`` and ``strip()`` leave it; None when it cannot be one."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str | int | float):
        s = str(value).strip()
        return s or None
    return None


def _split(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [p for p in (x.strip() for x in value.split(",")) if p]
    if isinstance(value, list):
        return value
    return [value]


def _name(value: Any, kind: str, label: str, text: str) -> str:
    """A tool or subagent name: a string, or an object carrying one under ``name``."""
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        value = value["name"]  # {"name": "search", "args": {...}}: the function-call habit
    if not isinstance(value, str):
        raise PlanParseError(f"step {label} names a {kind} with a JSON {json_type(value)}, not a name", text)
    return value.strip()


def read_step(raw: Any, position: int, warnings: list[str], text: str) -> dict[str, Any]:
    """One step's fields under their canonical names (``id`` may be None: assigned later)."""
    label = f"#{position}"
    if not isinstance(raw, dict):
        raise PlanParseError(
            f"step {label} is a JSON {json_type(raw)}, not an object with a description", text
        )
    step = fold_keys(raw)
    if "step" in step and not isinstance(step["step"], str):
        # {"step": 1, "action": "..."}: the number is the step's id, not its description.
        number = step.pop("step")
        if not any(k in step for k in ID_KEYS):
            step["id"] = number
    sid = norm_id(_pick(step, ID_KEYS, label, warnings))
    label = repr(sid) if sid else label
    description = _pick(step, DESC_KEYS, label, warnings)
    has_tool = any(step.get(k) for k in TYPED_TOOL_KEYS)
    if (description is None or (isinstance(description, str) and not description.strip())) and not has_tool:
        raise PlanParseError(f"step {label} has no description (looked for {', '.join(DESC_KEYS)})", text)
    deps: list[str] = []
    for d in _split(_pick(step, DEP_KEYS, label, warnings)):
        nd = norm_id(d)
        if nd is None:
            raise PlanParseError(f"step {label} has a dependency {d!r} that is not a step id", text)
        if nd in deps:
            warnings.append(f"step {label}: repeated dependency {nd!r} removed")
        else:
            deps.append(nd)
    raw_tools = _split(_pick(step, TOOL_KEYS, label, warnings))
    tools = [_name(t, "tool", label, text) for t in raw_tools]
    tool, call_args, more_tools = read_tool(_pick(step, TYPED_TOOL_KEYS, label, warnings), label, warnings, text)
    tools += more_tools
    args = read_args(_pick(step, ARGS_KEYS, label, warnings), label, warnings)
    if call_args:
        if args:
            warnings.append(f"step {label}: ignored the arguments inside the tool value (already have args)")
        else:
            args = call_args
    if tool is None and len(raw_tools) == 1 and not args:
        entry = raw_tools[0]  # tools: [{"name": "search", "args": {...}}]: a call written in the list
        inner = next((entry[k] for k in ("args", "arguments") if k in entry), None) if isinstance(entry, dict) else None
        if inner is not None:
            args = read_args(inner, label, warnings)
    subagent = _pick(step, SUB_KEYS, label, warnings)
    expected = _pick(step, EXP_KEYS, label, warnings)
    hint = step.get("execution_hint")
    for k in step:
        if k not in STEP_KEYS:
            warnings.append(f"step {label}: ignored unknown field {k!r}")
    subagent = _name(subagent, "subagent", label, text) if subagent is not None else None
    if hint not in HINTS:
        if hint is not None:
            warnings.append(
                f"step {label}: execution_hint {hint!r} is not one of {', '.join(HINTS)}; derived it"
            )
        hint = "subagent" if subagent else "tool" if (tools or tool) else "auto"
    out = {
        "id": sid,
        "description": description,
        "tools": [t for t in tools if t],
        "subagent": subagent or None,
        "expected_output": "" if expected is None else expected,
        "depends_on": deps,
        "execution_hint": hint,
        "tool": tool,
        "args": args,
    }
    # Empty args say nothing: a structured answer always carries the field.
    settle_tools(out, label, warnings, bool(args))
    if (description is None or (isinstance(description, str) and not description.strip())) and out["tool"]:
        # a typed step written without one (the compact plan shape has no description field): the
        # call it makes says what it does; a model step written as the ``answer`` tool is read later
        out["description"] = derived_description(out["tool"], out["args"])
    return out


def derived_description(tool: str | None, args: Mapping[str, Any]) -> str:
    """What a typed step does, in the words of its call: ``read_file {"path": "README.md"}``."""
    if tool == MODEL_STEP_TOOL and isinstance(args.get("task"), str) and args["task"].strip():
        return args["task"].strip()[:_DESCRIPTION_CHARS]
    shown = json.dumps(dict(args), ensure_ascii=False, default=str) if args else ""
    text = f"{tool} {shown}".strip()
    return text if len(text) <= _DESCRIPTION_CHARS else text[: _DESCRIPTION_CHARS - 1] + "…"


def _model_steps_written_as_tools(steps: list[dict[str, Any]], known: Collection[str] | None, warnings: list[str]) -> None:
    """``{"tool": "answer", "args": {"task": t}}`` read as the model step ``t`` (see ``MODEL_STEP_TOOL``;
    under the name ``model_step_name`` gives it among the ``known`` tools)."""
    name = model_step_name(known)
    for s in steps:
        if s["tool"] != name:
            continue
        task = s["args"].get("task") if isinstance(s["args"], dict) else None
        if isinstance(task, str) and task.strip():
            s["description"] = task.strip()[:_DESCRIPTION_CHARS]
        elif s["description"].startswith(name):
            s["description"] = "write the answer from the outputs of the steps it depends on"
        others = {k: v for k, v in s["args"].items() if k != "task"} if isinstance(s["args"], dict) else {}
        if others:
            warnings.append(f"step {s['id']!r}: ignored args {sorted(others)} of the {name!r} step (it takes a task)")
        s["tool"], s["args"], s["tools"] = None, {}, []
        s["execution_hint"] = "auto"


_NOT_ID_CHARS = re.compile(r"[^A-Za-z0-9_.-]+")


def conform_ids(steps: list[dict[str, Any]], warnings: list[str], text: str) -> None:
    """Rewrite every id that breaks the one id rule, and the dependencies naming it, in place.

    Small models write titles as ids (``"1. Web search"``, a key ``"Step 1"``); an id is printed
    into every later prompt, so one holding ``<``, a quote or a newline could close a fence there.
    Each run of other characters becomes ``_`` and the id is cut to 32 characters — the same
    rewrite for the step and for every dependency that names it, so the plan keeps its shape. Two
    ids that rewrite to one (or to an id another step has) are an error, never merged.
    """
    renamed: dict[str, str] = {}
    for s in steps:
        sid = s["id"]
        if sid is None or is_step_id(sid):
            continue
        new = (_NOT_ID_CHARS.sub("_", sid).strip("_") or "step")[:32]
        renamed[sid] = new
        s["id"] = new
    if not renamed:
        return
    given = [s["id"] for s in steps if s["id"] is not None]
    for old, new in renamed.items():
        if given.count(new) > 1:
            raise PlanParseError(
                f"step id {old!r} breaks the id rule ({STEP_ID_RULE}) and its rewrite {new!r} is the id of "
                "another step; give every step an id of those characters",
                text,
            )
    warnings.append(
        f"rewrote {len(renamed)} id(s) to keep the id rule ({STEP_ID_RULE}): "
        + ", ".join(f"{old!r} -> {new!r}" for old, new in renamed.items())
    )
    for s in steps:
        s["depends_on"] = list(dict.fromkeys(renamed.get(d, d) for d in s["depends_on"]))


def _position(dep: str, count: int) -> bool:
    return dep.isascii() and dep.isdigit() and len(dep) < 7 and 1 <= int(dep) <= count


def assign_ids(steps: list[dict[str, Any]], warnings: list[str]) -> set[str]:
    """Give ``s<position>`` to steps without an id; returns the ids given."""
    missing = [i for i, s in enumerate(steps) if s["id"] is None]
    if not missing:
        return set()
    none_given = len(missing) == len(steps)
    for i in missing:
        steps[i]["id"] = f"s{i + 1}"
    warnings.append(
        f"assigned ids to {len(missing)} step(s) without one: " + ", ".join(f"s{i + 1}" for i in missing)
    )
    if none_given and any(d == "0" for s in steps for d in s["depends_on"]):
        # Counted from 0 or from 1? "depends on 1" would name a different step either way.
        warnings.append("dependencies are numbered from 0, so they are not read as step positions")
    elif none_given:
        # With no ids at all and no step 0, "depends on 2" can only mean the second step.
        count = len(steps)
        for s in steps:
            renamed = [f"s{int(d)}" if _position(d, count) else d for d in s["depends_on"]]
            if renamed != s["depends_on"]:
                warnings.append(
                    f"step {s['id']!r}: read numbered dependencies {s['depends_on']} as {renamed}"
                )
                s["depends_on"] = list(dict.fromkeys(renamed))
    return {steps[i]["id"] for i in missing}


def apply_rules(
    steps: list[dict[str, Any]],
    known: Collection[str] | None,
    warnings: list[str],
    text: str,
    assigned: set[str],
    existing: Collection[str] = (),
    tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The steps that survive the rules, dependencies cleaned; raises on what cannot be repaired.

    ``existing`` are the ids of steps already in the goal's DAG: a dependency on one of them is
    kept as written (whether it may stand is the plan validator's call, not a repair's).
    ``tool_schemas`` (tool name -> argument schema) lets the typed-step repairs tell a leaked
    schema keyword from a real argument.
    """
    seen: set[str] = set()
    for s in steps:
        if s["id"] in seen:
            why = " (one was given to a step written without an id)" if s["id"] in assigned else ""
            raise PlanParseError(
                f"duplicate step id {s['id']!r}{why}: dependents would be ambiguous; give every step its own id",
                text,
            )
        seen.add(s["id"])
    _model_steps_written_as_tools(steps, known, warnings)
    dropped: set[str] = set()
    if known is not None:
        known_set = set(known)
        shown = ", ".join(sorted(known_set)[:12]) or "none"
        for s in steps:
            names = [("tool", t) for t in s["tools"]] + (
                [("subagent", s["subagent"])] if s["subagent"] else []
            ) + ([("tool", s["tool"])] if s["tool"] else [])
            bad = [f"{kind} {name!r}" for kind, name in names if name not in known_set]
            if bad:
                dropped.add(s["id"])
                warnings.append(
                    f"dropped step {s['id']!r}: {', '.join(bad)} not a known capability (known: {shown})"
                )
    kept = [s for s in steps if s["id"] not in dropped]
    if not kept:
        why = "; ".join(w.removeprefix("dropped ") for w in warnings if w.startswith("dropped step "))
        raise PlanParseError(f"every step was dropped ({len(steps)} named unknown tools or subagents): {why}", text)
    ids = {s["id"] for s in kept} | (set(existing) - dropped)
    repair_typed(kept, ids, tool_schemas, warnings)
    for s in kept:
        clean = []
        for d in s["depends_on"]:
            if d == s["id"]:
                warnings.append(f"step {d!r} depended on itself; dependency removed")
            elif d in dropped:
                warnings.append(f"step {s['id']!r} depended on dropped step {d!r}; dependency removed")
            elif d not in ids:
                # Small models often list the tools a step needs as its dependencies; say so, so a
                # re-ask can fix it, but never move the name into tools (that would be a guess).
                is_tool = d in s["tools"] or d == s["tool"] or (known is not None and d in known)
                hint = f" ({d!r} is a tool, not a step)" if is_tool else ""
                warnings.append(f"step {s['id']!r} depended on unknown step {d!r}{hint}; dependency removed")
            else:
                clean.append(d)
        s["depends_on"] = clean
    cycle = find_cycle({s["id"]: s["depends_on"] for s in kept})  # ids outside this plan are leaves
    if cycle:
        raise PlanParseError("cycle: " + " -> ".join(cycle) + " (a step cannot wait for itself)", text)
    return kept
