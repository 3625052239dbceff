"""Which shapes of "some tools" does the executor take, and how do they become one list of tools?

LangChain and LangGraph users hold their tools in several shapes: a list, one tool, a plain
function, a ``ToolNode`` (its ``tools_by_name``), a toolkit (``BaseToolkit.get_tools()``), or a
list that mixes them. ``as_tools`` flattens any of these, in order, into ``BaseTool`` objects; a
plain function becomes a ``StructuredTool`` (it needs a docstring and type hints, as LangChain's
``@tool`` does). Anything else is a ``TypeError`` naming what was given and what is accepted.

Weighed: accepting ``ToolNode`` by reading ``tools_by_name`` rather than running the node keeps the
executor's own dispatch (allow-list, read-only flags, step journal) for every call; the node's
error handling and injection settings do not carry over, and the docstring of ``StepExecutor``
says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool

__all__ = ["ToolSource", "as_tools"]

ToolSource = Any
"""A tool, a function, a ``ToolNode``, a toolkit, or an iterable of any of these."""

_ACCEPTED = "a BaseTool, a function, a ToolNode, a toolkit (get_tools()), or a list of these"


def _from_function(fn: Callable[..., Any]) -> BaseTool:
    try:
        return StructuredTool.from_function(fn)
    except Exception as exc:
        name = getattr(fn, "__name__", repr(fn))
        raise TypeError(
            f"function {name!r} cannot become a tool ({type(exc).__name__}: {exc}); "
            "give it a docstring and type hints, or pass a BaseTool"
        ) from None


def as_tools(source: ToolSource) -> list[BaseTool]:
    """Every tool in ``source``, in order (see the module docstring for the accepted shapes)."""
    if source is None:
        return []
    if isinstance(source, BaseTool):
        return [source]
    by_name = getattr(source, "tools_by_name", None)
    if isinstance(by_name, dict):  # langgraph.prebuilt.ToolNode
        return [t for t in by_name.values() if isinstance(t, BaseTool)]
    get_tools = getattr(source, "get_tools", None)
    if callable(get_tools):  # langchain_core.tools.BaseToolkit and look-alikes
        return as_tools(get_tools())
    if isinstance(source, str | bytes | dict):
        raise TypeError(f"a tool source must be {_ACCEPTED}, got {type(source).__name__} {source!r:.60}")
    if isinstance(source, Iterable):
        out: list[BaseTool] = []
        for item in source:
            if isinstance(item, str | bytes):
                raise TypeError(f"a tool list holds tools, not names: got {item!r}; pass the tool objects")
            out.extend(as_tools(item))
        return out
    if callable(source) and not isinstance(source, type):
        return [_from_function(source)]
    raise TypeError(f"a tool source must be {_ACCEPTED}, got {type(source).__name__}")
