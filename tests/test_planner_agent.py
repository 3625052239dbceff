"""The one-line entry (``create_planner_agent``) and the tool sources it and the executor accept."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool, BaseToolkit, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolNode
from loop_support import PhaseScript, assess, plan, read_tool, step

from soothe_planner import create_planner_agent, goal_input, run_config
from soothe_planner.errors import ConfigError
from soothe_planner.execution import StepExecutor, as_tools
from soothe_planner.testing import FunctionChatModel


@tool
def shout(text: str) -> str:
    """Say the text louder."""
    return text.upper()


def whisper(text: str) -> str:
    """Say the text softer."""
    return text.lower()


class Kit(BaseToolkit):
    def get_tools(self) -> list[BaseTool]:
        return [shout]


def _model(runs: int = 1) -> FunctionChatModel:
    script = PhaseScript(
        RouteIntake=[{"route": "complex", "answer": ""}] * runs,
        GeneratePlan=[plan(step("s1", tools=["read"]))] * runs,
        AssessStatus=[assess("done", 1.0)] * runs,
        text=["Here are the facts."] * runs,  # the final synthesis (run.synthesize defaults to true)
    )
    return FunctionChatModel(script)


def test_one_line_builds_a_loop_that_runs_synchronously_with_a_checkpointer() -> None:
    ran: list[str] = []
    agent = create_planner_agent(_model(), [read_tool(ran)], checkpointer=InMemorySaver(), max_iterations=4)
    final = agent.invoke(goal_input("collect the facts", thread_id="one"), run_config("one", 4))
    assert final["status"] == "done" and ran == ["do s1"]
    assert final["final_answer"] == final["messages"][-1].content == "Here are the facts."
    assert agent.get_state(run_config("one", 4)).values["status"] == "done"  # it was checkpointed


async def test_the_policy_keys_reach_the_config_sections_they_name() -> None:
    agent = create_planner_agent(
        _model(), ToolNode([read_tool()]), approval=True, checkpointer=InMemorySaver(),
        max_plan_steps=3, global_max_llm_calls=2, synthesize=False, intake=False, failure_policy="retry(1)",
    )  # fmt: skip
    paused = await agent.ainvoke(goal_input("g", thread_id="p"), run_config("p", 5))
    assert "__interrupt__" in paused  # approval=True
    assert paused["intake"] == "complex"  # intake=False: no routing call


def test_an_unknown_option_is_a_type_error_listing_the_known_ones() -> None:
    with pytest.raises(TypeError, match=r"unknown option 'max_iteration'; known options: .*max_iterations"):
        create_planner_agent(_model(), [], max_iteration=3)


def test_a_bad_option_value_is_the_configs_own_error() -> None:
    with pytest.raises(ConfigError, match="max_iterations"):
        create_planner_agent(_model(), [], max_iterations=0)


def test_a_model_of_the_wrong_kind_is_refused_naming_what_is_accepted() -> None:
    with pytest.raises(TypeError, match="a LangChain chat model or a model string"):
        create_planner_agent(object(), [])  # type: ignore[arg-type]


# -- tool sources --------------------------------------------------------------------------------


def test_tool_sources_flatten_in_order_whatever_their_shape() -> None:
    read = read_tool()
    tools = as_tools([read, ToolNode([shout]), Kit(), whisper])
    assert [t.name for t in tools] == ["read", "shout", "shout", "whisper"]
    assert tools[3].invoke({"text": "HI"}) == "hi"
    assert as_tools(None) == [] and as_tools(shout) == [shout]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("read_file", "got str"),
        (["read_file"], "a tool list holds tools, not names: got 'read_file'"),
        (42, "got int"),
        (lambda x: x, "cannot become a tool"),
    ],
)
def test_a_source_that_is_not_tools_is_refused_naming_it(source: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        as_tools(source)


def test_the_executor_takes_a_tool_node_and_a_toolkit() -> None:
    assert list(StepExecutor(tools=ToolNode([shout, read_tool()])).tools) == ["shout", "read"]
    assert list(StepExecutor(tools=Kit()).tools) == ["shout"]
