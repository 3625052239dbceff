"""The baselines of the goal suites: what a user would pick instead of ours, on equal terms.

- ``react`` — LangGraph's prebuilt ReAct agent (``create_react_agent``) over the same tools, the
  goal as one human message. Its final answer is its last AI message.
- ``plan-execute`` — the shape of LangGraph's plan-and-execute tutorial, written here: a planner
  call returns a list of steps (structured output); a ReAct agent executes the first one; a
  replanner call returns either the final response or the steps still to do; repeat. One flat
  replan schema (``response`` or ``steps``) stands in for the tutorial's union of two schemas: a
  grammar-constrained small model fills one object more reliably than it picks a union branch,
  and the baseline should not lose on plumbing.
- ``react-scaffold`` and ``plan-execute-scaffold`` — the same loops, their prompts also given what
  ours' compact planning prompt gives its model besides the goal: the workspace's files and the
  worked examples (``scaffold``, built by the planner's own functions, never a copy of their
  text). A table of the four separates what the scaffold buys from what the loop buys.

Every baseline gets the same words: ``AGENT_PROMPT`` (what to work on, when to stop) with
``FAIL_RULE`` in it, and the replanner gets ``FAIL_RULE`` too, so each has a way to say the goal
cannot be done. A final answer that starts with ``FAILED:`` (``failed_reason``) ends the run
``failed`` with the reason after it — the correct end of a goal the workspace cannot satisfy —
never ``done``; ours ends ``failed`` by its own status. Without it a baseline could only claim
success or end without an answer, and every honest refusal of an ``expect`` goal would be scored
by accident. Bounds: ``react`` may take ``max_total_llm_calls`` model turns (``DEFAULT_TURNS``
when the budget is unlimited, LangGraph's classic default); ``plan-execute`` may execute
``max_iterations × max_plan_steps`` steps, the number of steps ours may run. The structured calls
use the method the planner resolves for the model.
"""

from __future__ import annotations

import re
import warnings
from typing import Any, TypedDict

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from bench.goals_env import AUDIT_CHARS, GoalEnv, RunOutcome, final_text, tool_calls, turns

FAIL_RULE = "If the task cannot be done, give as the final answer FAILED: followed by the reason."
AGENT_PROMPT = (
    "You work on a folder of files (the workspace) through the tools you are given; paths are relative "
    "to the workspace. Use the tools to do the task, then reply with the answer in plain text. " + FAIL_RULE
)
EXAMPLES_INTRO = (
    "Examples of goals done with these tools, written as plans (`answer` stands for your own reply "
    "from what the earlier calls returned):"
)
_FAILED = re.compile(r"^[\s*_`>#]*FAILED\s*[*_`]*\s*:", re.IGNORECASE)


def failed_reason(answer: str) -> str | None:
    """The reason after ``FAILED:`` when ``answer`` starts with it (markdown emphasis allowed), else ``None``."""
    match = _FAILED.match(answer)
    if match is None:
        return None
    return answer[match.end():].strip(" *_`\n") or "(no reason given)"


def ended(answer: str, detail: dict[str, Any], *, empty: str) -> RunOutcome:
    """A baseline's end from its final answer: ``failed`` when it says ``FAILED:`` (or is empty), else ``done``."""
    if not answer:
        return RunOutcome("failed", error=empty, detail=detail)
    reason = failed_reason(answer)
    if reason is not None:
        return RunOutcome("failed", answer, f"the agent reported failure: {reason}", detail)
    return RunOutcome("done", answer, detail=detail)


def scaffold(env: GoalEnv) -> str:
    """The workspace's files and the worked examples, as ours' compact planning prompt has them.

    Built by the planner's own functions (``files_overview``, ``compact_system_fields``) over the
    context ours' planner is offered (``offered_context``), in the plan syntax ours' planner uses;
    the examples are there when ours would show them (its tools include those they use).
    """
    from soothe_planner.graph import offered_context
    from soothe_planner.models import PlanContext
    from soothe_planner.planner import compact_system_fields, files_overview

    context = offered_context(env.resolved.executor, PlanContext(workspace=str(env.config.execution.workspace)))
    calls = env.resolved.planner.settings.plan_syntax == "calls"
    examples = compact_system_fields(context, calls=calls)["examples"]
    text = f"Files: {files_overview(context.workspace)}"
    return text + (f"\n\n{EXAMPLES_INTRO}\n{examples}" if examples else "")


def agent_prompt(env: GoalEnv, scaffolded: bool) -> str:
    return AGENT_PROMPT + (f"\n\n{scaffold(env)}" if scaffolded else "")


def react_agent(model: BaseChatModel, tools: list[BaseTool], prompt: str = AGENT_PROMPT) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():  # deprecated in favour of a package this project does not use
        warnings.simplefilter("ignore")
        return create_react_agent(model, tools, prompt=prompt)


# --------------------------------------------------------------------------- react


async def _react(env: GoalEnv, scaffolded: bool) -> RunOutcome:
    from langgraph.errors import GraphRecursionError

    agent = react_agent(env.limited_model, env.tools, agent_prompt(env, scaffolded))
    limit = turns(env.config)
    try:
        state = await agent.ainvoke(
            {"messages": [HumanMessage(env.goal)]}, env.run_config(recursion_limit=2 * limit + 1)
        )
    except GraphRecursionError:
        return RunOutcome("failed", error=f"recursion limit: no final answer within {limit} model turns")
    messages = list(state.get("messages") or [])
    detail = {"messages": len(messages), "tool_calls": tool_calls(messages), "scaffold": scaffolded}
    return ended(final_text(messages), detail, empty="the agent ended without a final answer")


