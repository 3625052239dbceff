"""Which tools or actions does a WorFBench task offer, as the planner's capabilities?

A WorFBench task describes what may be used in its own text, one form per subset, and the
two-shot prompt shows that text whole. The planner reads what may be used from
``PlanContext.available_capabilities``, so the planner variants get the same list, read from the
same text (the task text itself still goes whole to every variant):

- **toolbench**: ``api_list:[{'name', 'description', 'parameters': {JSON Schema, plus 'optional'}}]``
  — the schema as given, less the non-standard ``optional`` list (``required`` says the same).
- **seal_tools**: ``The tool list you can select from: [{'api_name', 'api_description',
  'parameters': {name: {'type': 'str', 'description'}}, 'required': [...]}]`` — written as a
  JSON Schema: Python type names become JSON types (``str`` → ``string``, ``int`` → ``integer``,
  ``float`` → ``number``, ``bool`` → ``boolean``, ``list`` → ``array``, ``dict`` → ``object``);
  a type it does not name is left out (the argument is untyped), never guessed.
- **lumos**: ``The api list you can use: {'QA(context, query)': 'description', ...}`` — the name
  before the parenthesis, each parameter untyped and not marked required (the text says neither);
  a parameter written ``variable/number`` keeps that name. Some items offer ``[]``: nothing.
- **os**: ``The action list you can take:`` then ``name: description`` lines (bash, finish,
  answer) — no parameters are shown, so none are given (``args_schema`` stays ``None``).

Every capability is a ``tool``, not read-only (the text says nothing of it). A name offered twice
is kept once, the first time. A list that cannot be read is an error naming the item: the data is
fixed, so a failure here is a change in the data, not a model's slip.
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["capabilities_of", "tool_specs"]

_MARKERS = {
    "toolbench": "api_list:",
    "seal_tools": "The tool list you can select from:",
    "lumos": "The api list you can use:",
    "os": "The action list you can take:",
}
_JSON_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array",
               "dict": "object", "string": "string", "integer": "integer", "number": "number",
               "boolean": "boolean", "array": "array", "object": "object"}


def _listed(item: dict[str, Any]) -> tuple[str, str]:
    """The subset's marker and the text after it, from the task's user turn."""
    subset = str(item["source"])
    text = str(item["conversations"][1]["content"])
    marker = _MARKERS.get(subset)
    if marker is None:
        raise ValueError(f"item {item.get('id')!r}: no tool list is known for subset {subset!r}")
    if marker not in text:
        raise ValueError(f"item {item.get('id')!r}: the task text has no {marker!r}")
    return subset, text.split(marker, 1)[1].strip()


def _literal(item: dict[str, Any], text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"item {item.get('id')!r}: its tool list is not a Python literal ({exc})") from None


def _property(spec: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if isinstance(spec, dict):
        kind = _JSON_TYPES.get(str(spec.get("type", "")).lower())
        if kind:
            out["type"] = kind
        if spec.get("description"):
            out["description"] = str(spec["description"])
        if "enum" in spec:
            out["enum"] = spec["enum"]
    return out


def _toolbench(entry: dict[str, Any]) -> dict[str, Any]:
    params = entry.get("parameters") or {}
    props = {str(k): _property(v) for k, v in (params.get("properties") or {}).items()}
    schema: dict[str, Any] = {"type": "object", "properties": props}
    required = [r for r in params.get("required") or [] if r in props]
    if required:
        schema["required"] = required
    return {"name": str(entry["name"]), "description": str(entry.get("description", "")), "args_schema": schema}


def _seal_tools(entry: dict[str, Any]) -> dict[str, Any]:
    props = {str(k): _property(v) for k, v in (entry.get("parameters") or {}).items()}
    schema: dict[str, Any] = {"type": "object", "properties": props}
    required = [r for r in entry.get("required") or [] if r in props]
    if required:
        schema["required"] = required
    return {"name": str(entry["api_name"]), "description": str(entry.get("api_description", "")), "args_schema": schema}


def _lumos(signature: str, description: str) -> dict[str, Any]:
    name, _, rest = signature.partition("(")
    params = [p.strip() for p in rest.rstrip(")").split(",") if p.strip()]
    return {"name": name.strip(), "description": str(description),
            "args_schema": {"type": "object", "properties": {p: {} for p in params}}}


def tool_specs(item: dict[str, Any]) -> list[dict[str, Any]]:
    """What ``item``'s text offers: ``{"name", "description", "args_schema"}`` per tool or action, in its order."""
    subset, text = _listed(item)
    specs: list[dict[str, Any]]
    if subset == "os":
        specs = []
        for line in text.splitlines():
            name, sep, about = line.partition(":")
            if sep and name.strip():
                specs.append({"name": name.strip(), "description": about.strip(), "args_schema": None})
    elif subset == "lumos":
        listed = _literal(item, text)
        specs = [_lumos(str(k), v) for k, v in listed.items()] if isinstance(listed, dict) else []
    else:
        listed = _literal(item, text)
        read = _toolbench if subset == "toolbench" else _seal_tools
        specs = [read(entry) for entry in listed]
    seen: set[str] = set()
    out = []
    for spec in specs:
        if spec["name"] and spec["name"] not in seen:
            seen.add(spec["name"])
            out.append(spec)
    return out


def capabilities_of(item: dict[str, Any]) -> list[Any]:
    """``item``'s tools or actions as the planner's ``Capability`` objects (every one a tool)."""
    from soothe_planner.models import Capability

    return [Capability(name=s["name"], kind="tool", description=s["description"], args_schema=s["args_schema"])
            for s in tool_specs(item)]
