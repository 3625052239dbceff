"""A typed tool step as models write it: which tool, its arguments, and its references to earlier steps.

Part of the lenient parser: every tolerance here is listed in ``reader``'s docstring and every
repair is recorded as a warning. Reading a step's fields (``read_tool``, ``read_args``) needs
nothing but the step; the repairs after the ids are known (``repair_typed``) also use the offered
tools' argument schemas, when the caller has them, so that a key is dropped as a leaked schema
keyword only when the tool does not take an argument of that name.

References are written back in the one canonical form, ``{{s1.output}}`` (``dag.step_refs``),
whatever spelling the model used; a reference to a step the referencing step does not wait for
becomes a dependency. Neither repair decides whether the plan may stand: a reference to a step
that does not exist is left as written for the validator to refuse.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any

from soothe_planner.dag import (
    REFERENCE_RE,
    arg_strings,
    canonical_reference,
    map_arg_strings,
    parse_token,
    reachable,
)
from soothe_planner.errors import PlanParseError
from soothe_planner.parsing.json_repair import json_type, scan_values

__all__ = ["ARGS_KEYS", "TYPED_TOOL_KEYS", "read_args", "read_tool", "repair_typed", "settle_tools"]

TYPED_TOOL_KEYS = ("tool", "tool_name", "function")
ARGS_KEYS = ("args", "arguments", "parameters", "params", "input")
_CALL_ARGS = ("arguments", "args", "parameters", "input")
_NO_TOOL = frozenset({"", "none", "null"})
# Keys a model copies from a JSON schema into the arguments it was asked to fill.
_SCHEMA_KEYWORDS = frozenset({"additionalProperties", "type", "properties", "required", "$schema", "$defs", "title"})
_ALWAYS_KEYWORDS = frozenset({"additionalProperties", "$schema", "$defs"})  # no argument is named so
_PREFIXES = ("steps.", "step.", "outputs.")
_TOKEN = r"[A-Za-z0-9_][A-Za-z0-9_.-]*?"
_SINGLE_RE = re.compile(r"(?<![{$])\{\s*(" + _TOKEN + r"\.(?:output|result)(?:\.[A-Za-z0-9_]+)?)\s*\}(?!\})")
_DOLLAR_RE = re.compile(
    r"\$\{\s*(" + _TOKEN + r")\s*\}|\$([A-Za-z0-9_][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*?\.(?:output|result)(?:\.[A-Za-z0-9_]+)?)\b"
)


def read_tool(value: Any, label: str, warnings: list[str], text: str) -> tuple[str | None, dict[str, Any] | None, list[str]]:
    """``(tool, args written inside the tool value, names that belong in tools)`` from a step's ``tool``."""
    if value is None:
        return None, None, []
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        # {"name": "read_file", "arguments": {...}}: a function call written as the step's tool.
        args = next((value[k] for k in _CALL_ARGS if k in value), None)
        warnings.append(f"step {label}: read the tool written as a call object as tool {value['name'].strip()!r}")
        return _tool_name(value["name"], label, warnings), (None if args is None else read_args(args, label, warnings)), []
    if isinstance(value, list):
        if len(value) == 1 and isinstance(value[0], str | dict):
            return read_tool(value[0], label, warnings, text)
        if not value:
            return None, None, []
        warnings.append(f"step {label}: 'tool' held {len(value)} names; read them as its tools list")
        return None, None, [_plain(v, label, text) for v in value]
    return _tool_name(_plain(value, label, text), label, warnings), None, []


def _plain(value: Any, label: str, text: str) -> str:
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        return str(value["name"]).strip()
    if not isinstance(value, str):
        raise PlanParseError(f"step {label} names a tool with a JSON {json_type(value)}, not a name", text)
    return value.strip()


def _tool_name(name: str, label: str, warnings: list[str]) -> str | None:
    name = name.strip()
    if name.lower() in _NO_TOOL:
        if name:
            warnings.append(f"step {label}: tool {name!r} read as no tool (a model step)")
        return None
    return name


