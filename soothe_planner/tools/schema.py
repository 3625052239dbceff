"""What arguments may a plan give a tool, as a JSON schema a typed tool step is checked against?

For any ``BaseTool``, built-in or a user's: the schema a model is shown (``tool_call_schema``, so
arguments the runtime injects are left out), with titles dropped because they repeat the names
and would ride in every checkpoint of the plan.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool

__all__ = ["tool_args_schema"]


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
