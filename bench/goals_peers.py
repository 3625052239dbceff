"""The peer: Deep Agents, what LangGraph users reach for when they want an agent that plans.

``deep-agents`` builds ``create_deep_agent`` (the ``deepagents`` package, the benchmark-only extra
``bench-peers``) on the same limited model object the baselines get, with ``AGENT_PROMPT`` (the
baselines' words, ``FAILED:`` included) as its system prompt, and runs the goal as one human
message. It keeps its harness — the to-do planning tool (``write_todos``, added here when the
installed version's default stack lacks it), the ``task`` tool and its general-purpose subagent,
history summarisation — except the file system: its own file tools are replaced, by the name its
stack knows them by, with a stand-in that offers none, and the agent works through the tools every
strategy gets (``execution.tools`` built for the goal's copy). Its own tools could be confined (a
disk backend rooted at the copy), but they are another tool set (no counting tools, an edit tool,
a glob) and the table would then compare tools as well as strategies; and its default backend
keeps files in the agent's state, where a written report never reaches the workspace.

Bounds: at most ``max_total_llm_calls`` model turns of the main agent (``DEFAULT_TURNS`` when the
budget is unlimited), a turn past them an error that ends the run ``failed``; the subagent's calls
take the same LLM budget, as every call does. The final answer is the last AI message; ``FAILED:``
ends the run ``failed`` as for the baselines. The results keep its tool calls and its to-do list.

Without the extra, ``missing_extra`` says what to install, and the command stops before any goal.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage

from bench.goals_baselines import AGENT_PROMPT, ended
from bench.goals_env import GoalEnv, RunOutcome, final_text, tool_calls, turns

EXTRA = "bench-peers"
PLANNING_TOOL = "write_todos"


class MissingExtra(RuntimeError):
    """A strategy whose package is not installed; the message names the extra that brings it."""


def missing_extra() -> str | None:
    """Why ``deep-agents`` cannot run here (its package is not importable), or ``None`` when it can."""
    try:
        import deepagents  # noqa: F401
    except ImportError as exc:
        return (f"--strategy deep-agents needs the deepagents package ({type(exc).__name__}: {exc}); "
                f"install the benchmark extra: pip install 'soothe-planner[{EXTRA}]'")
    return None


def _no_file_tools() -> Any:
    """Middleware that takes the place of Deep Agents' file system middleware and offers no tool."""
    from langchain.agents.middleware import AgentMiddleware

    class NoFileTools(AgentMiddleware):
        """Stands in for the file system middleware (matched by name): the workspace tools are the run's."""

        tools: list[Any] = []  # noqa: RUF012 (the middleware protocol reads a class attribute)

        @property
        def name(self) -> str:
            return "FilesystemMiddleware"

    return NoFileTools()


def _plain_system_text() -> Any:
    """Middleware that sends the system message as one string: Deep Agents builds it of text blocks,
    and an OpenAI-compatible server may take only a string there (the embedded model's answers 500,
    "Input should be a valid string"). The text is the same; only its wire shape changes."""
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import SystemMessage

    def plain(request: Any) -> Any:
        message = request.system_message
        if message is None or isinstance(message.content, str):
            return request
        text = "\n\n".join(b if isinstance(b, str) else str(b.get("text", "")) for b in message.content)
        return request.override(system_message=SystemMessage(content=text))

    class PlainSystemText(AgentMiddleware):
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            return handler(plain(request))

        async def awrap_model_call(self, request: Any, handler: Any) -> Any:
            return await handler(plain(request))

    return PlainSystemText()


def deep_agent(env: GoalEnv) -> Any:
    """The Deep Agent for ``env``: its harness without its file tools, ours instead (see the module docstring)."""
    problem = missing_extra()
    if problem is not None:
        raise MissingExtra(problem)
    from deepagents import create_deep_agent
    from langchain.agents.middleware import ModelCallLimitMiddleware, TodoListMiddleware

    # a middleware named like one of its defaults replaces that default in place; a new one is added
    middleware = [_no_file_tools(), TodoListMiddleware(),
                  ModelCallLimitMiddleware(run_limit=turns(env.config), exit_behavior="error"), _plain_system_text()]
    return create_deep_agent(env.limited_model, env.tools, system_prompt=AGENT_PROMPT, middleware=middleware)


async def run_deep_agents(env: GoalEnv) -> RunOutcome:
    agent = deep_agent(env)  # first: without the extra, this is what says so
    from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError
    from langgraph.errors import GraphRecursionError

    limit = turns(env.config)
    try:
        state = await agent.ainvoke({"messages": [HumanMessage(env.goal)]},
                                    env.run_config(recursion_limit=20 * limit + 20))
    except (ModelCallLimitExceededError, GraphRecursionError) as exc:
        return RunOutcome("failed", error=f"no final answer within {limit} model turns ({type(exc).__name__})")
    messages = list(state.get("messages") or [])
    detail = {"messages": len(messages), "tool_calls": tool_calls(messages),
              "todos": [dict(t) for t in state.get("todos") or []]}
    return ended(final_text(messages), detail, empty="the agent ended without a final answer")
