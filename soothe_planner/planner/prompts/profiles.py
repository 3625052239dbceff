"""How many words does a model get: the full briefing, or a compact one for small models?

A prompt profile is a property of the model that answers, not of the planner: a hosted model reads
a long briefing for free, while a 0.5B model on two CPU cores pays for every token of it — the
system prompt and the tool schema are most of a prompt, and prompt processing is most of a call.
So the profile is configured (``planner.prompt_profile``): ``full`` or ``compact``, or ``auto``,
which takes the model's own declaration (its ``metadata["soothe_prompt_profile"]``, which the
embedded model sets to ``compact``) and is ``full`` for every model that declares nothing. No
model name is looked at here.

What ``compact`` changes, and only that:

- **The system prompt**: ``<name>_compact.txt`` replaces ``<name>.txt`` where one exists (the same
  fields and the data rule, fewer words; the field contract test holds both to the wire schema).
  The human turn — the state the model decides on — is the same in both profiles.
- **The tool schema**: the JSON schema sent with a structured call loses what the system prompt
  already says (descriptions) and what a grammar-constrained server does not use (defaults,
  titles, the non-standard ``ge``/``le``). Types, enums, ``required``, ``additionalProperties``
  and every bound (``maxLength``, ``maxItems``, ``pattern``) are kept: a grammar built from the
  schema is what makes a small model's output end. The class that validates the answer is the
  same class under the same name, so nothing downstream can tell the profiles apart.
- **The fields asked for**: a schema class may name, in ``COMPACT_FIELDS``, the only fields its
  compact schema advertises (``AssessStatus``: the status alone). The others keep their defaults
  when the answer is read; the compact system prompt names the same fields.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from functools import cache
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

__all__ = [
    "PROFILE_METADATA_KEY",
    "PromptProfile",
    "compact_schema",
    "resolve_profile",
    "schema_for",
    "trim_schema",
]

PromptProfile = Literal["full", "compact"]
PROFILE_METADATA_KEY = "soothe_prompt_profile"
"""The key under which a chat model's ``metadata`` declares the profile it wants for ``auto``."""

_DROPPED_KEYS = frozenset({"description", "default", "title", "examples", "ge", "le", "gt", "lt"})
M = TypeVar("M", bound=BaseModel)


def resolve_profile(configured: str, model: object) -> PromptProfile:
    """``configured`` itself, or for ``auto`` the profile ``model`` declares (``full`` if none)."""
    if configured == "full":
        return "full"
    if configured == "compact":
        return "compact"
    if configured != "auto":
        raise ValueError(f"prompt profile must be 'auto', 'full' or 'compact', got {configured!r}")
    metadata = getattr(model, "metadata", None)
    declared = metadata.get(PROFILE_METADATA_KEY) if isinstance(metadata, Mapping) else None
    return "compact" if declared == "compact" else "full"


def trim_schema(schema: Any, *, _in_properties: bool = False) -> Any:
    """A copy of a JSON schema without descriptions, defaults, titles and non-standard bounds.

    Keys that are property *names* (inside ``properties``) are never dropped, however they are
    spelled: a field called ``description`` stays a field.
    """
    if isinstance(schema, list):
        return [trim_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if not _in_properties and key in _DROPPED_KEYS:
            continue
        out[key] = trim_schema(value, _in_properties=key == "properties" and not _in_properties)
    return out


@cache
def compact_schema(schema: type[M]) -> type[M]:
    """``schema`` under the same name and validation, advertising the trimmed JSON schema."""
    trimmed = trim_schema(schema.model_json_schema())
    keep = getattr(schema, "COMPACT_FIELDS", None)
    if keep is not None:
        trimmed["properties"] = {k: v for k, v in trimmed["properties"].items() if k in keep}
        trimmed["required"] = [k for k in trimmed.get("required", []) if k in keep]
    # LangChain names the tool after the schema's title and reads nothing else from the class.
    trimmed["title"] = schema.__name__

    def model_json_schema(cls: type[BaseModel], *args: Any, **kwargs: Any) -> dict[str, Any]:
        return copy.deepcopy(trimmed)

    compact = type(schema.__name__, (schema,), {
        "__module__": schema.__module__,
        "__doc__": schema.__doc__,
        "model_json_schema": classmethod(model_json_schema),
    })
    return compact


def schema_for(schema: type[M], profile: str) -> type[M]:
    """The schema a structured call binds under ``profile``."""
    return compact_schema(schema) if profile == "compact" else schema