def read_args(value: Any, label: str, warnings: list[str]) -> dict[str, Any]:
    """A step's arguments: an object, or a JSON string holding one; anything else is dropped, warned."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        decoded: Any = None
        try:
            decoded = json.loads(value)
        except ValueError:
            found = [f.value for f in scan_values(value, lambda v: isinstance(v, dict)).found if isinstance(f.value, dict)]
            decoded = dict(found[0]) if len(found) == 1 else None
        if isinstance(decoded, dict):
            warnings.append(f"step {label}: args were a JSON string; decoded it")
            return decoded
        if not value.strip():
            return {}
    warnings.append(f"step {label}: args are a JSON {json_type(value)}, not an object of arguments; dropped them")
    return {}


def settle_tools(step: dict[str, Any], label: str, warnings: list[str], args_given: bool) -> None:
    """``tools: ["x"]`` with args is the typed step ``tool: "x"``; a typed step needs no tools list."""
    tools = step["tools"]
    if step["tool"] is None and len(tools) == 1 and args_given:
        step["tool"] = tools[0]
        step["tools"] = []
        warnings.append(f"step {label}: read the one-element tools list with args as the step's tool {tools[0]!r}")
    elif step["tool"] is not None and tools:
        if tools != [step["tool"]]:
            warnings.append(f"step {label}: dropped tools {tools} (the step calls tool {step['tool']!r})")
        step["tools"] = []


# --------------------------------------------------------------------------- after ids are known


def _resolve(token: str, known: Collection[str]) -> tuple[str, str | None]:
    step_id, field = parse_token(token, known)
    if step_id in known:
        return step_id, field
    for prefix in _PREFIXES:
        if token.startswith(prefix):
            inner_id, inner_field = parse_token(token[len(prefix) :], known)
            if inner_id in known:
                return inner_id, inner_field
    return step_id, field


def _normalise(text: str, known: Collection[str], seen: dict[str, str]) -> str:
    """``text`` with each reference spelling rewritten canonically (``seen``: written -> canonical)."""

    def double(m: re.Match[str]) -> str:
        step_id, field = _resolve(m.group(1), known)
        if step_id not in known:
            return m.group(0)  # unknown: left as written, for the validator to name
        return _note(m.group(0), canonical_reference(step_id, field), seen)

    def other(m: re.Match[str]) -> str:
        token = next(g for g in m.groups() if g)
        step_id, field = _resolve(token, known)
        if step_id not in known and token == step_id:  # "${HOME}": not a reference at all
            return m.group(0)
        return _note(m.group(0), canonical_reference(step_id, field), seen)

    if "$" in text:
        text = _DOLLAR_RE.sub(other, text)
    if "{" in text:
        text = REFERENCE_RE.sub(double, text)
        text = _SINGLE_RE.sub(other, text)
    return text


def _note(written: str, canon: str, seen: dict[str, str]) -> str:
    if written != canon:
        seen[written] = canon
    return canon


def _declared(schema: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """The arguments ``schema`` declares, by name ({} with no schema, or none it can read)."""
    props = schema.get("properties") if schema is not None else None
    return props if isinstance(props, Mapping) else {}


def _schema_repairs(step: dict[str, Any], label: str, schema: Mapping[str, Any] | None, warnings: list[str]) -> None:
    args: dict[str, Any] = step["args"]
    declared = _declared(schema)
    keywords = _SCHEMA_KEYWORDS if schema is not None else _ALWAYS_KEYWORDS
    inner = args.get("properties")
    if (
        schema is not None and "properties" not in declared and isinstance(inner, dict) and inner
        and set(inner) <= set(declared) and not any(isinstance(v, dict) for v in inner.values())
    ):
        # {"type": "object", "properties": {"path": "a.txt"}}: the arguments written as a schema.
        args.update({k: v for k, v in inner.items() if k not in args})
        warnings.append(f"step {label}: args were written as a schema; read the values under 'properties'")
    leaked = [k for k in args if k in keywords and k not in declared]
    for k in leaked:
        del args[k]
    if leaked:
        warnings.append(f"step {label}: dropped schema keyword(s) {leaked} from the args (not arguments of the tool)")
    required = schema.get("required") if schema is not None else None
    needed = set(required) if isinstance(required, list) else set()
    for name, spec in declared.items():
        value = args.get(name)
        if (value == "" and name not in needed and isinstance(spec, Mapping)
                and spec.get("type") in ("integer", "number", "boolean", "array", "object")):
            del args[name]  # year="" for an optional integer: the model's way of leaving it out
            warnings.append(f"step {label}: optional argument {name!r} given as \"\" read as not given "
                            f"(the tool takes a {spec['type']})")
            continue
        if isinstance(spec, Mapping) and spec.get("type") == "string" and isinstance(value, int | float | bool):
            args[name] = json.dumps(value)  # 42 -> "42", True -> "true": what the model meant as text
            warnings.append(f"step {label}: argument {name!r} = {value!r} written as text, as the tool takes text")


def repair_typed(
    steps: list[dict[str, Any]],
    known_ids: Collection[str],
    tool_schemas: Mapping[str, Mapping[str, Any]] | None,
    warnings: list[str],
) -> None:
    """Repairs that need the plan's ids and the tools' schemas; mutates ``steps`` (see the module docstring).

    ``known_ids``: the ids of this plan's steps and of the steps already in the goal's DAG.
    """
    deps = {s["id"]: s["depends_on"] for s in steps}
    for s in steps:
        if not s["args"]:
            continue
        label = repr(s["id"])
        seen: dict[str, str] = {}
        s["args"] = map_arg_strings(s["args"], lambda t: _normalise(t, known_ids, seen))  # noqa: B023
        for written, canon in seen.items():
            warnings.append(f"step {label}: reference {written!r} in its args read as {canon!r}")
        if s["tool"] is None and not s["tools"]:
            refs = _referenced(s["args"], known_ids)
            warnings.append(f"step {label}: dropped args {sorted(s['args'])} from a step with no tool (a model step)")
            s["args"] = {}
        else:
            if s["tool"] is not None:
                schema = (tool_schemas or {}).get(s["tool"])
                _schema_repairs(s, label, schema, warnings)
                _drop_own_output(s, label, schema, known_ids, warnings)
            refs = _referenced(s["args"], known_ids)
        reach: set[str] | None = None
        for ref in refs:
            if ref == s["id"] or ref in s["depends_on"]:
                continue
            if reach is None:
                reach = reachable(s["depends_on"], deps)
            if ref in reach:
                continue
            s["depends_on"].append(ref)
            reach = None  # the new dependency may already lead to the next reference
            warnings.append(f"step {label}: its args use {canonical_reference(ref)}, so it now depends on {ref!r}")


def _drop_own_output(step: dict[str, Any], label: str, schema: Mapping[str, Any] | None,
                     known: Collection[str], warnings: list[str]) -> None:
    """Drop each argument the tool does not declare whose whole value is the step's own output
    (``"output": "{{s1.output}}"`` on step s1): it names where the output goes, not an input; no
    step can wait for its own output. An argument the tool declares is left for the validator."""
    declared = _declared(schema)
    own = [k for k, v in step["args"].items()
           if k not in declared and isinstance(v, str) and (m := REFERENCE_RE.fullmatch(v.strip())) is not None
           and parse_token(m.group(1), known)[0] == step["id"]]
    for k in own:
        warnings.append(f"step {label}: dropped argument {k!r} = {step['args'].pop(k)!r}: the step's own output "
                        "is no input (it names where the output goes)")


def _referenced(args: dict[str, Any], known: Collection[str]) -> list[str]:
    out: list[str] = []
    for _where, text in arg_strings(args):
        for m in REFERENCE_RE.finditer(text):
            step_id, _field = parse_token(m.group(1), known)
            if step_id in known and step_id not in out:
                out.append(step_id)
    return out
