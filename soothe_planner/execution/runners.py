"""The primitives that run part of a step: call a tool, ask a model, run an agent or a runnable.

Which primitive a step uses is decided in ``steps.py``; these only do the work and raise
``StepFailure`` with the failure kind already decided where the kind is known here.

Weighed:

- **A tool is called with a tool call** (``{"type": "tool_call", "name", "args", "id"}``), not
  with its bare args, so the answer is a ``ToolMessage`` with a ``status``. A tool built with
  ``handle_tool_error=True`` (the built-ins are, so an agent can read the error and correct
  itself) *returns* its error message instead of raising; called with bare args, a missing file
  would come back as an ordinary string and the step would be reported done. Read through the
  status, it is a ``tool_error`` with the tool's message.
- **Arguments are checked before the call** against the tool's call schema (``args_problem``):
  a missing or mistyped argument, or a key the tool does not take (a tool's pydantic schema
  silently drops unknown keys, so ``{"pth": "a"}`` would run as "no path given").
- **Output caps** (``cap_output``) are set on a copy of the model: ``max_tokens`` where the model
  has that field, and ``extra_body["max_tokens"]`` too where it already sends one (servers that
  ignore ``max_completion_tokens`` honour that; see ``local/embedded.py``). A cap only lowers the
  model's own setting; a model with no such field (a test double) is left as it is.
- The agent is the package's own small ReAct loop (``agent.py``), not LangGraph's deprecated
  ``create_react_agent``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import BaseModel, ValidationError

from soothe_planner.errors import LLMBudgetExceeded

__all__ = [
    "AGENT_RECURSION_LIMIT",
    "NoRunnerError",
    "StepFailure",
    "args_problem",
    "call_tool",
    "cap_output",
    "output_text",
    "run_agent",
    "run_runnable",
    "single_string_field",
]

AGENT_RECURSION_LIMIT = 25
"""Graph steps a step's ReAct agent may take (about a dozen tool round-trips) before it fails."""


class NoRunnerError(Exception):
    """Nothing configured can run this step (no tool, subagent, remote or model fits)."""


class StepFailure(Exception):
    """A step failure whose kind (``tool_error``, ``policy_denied``, ...) is already decided."""

    def __init__(self, error_type: str, message: str) -> None:
        super().__init__(message)
        self.error_type = error_type


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


def args_problem(tool: BaseTool, args: Mapping[str, Any]) -> str | None:
    """Why ``args`` do not fit the tool's call schema, or ``None`` when they do."""
    schema = tool.tool_call_schema
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        unknown = sorted(set(args) - set(schema.model_fields))
        if unknown:
            return f"unknown argument(s) {unknown}; {tool.name!r} takes {sorted(schema.model_fields)}"
        try:
            schema.model_validate(dict(args))
        except ValidationError as exc:
            return "; ".join(
                f"{'.'.join(map(str, e['loc'])) or 'arguments'}: {e['msg']}" for e in exc.errors(include_url=False)
            )
        return None
    if isinstance(schema, Mapping):  # a tool described by a JSON schema: names and required keys only
        props = schema.get("properties") or {}
        unknown = sorted(set(args) - set(props)) if props else []
        missing = sorted(set(schema.get("required") or []) - set(args))
        if unknown:
            return f"unknown argument(s) {unknown}; {tool.name!r} takes {sorted(props)}"
        if missing:
            return f"missing required argument(s) {missing}"
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


async def call_tool(
    tool: BaseTool, args: Mapping[str, Any], *, step_id: str, config: dict[str, Any] | None = None
) -> tuple[str, dict[str, Any]]:
    """Call ``tool`` with ``args`` (sync tools run in a worker thread); ``StepFailure`` on any error.

    A tool that returns a JSON object (a dict, serialised by the tool machinery) also gets it as
    the structured outcome, so ``{{s1.result.field}}`` can name one of its fields.
    """
    call = {"type": "tool_call", "name": tool.name, "args": dict(args), "id": f"step_{step_id}"}
    try:
        raw = await tool.ainvoke(call, config=config)  # type: ignore[arg-type]
    except (asyncio.CancelledError, LLMBudgetExceeded):
        raise
    except Exception as exc:
        raise StepFailure(
            "tool_error", f"tool {tool.name!r} failed in step {step_id!r}: {type(exc).__name__}: {exc}"
        ) from exc
    if not isinstance(raw, ToolMessage):
        return output_text(raw)
    text = _content_text(raw.content)
    if raw.status == "error":
        raise StepFailure("tool_error", f"tool {tool.name!r} failed in step {step_id!r}: {text}")
    outcome: dict[str, Any] = {}
    if isinstance(raw.artifact, Mapping):
        outcome = dict(raw.artifact)
    elif text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict):
            outcome = parsed
    return text, outcome


def cap_output(model: BaseChatModel, max_tokens: int | None) -> BaseChatModel:
    """A copy of ``model`` generating at most ``max_tokens`` per call (see the module docstring)."""
    if max_tokens is None:
        return model
    update: dict[str, Any] = {}
    if "max_tokens" in type(model).model_fields:
        current = getattr(model, "max_tokens", None)
        if not isinstance(current, int) or current > max_tokens:
            update["max_tokens"] = max_tokens
    extra = getattr(model, "extra_body", None)
    if isinstance(extra, Mapping) and isinstance(extra.get("max_tokens"), int) and extra["max_tokens"] > max_tokens:
        update["extra_body"] = {**extra, "max_tokens": max_tokens}
    return model.model_copy(update=update) if update else model


async def run_runnable(runnable: Runnable[Any, Any], task: str, *, config: dict[str, Any] | None = None) -> Any:
    """Invoke a subagent / remote graph with the chat-shaped input every LangGraph agent takes."""
    return await runnable.ainvoke({"messages": [HumanMessage(task)]}, config=config)  # type: ignore[arg-type]


def build_agent(model: BaseChatModel, tools: Sequence[BaseTool]) -> Runnable[Any, Any]:
    """A ReAct agent over exactly ``tools`` (``agent.py``), with no checkpointer of its own."""
    from soothe_planner.execution.agent import react_agent

    agent: Runnable[Any, Any] = react_agent(model, tools)
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