async def run_react(env: GoalEnv) -> RunOutcome:
    return await _react(env, scaffolded=False)


async def run_react_scaffold(env: GoalEnv) -> RunOutcome:
    return await _react(env, scaffolded=True)


# --------------------------------------------------------------------------- plan-and-execute


class PlanSteps(BaseModel):
    """The steps that reach the objective, in order."""

    steps: list[str] = Field(description="One simple task per step; doing them in order reaches the objective")


class Replan(BaseModel):
    """Either the final response, if the objective is reached, or the steps still to do."""

    response: str = Field(default="", description="The final answer for the user if the objective is reached, else empty")
    steps: list[str] = Field(default_factory=list, description="The steps still to do if it is not reached, else empty")


_PLAN_PROMPT = (
    "Make a step-by-step plan for the objective below: simple tasks that, done in order, reach it, with "
    "no superfluous step. The last step's result should give the final answer.\n\nObjective: {goal}"
)
_STEP_PROMPT = "The plan:\n{plan}\n\nCarry out step 1: {step}"
_REPLAN_PROMPT = (
    "Objective: {goal}\n\nThe plan was:\n{plan}\n\nSteps done so far, with their results:\n{done}\n\n"
    "If the objective is reached, write the final answer for the user in `response` and leave `steps` "
    "empty. Otherwise leave `response` empty and list in `steps` only what is still to do. "
) + FAIL_RULE  # the same words as the agents', the response being the final answer


class _PEState(TypedDict, total=False):
    plan: list[str]
    past_steps: list[tuple[str, str]]
    audit: list[dict[str, Any]]  # per executed step: its result and the tool calls made, for the results file
    response: str
    error: str


def _numbered(steps: list[str]) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))


async def _plan_execute(env: GoalEnv, scaffolded: bool) -> RunOutcome:
    from langgraph.graph import END, START, StateGraph

    from soothe_planner.planner import resolve_method

    cfg = env.config
    model = env.limited_model
    method = resolve_method(model, cfg.planner.structured_output_method)
    planner = model.with_structured_output(PlanSteps, method=method)
    replanner = model.with_structured_output(Replan, method=method)
    agent = react_agent(model, env.tools)
    limit = turns(cfg)
    max_steps = cfg.planner.max_iterations * cfg.planner.max_plan_steps

    def planning(text: str) -> list[HumanMessage]:
        """A planning call's prompt; the scaffold variant's also holds the files and examples (read anew)."""
        return [HumanMessage(f"{text}\n\n{scaffold(env)}" if scaffolded else text)]

    async def plan(state: _PEState) -> dict[str, Any]:
        out = await planner.ainvoke(planning(_PLAN_PROMPT.format(goal=env.goal)))
        steps = [s for s in out.steps if s.strip()]  # type: ignore[union-attr]
        return {"plan": steps} if steps else {"plan": [], "error": "the planner returned no steps"}

    async def execute(state: _PEState) -> dict[str, Any]:
        steps = state["plan"]
        task = _STEP_PROMPT.format(plan=_numbered(steps), step=steps[0])
        result = await agent.ainvoke({"messages": [HumanMessage(task)]}, {"recursion_limit": 2 * limit + 1})
        messages = list(result.get("messages") or [])
        text = final_text(messages) or "(no answer)"
        audit = {"step": steps[0], "result": text[:AUDIT_CHARS], "tool_calls": tool_calls(messages)}
        return {"past_steps": [*state.get("past_steps", []), (steps[0], text)],
                "audit": [*state.get("audit", []), audit]}

    async def replan(state: _PEState) -> dict[str, Any]:
        done = "\n".join(f"- {s}\n  result: {r}" for s, r in state.get("past_steps", []))
        out = await replanner.ainvoke(
            planning(_REPLAN_PROMPT.format(goal=env.goal, plan=_numbered(state["plan"]), done=done))
        )
        if out.response.strip():  # type: ignore[union-attr]
            return {"response": out.response.strip()}  # type: ignore[union-attr]
        steps = [s for s in out.steps if s.strip()]  # type: ignore[union-attr]
        if not steps:
            return {"plan": [], "error": "the replanner gave neither a response nor steps"}
        if len(state.get("past_steps", [])) >= max_steps:
            return {"plan": steps, "error": f"step limit: {max_steps} steps executed without a final response"}
        return {"plan": steps}

    def after_plan(state: _PEState) -> str:
        return "execute" if state.get("plan") else END

    def after_replan(state: _PEState) -> str:
        return END if state.get("response") or state.get("error") else "execute"

    builder: Any = StateGraph(_PEState)
    builder.add_node("plan", plan)
    builder.add_node("execute", execute)
    builder.add_node("replan", replan)
    builder.add_edge(START, "plan")
    builder.add_conditional_edges("plan", after_plan, ["execute", END])
    builder.add_edge("execute", "replan")
    builder.add_conditional_edges("replan", after_replan, ["execute", END])
    graph = builder.compile()
    final = await graph.ainvoke({}, env.run_config(recursion_limit=2 * max_steps + 4))
    detail = {"steps": final.get("audit", []), "scaffold": scaffolded}
    if final.get("response"):
        return ended(final["response"], detail, empty="")
    return RunOutcome("failed", error=final.get("error") or "ended without a response", detail=detail)


async def run_plan_execute(env: GoalEnv) -> RunOutcome:
    return await _plan_execute(env, scaffolded=False)


async def run_plan_execute_scaffold(env: GoalEnv) -> RunOutcome:
    return await _plan_execute(env, scaffolded=True)
