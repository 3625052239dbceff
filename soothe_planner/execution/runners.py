"""What actually runs one step: a tool, a subagent, a remote graph, or the default agent?

Weighed: a tool step whose single tool takes one string is called directly with the step's task —
no LLM call, no chance for a model to pick another tool. Anything that needs arguments filled in
goes to a ReAct agent (``langgraph.prebuilt.create_react_agent``) built over *exactly* the step's
tools, so the model is never offered a tool the plan did not name. Subagents and remote graphs get
the LangGraph chat shape ``{"messages": [HumanMessage(task)]}`` and their last message is the
output. Runners raise; the scheduler turns every exception into a failed ``StepResult`` (the
failure kinds are decided there, in one place).

``create_react_agent`` is the brief's stable prebuilt agent; LangGraph 1.x marks it deprecated in
favour of ``langchain.agents.create_agent``, which lives in a package this project does not depend
on, so the deprecation warning is silenced at the one call site.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

__all__ = [
    "AGENT_RECURSION_LIMIT",
    "NoRunnerError",
    "output_text",
    "run_agent",
    "run_runnable",
    "run_single_input_tool",
    "single_string_field",
]

AGENT_RECURSION_LIMIT = 25
"""Graph steps a step's ReAct agent may take (about a dozen tool round-trips) before it fails."""


class NoRunnerError(Exception):
    """Nothing configured can run this step (no tool, subagent, remote or agent model fits)."""


def single_string_field(tool: BaseTool) -> str | None:
    """The name of the tool's only argument when that argument is a string, else ``None``."""
    try:
        args = tool.args
    except Exception:  # a tool with an unusual schema is simply not "single string"
        return None
    if len(args) != 1:
        return None
    (name, spec), = args.items()
    if isinstance(spec, Mapping) and spec.get("type") == "string":
        return str(name)
    return None


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content blocks: keep the text ones
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    return str(content)


def output_text(result: Any) -> tuple[str, dict[str, Any]]:
    """A runner's raw result as ``(text, structured outcome)``."""
    if isinstance(result, BaseMessage):
        return _content_text(result.content), {}
    if isinstance(result, str):
        return result, {}
    if isinstance(result, Mapping):
        messages = result.get("messages")
        if isinstance(messages, Sequence) and messages and isinstance(messages[-1], BaseMessage):
            return _content_text(messages[-1].content), {}
        # A remote graph's state arrives as JSON: messages are dicts with a "content" key.
        if isinstance(messages, Sequence) and messages and isinstance(messages[-1], Mapping) and "content" in messages[-1]:
            return _content_text(messages[-1]["content"]), {}
        try:
            return json.dumps(result, ensure_ascii=False, default=str), dict(result)
        except (TypeError, ValueError):
            return str(result), {}
    if isinstance(result, list | tuple):
        try:
            return json.dumps(result, ensure_ascii=False, default=str), {}
        except (TypeError, ValueError):
            return str(result), {}
    return ("" if result is None else str(result)), {}


async def run_single_input_tool(
    tool: BaseTool, field: str, task: str, *, config: dict[str, Any] | None = None
) -> Any:
    """Call a one-string-argument tool with the task text (sync tools run in a worker thread)."""
    return await tool.ainvoke({field: task}, config=config)  # type: ignore[arg-type]


async def run_runnable(runnable: Runnable[Any, Any], task: str, *, config: dict[str, Any] | None = None) -> Any:
    """Invoke a subagent / remote graph with the chat-shaped input every LangGraph agent takes."""
    return await runnable.ainvoke({"messages": [HumanMessage(task)]}, config=config)  # type: ignore[arg-type]


def build_agent(model: BaseChatModel, tools: Sequence[BaseTool]) -> Runnable[Any, Any]:
    """A ReAct agent over exactly ``tools``."""
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # checkpointer=False: a step's agent is scratch work; inheriting the loop's checkpointer would
        # make parallel agents in one node share a checkpoint namespace.
        agent: Runnable[Any, Any] = create_react_agent(model, list(tools), checkpointer=False)
    return agent


async def run_agent(
    model: BaseChatModel, tools: Sequence[BaseTool], task: str, *, config: dict[str, Any] | None = None
) -> Any:
    """Run a ReAct agent over ``tools`` on the task; its last message is the step's output."""
    agent = build_agent(model, tools)
    return await agent.ainvoke(
        {"messages": [HumanMessage(task)]},
        config={**(config or {}), "recursion_limit": AGENT_RECURSION_LIMIT},  # type: ignore[arg-type]
    )
