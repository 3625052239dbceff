"""What runs a step (or a subagent) that needs a model to call tools: a small ReAct loop on LangGraph.

Two nodes over ``MessagesState``: ``agent`` asks the model (with the tools bound and an optional
system prompt) for the next message; while that message calls tools, ``tools`` (LangGraph's
``ToolNode``) runs them and the loop goes back to the model; a message with no tool call ends it,
and its text is the step's output. A tool's error comes back to the model as a tool message (the
``ToolNode`` default), so the model can correct itself within the agent's recursion limit.

Weighed: ``langgraph.prebuilt.create_react_agent`` is deprecated in LangGraph 1.x in favour of
``langchain.agents.create_agent``, which lives in the ``langchain`` package; this package does not
otherwise need ``langchain``, and the loop the steps use is the twenty lines below, so it owns
them rather than silencing a deprecation warning or taking a dependency for them. The model node
has both a sync and an async form, as the StrangeLoop's nodes do, so an agent runs under
``invoke`` as well.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool
from langgraph._internal._runnable import RunnableCallable
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode

__all__ = ["react_agent"]


def react_agent(
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    *,
    prompt: str | None = None,
    name: str = "agent",
    checkpointer: Any = False,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A ReAct agent over exactly ``tools`` (see the module docstring).

    ``checkpointer=False`` by default: a step's agent is scratch work, and inheriting the loop's
    checkpointer would make parallel agents in one node share a checkpoint namespace.
    """
    tools = list(tools)
    bound: Any = model.bind_tools(tools) if tools else model
    head: list[BaseMessage] = [SystemMessage(prompt)] if prompt else []

    def ask(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [bound.invoke([*head, *state["messages"]], config)]}

    async def aask(state: MessagesState, config: RunnableConfig) -> dict[str, Any]:
        return {"messages": [await bound.ainvoke([*head, *state["messages"]], config)]}

    def next_node(state: MessagesState) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    graph: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    graph.add_node("agent", RunnableCallable(ask, aask, name="agent"))
    graph.add_edge(START, "agent")
    if tools:
        graph.add_node("tools", ToolNode(tools))
        graph.add_conditional_edges("agent", next_node, ["tools", END])
        graph.add_edge("tools", "agent")
    else:
        graph.add_edge("agent", END)
    compiled: CompiledStateGraph[Any, Any, Any, Any] = graph.compile(checkpointer=checkpointer, name=name)
    return compiled
