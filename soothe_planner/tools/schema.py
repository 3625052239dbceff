"""What does a tool declare about itself: the arguments a plan may give it, and the data it hands back?

For any ``BaseTool``, built-in or a user's: the schema a model is shown (``tool_call_schema``, so
arguments the runtime injects are left out), with titles dropped because they repeat the names
and would ride in every checkpoint of the plan.

And what the deliverable's checks (``planner/contract/``) need to know of a tool, declared in its
``metadata`` rather than read from its English output (``declared_data``):

- ``writes_path_arg``: the name of the argument that is the workspace file it writes
  (``write_file``: ``"path"``). A step of such a tool that succeeded is a write of that file.
- ``counts``: ``True`` for a tool that counts; its result's ``count`` field (an ``int``; an
  artifact, or a JSON object it returns) is the number it counted, ``complete: false`` when it
  stopped at a cap, and ``counted`` says what it counted, for the assessment to see.

A tool's result fields (``StepResult.outcome``: its artifact, or the JSON object it returned) are
read by name: ``count``/``complete``/``counted`` for a count, ``lines``/``exact``/``complete`` for a
search (each line ``path:line: text``). The built-ins declare and return all of these.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool

__all__ = ["COUNTS_KEY", "WRITES_PATH_ARG_KEY", "declared_data", "tool_args_schema"]

WRITES_PATH_ARG_KEY = "writes_path_arg"
COUNTS_KEY = "counts"


def tool_args_schema(tool: BaseTool) -> dict[str, Any] | None:
    """The JSON schema of the arguments a plan may give ``tool`` (None when it cannot be read).

    ``tool_call_schema`` is what a model is shown: arguments the runtime injects (a
    ``RunnableConfig``, an ``InjectedToolArg``) are left out. Titles are dropped: they repeat the
    names and would ride in every checkpoint of the plan.
    """
    raw: dict[str, Any]
    try:
        schema: Any = tool.tool_call_schema
        raw = dict(schema) if isinstance(schema, dict) else dict(schema.model_json_schema())
    except Exception:  # a tool with an unusual schema: its argument listing is the best left
        try:
            raw = {"type": "object", "properties": dict(tool.args)}
        except Exception:
            return None
    raw.pop("title", None)
    raw.pop("description", None)
    props = raw.get("properties")
    if isinstance(props, dict):
        raw["properties"] = {
            k: {kk: vv for kk, vv in v.items() if kk != "title"} if isinstance(v, dict) else v for k, v in props.items()
        }
    return raw


def declared_data(tool: BaseTool) -> dict[str, Any]:
    """What ``tool``'s ``metadata`` declares for the deliverable's checks, as ``Capability`` fields:
    ``writes_path_arg`` (kept only when it names one of its arguments) and ``counts``."""
    meta = tool.metadata or {}
    out: dict[str, Any] = {}
    arg = meta.get(WRITES_PATH_ARG_KEY)
    if isinstance(arg, str) and arg:
        schema = tool_args_schema(tool) or {}
        if arg not in (schema.get("properties") or {}):
            raise ValueError(
                f"tool {tool.name!r} declares {WRITES_PATH_ARG_KEY}={arg!r}, which is not one of its arguments "
                f"({', '.join(sorted(schema.get('properties') or {})) or 'none'})"
            )
        out["writes_path_arg"] = arg
    if meta.get(COUNTS_KEY) is True:
        out["counts"] = True
    return out
