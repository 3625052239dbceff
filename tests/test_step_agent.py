"""The step agent: the package's own ReAct loop on LangGraph (no deprecated prebuilt, no hidden warning)."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import StructuredTool, ToolException, tool

from soothe_planner.execution import react_agent
from soothe_planner.testing import ScriptedChatModel


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def _fail(text: str) -> str:
    """Always fails."""
    raise ToolException("disk on fire")


broken = StructuredTool.from_function(_fail, name="broken", handle_tool_error=True)
raising = StructuredTool.from_function(_fail, name="raising")


def _call(name: str, args: dict[str, object]) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": "c1", "type": "tool_call"}])


async def test_the_agent_calls_tools_until_the_model_answers_without_a_deprecation_warning() -> None:
    model = ScriptedChatModel([_call("add", {"a": 2, "b": 3}), "The sum is 5."])
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # nothing deprecated is built or run
        agent = react_agent(model, [add], prompt="You add numbers.", name="adder")
        out = await agent.ainvoke({"messages": [HumanMessage("2 + 3?")]})
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]
    assert out["messages"][2].content == "5" and out["messages"][-1].content == "The sum is 5."
    first = model.calls[0]
    assert isinstance(first.messages[0], SystemMessage) and first.messages[0].content == "You add numbers."
    assert first.tools == ["add"] and agent.name == "adder"


def test_a_handled_tool_error_goes_back_to_the_model_and_the_agent_runs_under_invoke() -> None:
    model = ScriptedChatModel([_call("broken", {"text": "x"}), "It failed: disk on fire."])
    out = react_agent(model, [broken]).invoke({"messages": [HumanMessage("try")]})
    errors = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert len(errors) == 1 and errors[0].status == "error" and "disk on fire" in str(errors[0].content)
    assert out["messages"][-1].content == "It failed: disk on fire."


async def test_with_no_tools_the_agent_is_one_model_call() -> None:
    model = ScriptedChatModel(["just text"])
    out = await react_agent(model, []).ainvoke({"messages": [HumanMessage("hi")]})
    assert out["messages"][-1].content == "just text" and len(model.calls) == 1


def test_an_unhandled_tool_error_ends_the_agent_so_the_step_fails_with_it() -> None:
    model = ScriptedChatModel([_call("raising", {"text": "x"}), "never asked"])
    with pytest.raises(ToolException, match="disk on fire"):
        react_agent(model, [raising]).invoke({"messages": [HumanMessage("try")]})
    assert len(model.calls) == 1
