"""How does the config reference stay true to the code it documents?

It is not written by hand: this mkdocs hook walks ``SootheConfig`` — every section, every field,
nested sections and the per-name ``execution.subagents.<name>`` entries included — and writes one
table per section from the fields' types, defaults, bounds and ``description=`` strings, in place
of the ``<!-- config-reference -->`` marker of ``docs/reference/config.md``. A key added to a
model appears on the next build; a key without a description shows as such here and fails
``tests/test_docs.py``, which walks the same ``config_keys()``.

Weighed: ``mkdocstrings`` could render the models' classes, but as Python objects (a class per
section, attributes by Python name), not as the YAML keys a user types; a pydantic-to-JSON-schema
plugin would add a dependency for what is forty lines over ``model_fields``.
"""

from __future__ import annotations

import json
import types
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

MARKER = "<!-- config-reference -->"


@dataclass(frozen=True)
class Key:
    """One YAML key: its dotted path, the section model it belongs to and its pydantic field."""

    path: str
    owner: type[BaseModel]
    field: FieldInfo

    @property
    def description(self) -> str:
        return " ".join((self.field.description or "").split())


def _nested_model(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """The section model an annotation holds, and the path part it adds: ``""`` for a section,
    ``"<name>"`` for a mapping of names to sections (``execution.subagents``)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation, ""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is dict and len(args) == 2:
        inner = _nested_model(args[1])
        return (inner[0], "<name>") if inner else None
    if origin in (typing.Union, types.UnionType):
        found = [m for m in (_nested_model(a) for a in args if a is not type(None)) if m]
        return found[0] if len(found) == 1 else None
    return None


def config_keys(model: type[BaseModel] | None = None, prefix: str = "") -> list[Key]:
    """Every key of ``model`` (default: ``SootheConfig``), sections before their keys, in field order."""
    if model is None:
        from soothe_planner.config import SootheConfig

        model = SootheConfig
    keys: list[Key] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{field.alias or name}"
        keys.append(Key(path, model, field))
        nested = _nested_model(field.annotation)
        if nested:
            inner, part = nested
            keys.extend(config_keys(inner, f"{path}.{part}." if part else f"{path}."))
    return keys


def sections(keys: list[Key]) -> list[tuple[str, type[BaseModel], list[Key]]]:
    """The keys grouped by the section holding them: ``(section path, model, keys)``, top level first."""
    groups: dict[str, tuple[type[BaseModel], list[Key]]] = {}
    for key in keys:
        section = key.path.rpartition(".")[0]
        groups.setdefault(section, (key.owner, []))[1].append(key)
    return [(name, model, members) for name, (model, members) in groups.items()]


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in args)
    if origin is list:
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type_name(args[0])} to {_type_name(args[1])}" if args else "mapping"
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return "section"
        if issubclass(annotation, SecretStr):
            return "string (secret)"
        if issubclass(annotation, Path):
            return "path"
        return {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}.get(
            annotation.__name__, annotation.__name__
        )
    return str(annotation)


_BOUNDS = (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"), ("min_length", "at least"), ("max_length", "at most"))


def _bounds(field: FieldInfo) -> str:
    """The field's numeric bounds (``≥ 1``), as pydantic holds them in its metadata."""
    out = []
    for item in field.metadata:
        for attr, sign in _BOUNDS:
            value = getattr(item, attr, None)
            if value is not None:
                out.append(f"{sign} {value}" + (" items" if "length" in attr else ""))
    return ", ".join(out)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.get_default(call_default_factory=True)
    if value is None or value is PydanticUndefined:
        return "`null`"
    if isinstance(value, BaseModel):
        return "(section)"
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, Path):
        value = str(value)
    return f"`{json.dumps(value, default=str)}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render(keys: list[Key] | None = None) -> str:
    """The reference as Markdown: one heading and one table per section."""
    keys = config_keys() if keys is None else keys
    out: list[str] = []
    for section, model, members in sections(keys):
        title = f"`{section}`" if section else "Top level"
        doc = " ".join((model.__doc__ or "").strip().split("\n\n")[0].split())
        out += [f"## {title}", "", doc, "", "| key | type | default | description |", "|---|---|---|---|"]
        for key in members:
            kind = _type_name(key.field.annotation)
            bounds = _bounds(key.field)
            kind = f"{kind} ({bounds})" if bounds else kind
            name = key.path.rpartition(".")[2]
            description = key.description or "**(no description)**"
            out.append(f"| `{name}` | {_cell(kind)} | {_cell(_default(key.field))} | {_cell(description)} |")
        out.append("")
    return "\n".join(out)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """mkdocs hook: the marker becomes the generated reference."""
    if MARKER not in markdown:
        return markdown
    return markdown.replace(MARKER, render())
