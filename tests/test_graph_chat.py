"""The loop as a LangGraph user meets it: chat input, a subgraph of a MessagesState parent, sync invoke,
and per-run choices through LangGraph's runtime context."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from loop_support import PhaseScript, assess, plan, read_tool, step

from soothe_planner.dag import PlanManager
from soothe_planner.execution import StepExecutor
from soothe_planner.graph import build_strange_loop, goal_input, run_config

DONE = assess("done", 1.0, "the facts are in")


def _script(runs: int = 1) -> PhaseScript:
    return PhaseScript(
        RouteIntake=[{"route": "complex", "answer": ""}] * runs,
        GeneratePlan=[plan(step("s1"))] * runs,
        AssessStatus=[DONE] * runs,
    )


def _graph(script: PhaseScript, *, ran: list[str] | None = None, **build: Any) -> Any:
    return build_strange_loop(script.planner(), StepExecutor(tools=[read_tool(ran)]), **build)


# -- chat input ------------------------------------------------------------------------------------


async def test_a_chat_turn_is_a_goal_and_its_answer_comes_back_as_an_ai_message() -> None:
    graph = _graph(_script(), checkpointer=InMemorySaver())
    final = await graph.ainvoke({"messages": [HumanMessage("collect the facts")]}, run_config("c1", 5))
    assert final["status"] == "done" and final["goal"] == "collect the facts"
    last = final["messages"][-1]
    assert isinstance(last, AIMessage) and last.content == final["final_answer"]
    assert "read(" in last.content and final["thread_id"] == "c1"  # the thread comes from the run config


async def test_the_next_chat_turn_on_a_thread_is_a_follow_up_with_a_fresh_loop() -> None:
    ran: list[str] = []
    graph = _graph(_script(2), ran=ran, checkpointer=InMemorySaver())
    config = run_config("c2", 5)
    await graph.ainvoke({"messages": [HumanMessage("collect the facts")]}, config)
    final = await graph.ainvoke({"messages": [HumanMessage("now count them")]}, config)
    assert final["status"] == "done" and final["goal"] == "now count them"
    assert final["prior_goals"] == ["collect the facts"] and final["continuation"] is True
    assert final["iteration"] == 1 and len(PlanManager.from_dict(final["plan_manager"]).nodes) == 1
    assert [m.type for m in final["messages"]] == ["human", "ai", "human", "ai"]
    assert final["recent_messages"][0] == "user: collect the facts"
    assert len(ran) == 2


async def test_an_explicit_goal_wins_over_the_chat_and_a_repeated_one_is_run_again() -> None:
    graph = _graph(_script(3), checkpointer=InMemorySaver())
    config = run_config("c3", 5)
    await graph.ainvoke({"messages": [HumanMessage("collect the facts")]}, config)
    final = await graph.ainvoke(goal_input("list the files", thread_id="c3"), config)
    assert final["goal"] == "list the files" and final["status"] == "done"
    again = await graph.ainvoke({"goal": "list the files"}, config)  # a bare goal on a used thread
    assert again["goal"] == "list the files" and again["iteration"] == 1 and again["status"] == "done"


async def test_an_input_with_no_goal_and_no_human_message_is_refused_naming_both() -> None:
    graph = _graph(_script())
    with pytest.raises(ValueError, match=r"'goal'.*'messages'"):
        await graph.ainvoke({"messages": [AIMessage("hello")]}, run_config("c4", 5))


async def test_the_loop_runs_as_a_subgraph_of_a_messages_state_parent() -> None:
    loop = _graph(_script(2))
    parent: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    parent.add_node("planner", loop)
    parent.add_edge(START, "planner")
    app = parent.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "p1"}}
    first = await app.ainvoke({"messages": [HumanMessage("collect the facts")]}, config)
    assert set(first) == {"messages"}
    assert [m.type for m in first["messages"]] == ["human", "ai"] and "read(" in first["messages"][-1].content
    second = await app.ainvoke({"messages": [HumanMessage("collect them again")]}, config)
    assert [m.type for m in second["messages"]] == ["human", "ai", "human", "ai"]


# -- sync use --------------------------------------------------------------------------------------


def test_invoke_runs_the_whole_loop_synchronously() -> None:
    ran: list[str] = []
    graph = _graph(_script(), ran=ran, checkpointer=InMemorySaver())
    final = graph.invoke(goal_input("collect the facts", thread_id="s1"), run_config("s1", 5))
    assert final["status"] == "done" and ran == ["do s1"]


async def test_invoke_works_on_a_thread_whose_event_loop_is_running_as_in_a_notebook() -> None:
    graph = _graph(_script(), checkpointer=InMemorySaver())
    asyncio.get_running_loop()  # this test's loop runs on this thread, as a notebook's does
    final = graph.invoke(goal_input("collect the facts", thread_id="s3"), run_config("s3", 5))
    assert final["status"] == "done"


def test_sync_stream_carries_the_progress_events() -> None:
    graph = _graph(_script())
    events = [chunk["event"] for chunk in graph.stream(
        goal_input("collect the facts", thread_id="s4"), run_config("s4", 5), stream_mode="custom"
    )]  # fmt: skip
    assert events[0] == "intake" and events[-1] == "completed" and "step_completed" in events


# -- the run context -------------------------------------------------------------------------------


async def test_the_run_context_turns_the_approval_gate_on_for_one_run() -> None:
    graph = _graph(_script(2), checkpointer=InMemorySaver())
    paused = await graph.ainvoke(goal_input("g", thread_id="a1"), run_config("a1", 5), context={"approval": True})
    assert paused["status"] == "running" and "__interrupt__" in paused
    plain = await graph.ainvoke(goal_input("g", thread_id="a2"), run_config("a2", 5))
    assert plain["status"] == "done"


async def test_the_run_context_caps_iterations_and_plan_steps() -> None:
    graph = _graph(_script(), checkpointer=InMemorySaver())
    final = await graph.ainvoke(goal_input("g", thread_id="m1"), run_config("m1", 5), context={"max_plan_steps": 3})
    assert final["status"] == "done"
    assert PlanManager.from_dict(final["plan_manager"]).max_plan_steps == 3
    # the cap counts rounds of work: the one round's steps are judged, and a round that finished the goal is done
    one = await _graph(_script()).ainvoke(goal_input("g", thread_id="m2"), run_config("m2", 5),
                                          context={"max_iterations": 1})  # fmt: skip
    assert one["status"] == "done" and one["iteration"] == 1
    unfinished = PhaseScript(RouteIntake=[{"route": "complex", "answer": ""}], GeneratePlan=[plan(step("s1"))],
                             AssessStatus=[assess("replan", 0.5, "one fact is missing")])  # fmt: skip
    capped = await _graph(unfinished).ainvoke(goal_input("g", thread_id="m3"), run_config("m3", 5),
                                              context={"max_iterations": 1})  # fmt: skip
    assert capped["status"] == "failed" and capped["error"] == "max_iterations (1) reached"
    assert capped["iteration"] == 1 and capped["messages"][-1].content == "The goal failed: max_iterations (1) reached."


@pytest.mark.parametrize(
    ("context", "message"),
    [
        ({"max_iterations": "ten"}, "run context max_iterations = 'ten'"),
        ({"max_plan_steps": 0}, "run context max_plan_steps = 0: must be >= 1"),
        ({"approval": "yes"}, "run context approval = 'yes'"),
        ({"model": "openai:gpt-4o-mini"}, "run context model 'openai:gpt-4o-mini': this graph was built on a model object"),
    ],
)
async def test_a_bad_run_context_is_refused_naming_the_key(context: dict[str, Any], message: str) -> None:
    graph = _graph(_script())
    with pytest.raises(ValueError) as info:
        await graph.ainvoke(goal_input("g", thread_id="b"), run_config("b", 5), context=context)
    assert message in str(info.value)
