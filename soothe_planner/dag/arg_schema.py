"""Do a typed tool step's arguments fit its tool's argument schema, as the tool will read them?

A tool's ``Capability.args_schema`` is JSON Schema, and the subset tools use is small: an object
with ``properties``, ``required``, and per property ``type``, ``enum``, ``default``, ``items``,
``anyOf``/``oneOf`` (how an optional value is written) and ``$ref`` into ``$defs``. This module
checks that subset and renders it as a one-line signature for prompts and messages.

Weighed: the ``jsonschema`` package is installed here, but only as a development dependency, and it
answers a different question. JSON Schema is strict (``"5"`` is not an integer) while the tool
reads its arguments with pydantic in lax mode, which accepts ``"5"`` for an integer and ``"true"``
for a boolean. A plan refused for what the tool would have accepted costs a re-ask for nothing, so
the check here mirrors the tool's own coercions: the usual lax ones, and no more (a number where
a string belongs is refused, as pydantic refuses it). And a value that is still a reference to an
earlier step's output (``{{s1.output}}``) can only be judged when it is resolved, so a string
holding one passes for any scalar. Keywords outside the subset are not checked: the tool itself
still validates at run time; this check is there to catch at ingest what a model gets wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["check_args", "signature"]

_SHORT = {"string": "", "integer": "int", "number": "number", "boolean": "bool", "array": "list",
          "object": "object", "null": "null"}
_TRUE = frozenset({"true", "1", "yes", "y", "on", "t"})
_FALSE = frozenset({"false", "0", "no", "n", "off", "f"})
_A = {"integer": "an integer", "number": "a number", "boolean": "a boolean", "string": "a string",
      "array": "a list", "object": "an object", "null": "null"}
_SCALARS = frozenset({"string", "integer", "number", "boolean"})


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        target = (root.get("$defs") or {}).get(ref.rsplit("/", 1)[-1])
        if isinstance(target, Mapping):
            return target
    return schema


def _types(schema: Mapping[str, Any]) -> list[str]:
    t = schema.get("type")
    if isinstance(t, str):
        return [t]
    if isinstance(t, list):
        return [x for x in t if isinstance(x, str)]
    return []


def _fits_type(value: Any, kind: str) -> bool:
    """``value`` is of JSON type ``kind`` once pydantic's lax coercions are applied."""
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        if isinstance(value, bool):
            return True
        if isinstance(value, int):
            return value in (0, 1)
        return isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE
    if kind == "integer":
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return True
        if isinstance(value, float):
            return value.is_integer()
        if isinstance(value, str):
            try:
                int(value.strip())
            except ValueError:
                return False
            return True
        return False
    if kind == "number":
        if isinstance(value, bool):
            return False
        if isinstance(value, int | float):
            return True
        if isinstance(value, str):
            try:
                float(value.strip())
            except ValueError:
                return False
            return True
        return False
    if kind == "array":
        return isinstance(value, list | tuple)
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "null":
        return value is None
    return True  # a type this checker does not know is the tool's to judge


def _wanted(schema: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    schema = _resolve(schema, root)
    if isinstance(schema.get("enum"), list):
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list):
        return " or ".join(_wanted(b, root) for b in branches if isinstance(b, Mapping))
    kinds = _types(schema)
    return " or ".join(_A.get(k, k) for k in kinds) or "any value"


def _problem(
    value: Any, schema: Mapping[str, Any], root: Mapping[str, Any], deferred: Callable[[str], bool]
) -> bool:
    """True when ``value`` does not fit ``schema`` (within the subset this module checks)."""
    schema = _resolve(schema, root)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(branches, list) and branches:
        return all(_problem(value, b, root, deferred) for b in branches if isinstance(b, Mapping))
    kinds = _types(schema)
    if isinstance(value, str) and deferred(value):
        # Resolved at run time to text: fine wherever text may be coerced to the wanted scalar.
        return bool(kinds) and not (set(kinds) & _SCALARS)
    enum = schema.get("enum")
    if isinstance(enum, list):
        return value not in enum and not (isinstance(value, str | int | float) and str(value) in map(str, enum))
    if kinds and not any(_fits_type(value, k) for k in kinds):
        return True
    items = schema.get("items")
    if isinstance(value, list | tuple) and isinstance(items, Mapping):
        return any(_problem(v, items, root, deferred) for v in value)
    return False


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_args(
    args: Mapping[str, Any], schema: Mapping[str, Any], *, deferred: Callable[[str], bool] = lambda _s: False
) -> list[str]:
    """What is wrong with ``args`` for a tool whose argument schema is ``schema``; empty when nothing.

    Each problem names the argument, the value and the rule. ``deferred(text)`` says whether a
    string is resolved only at run time (it holds a reference), so its type cannot be judged yet.
    """
    problems: list[str] = []
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    for name in required:
        if name not in args:
            problems.append(f"required argument '{name}' is missing")
    # Properties declared and nothing said about others: an unknown argument is a typo, not a wish.
    extra = schema.get("additionalProperties", not props)
    for name, value in args.items():
        spec = props.get(name)
        if spec is None:
            if isinstance(extra, Mapping):
                spec = extra
            elif extra is not True:
                problems.append(f"argument '{name}' is not one the tool takes")
                continue
            else:
                continue
        if isinstance(spec, Mapping) and _problem(value, spec, schema, deferred):
            problems.append(f"argument '{name}' = {_show(value)} is not {_wanted(spec, schema)}")
    return problems


def _kind(spec: Mapping[str, Any], root: Mapping[str, Any]) -> str:
    spec = _resolve(spec, root)
    if isinstance(spec.get("enum"), list):
        return "|".join(str(v) for v in spec["enum"])
    branches = spec.get("anyOf") or spec.get("oneOf")
    if isinstance(branches, list):
        kinds = [_kind(b, root) for b in branches if isinstance(b, Mapping)]
        kinds = [k for k in kinds if k != "null"]
        return "|".join(dict.fromkeys(kinds)) if any(kinds) else ""
    return "|".join(_SHORT.get(k, k) for k in _types(spec) if k != "null" or len(_types(spec)) == 1)


def signature(schema: Mapping[str, Any] | None) -> str:
    """The arguments in one line: ``path, start_line?: int`` (``?`` marks optional; text is untyped).

    ``None`` (no schema known) renders as ``...``; a tool taking nothing as an empty string.
    """
    if schema is None:
        return "..."
    props = schema.get("properties")
    if not isinstance(props, Mapping):
        return "..." if schema.get("additionalProperties", True) is not False else ""
    required = set(schema.get("required") or [])
    parts = []
    for name, spec in props.items():
        mark = "" if name in required else "?"
        kind = _kind(spec, schema) if isinstance(spec, Mapping) else ""
        parts.append(f"{name}{mark}: {kind}" if kind else f"{name}{mark}")
    return ", ".join(parts)
