"""How does each contender run one goal, on the same model, tools and workspace copy?

Three strategies, each ``async (GoalEnv) -> RunOutcome``:

- ``ours`` — the StrangeLoop as the config sets it: ``resolve_run`` and ``ResolvedRun.graph``, the
  one builder the CLI and the server use, so every key is read as they read it; ``run.approval``
  is off (nobody is there to approve). Its checkpointer is in memory: the loop's behaviour does not depend
  on the backend, and a benchmark should leave no SQLite file behind.
- ``react`` — LangGraph's prebuilt ReAct agent (``create_react_agent``) over the same tools, the
  goal as one human message: what a user would pick instead. Its final answer is its last AI
  message; it is ``done`` when it ends normally with a non-empty answer, ``failed`` otherwise.
- ``plan-execute`` — the shape of LangGraph's plan-and-execute tutorial, written here: a planner
  call returns a list of steps (structured output); a ReAct agent executes the first one; a
  replanner call returns either the final response or the steps still to do; repeat. One flat
  replan schema (``response`` or ``steps``) stands in for the tutorial's union of two schemas: a
  grammar-constrained small model fills one object more reliably than it picks a union branch,
  and the baseline should not lose on plumbing.

What is shared, so the comparison is about strategy and nothing else: one chat model instance
(built once from ``models``), tools built from ``execution.tools`` for the goal's workspace copy
(the same objects the StrangeLoop's executor holds), one ``ConcurrencyController`` per goal from
the config, through which every strategy's model calls pass — the same in-flight cap and the
same ``max_total_llm_calls`` budget for all three — and one usage-counting callback attached at
the root of each run. The two baselines get the same one-sentence system prompt for their agent
(what to work on and when to stop); their structured calls use the method the planner resolves
for the model. Bounds: ``react`` may take ``max_total_llm_calls`` model turns (25 when the budget
is unlimited, LangGraph's classic default); ``plan-execute`` may execute
``max_iterations × max_plan_steps`` steps, the number of steps ours may run.
"""

from __future__ import annotations

import json
import threading
import uuid
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypedDict

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

AGENT_PROMPT = (
    "You work on a folder of files (the workspace) through the tools you are given; paths are relative "
    "to the workspace. Use the tools to do the task, then reply with the answer in plain text."
)
DEFAULT_TURNS = 25
AUDIT_CHARS = 500  # of each step's output kept in the results file


@dataclass
class RunOutcome:
    """What a strategy reports: ``status`` is ``done`` or ``failed``; ``answer`` is its final answer."""

    status: str
    answer: str = ""
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)


class UsageCounter(BaseCallbackHandler):
    """Counts the model calls of one run and their token usage, from each reply's ``usage_metadata``.

    A call refused by the budget never reached the model and is not counted; a call that failed
    (a transport error) is counted in ``llm_calls`` and in ``llm_errors``. ``calls_without_usage``
    says how many replies carried no usage, so a token total of 0 cannot pass for a measurement.
    """

    run_inline = True  # counted on the caller's thread, so totals are complete when the run returns

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.llm_calls = 0
        self.llm_errors = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.calls_without_usage = 0

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        usage = None
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or usage
        with self._lock:
            self.llm_calls += 1
            if usage:
                self.prompt_tokens += int(usage.get("input_tokens") or 0)
                self.completion_tokens += int(usage.get("output_tokens") or 0)
            else:
                self.calls_without_usage += 1

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        from soothe_planner.errors import LLMBudgetExceeded

        if isinstance(error, LLMBudgetExceeded):
            return
        with self._lock:
            self.llm_calls += 1
            self.llm_errors += 1

    def as_dict(self) -> dict[str, int]:
        return {
            "llm_calls": self.llm_calls,
            "llm_errors": self.llm_errors,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "calls_without_usage": self.calls_without_usage,
        }


@dataclass
class GoalEnv:
    """Everything one goal's run gets: the goal, its config (workspace = the copy), model, tools."""

    goal: str
    config: Any  # SootheConfig with execution.workspace pointing at the copy
    model: BaseChatModel  # the one shared instance
    resolved: Any  # ResolvedRun: planner, executor (tools bound to the copy), controller
    counter: UsageCounter

    @property
    def tools(self) -> list[BaseTool]:
        return list(self.resolved.executor.tools.values())

    @property
    def limited_model(self) -> BaseChatModel:
        """The shared model, its calls taking this run's LLM slots and budget."""
        limited: BaseChatModel = self.resolved.controller.wrap_model(self.model)
        return limited

    def run_config(self, **extra: Any) -> Any:
        """A run config (``RunnableConfig``) with the usage counter at the root, plus ``extra``."""
        return {"callbacks": [self.counter], **extra}


def goal_env(goal: str, config: Any, model: BaseChatModel) -> GoalEnv:
    """The run's machinery for ``config``, sharing ``model``, resolved as the CLI resolves it."""
    from soothe_planner.config import resolve_run

    return GoalEnv(goal=goal, config=config, model=model, resolved=resolve_run(config, model), counter=UsageCounter())


def _turns(config: Any) -> int:
    return int(config.concurrency.max_total_llm_calls) or DEFAULT_TURNS


def _react_agent(model: BaseChatModel, tools: list[BaseTool]) -> Any:
    from langgraph.prebuilt import create_react_agent

    with warnings.catch_warnings():  # deprecated in favour of a package this project does not use
        warnings.simplefilter("ignore")
        return create_react_agent(model, tools, prompt=AGENT_PROMPT)


def _tool_calls(messages: list[Any]) -> list[str]:
    """The tool calls an agent made, as ``name(args)`` lines cut to ``AUDIT_CHARS``, for the results file."""
    out = []
    for m in messages:
        for call in getattr(m, "tool_calls", None) or []:
            out.append(f"{call['name']}({json.dumps(call['args'], ensure_ascii=False)})"[:AUDIT_CHARS])
    return out


def _final_text(messages: list[Any]) -> str:
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage) or last.tool_calls:
        return ""
    return last.text.strip()


# --------------------------------------------------------------------------- ours


async def run_ours(env: GoalEnv) -> RunOutcome:
    from langgraph.errors import GraphRecursionError

    from soothe_planner.config import CheckpointConfig, resolve_persistence
    from soothe_planner.graph import goal_input, run_config

    cfg = env.config.model_copy(update={
        "checkpoint": CheckpointConfig(backend="memory"),
        "run": env.config.run.model_copy(update={"approval": False}),
    })
    thread_id = uuid.uuid4().hex[:12]
    async with resolve_persistence(cfg) as persistence:
        graph = replace(env.resolved, config=cfg).graph(checkpointer=persistence.checkpointer, store=persistence.store)
        inp = goal_input(env.goal, thread_id=thread_id, max_iterations=cfg.planner.max_iterations)
        try:
            values = await graph.ainvoke(inp, env.run_config(**run_config(thread_id, cfg.planner.max_iterations)))
        except GraphRecursionError:
            return RunOutcome("failed", error=f"did not converge within max_iterations={cfg.planner.max_iterations}")
    status = str(values.get("status") or "failed")
    detail = {"iterations": values.get("iteration"), "action_history": values.get("action_history") or [],
              "deliverable": (values.get("plan_manager") or {}).get("deliverable"),
              "steps": _step_audit(values.get("plan_manager"))}
    return RunOutcome("done" if status == "done" else "failed", str(values.get("final_answer") or ""),
                      values.get("error"), detail)


def _step_audit(manager: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each step of the run's DAG with its status and result, so a reader can see what was done."""
    if not manager:
        return []
    from soothe_planner.dag import PlanManager

    out = []
    for step in PlanManager.from_dict(manager).nodes:
        result = step.result
        out.append({
            "id": step.id, "description": step.description, "tool": step.tool, "args": step.args,
            "tools": list(step.tools), "subagent": step.subagent, "status": step.status,
            "output": (result.output[:AUDIT_CHARS] if result is not None else ""),
            "error": (result.error if result is not None else None),
            "error_type": (result.error_type if result is not None else None),
        })
    return out


# --------------------------------------------------------------------------- react


async def run_react(env: GoalEnv) -> RunOutcome:
    from langgraph.errors import GraphRecursionError

    agent = _react_agent(env.limited_model, env.tools)
    turns = _turns(env.config)
    try:
        state = await agent.ainvoke(
            {"messages": [HumanMessage(env.goal)]}, env.run_config(recursion_limit=2 * turns + 1)
        )
    except GraphRecursionError:
        return RunOutcome("failed", error=f"recursion limit: no final answer within {turns} model turns")
    messages = list(state.get("messages") or [])
    answer = _final_text(messages)
    detail = {"messages": len(messages), "tool_calls": _tool_calls(messages)}
    if not answer:
        return RunOutcome("failed", error="the agent ended without a final answer", detail=detail)
    return RunOutcome("done", answer, detail=detail)


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
    "empty. Otherwise leave `response` empty and list in `steps` only what is still to do."
)


class _PEState(TypedDict, total=False):
    plan: list[str]
    past_steps: list[tuple[str, str]]
    audit: list[dict[str, Any]]  # per executed step: its result and the tool calls made, for the results file
    response: str
    error: str


def _numbered(steps: list[str]) -> str:
    return "\n".join(f"{i}. {s}" for i, s in enumerate(steps, 1))


async def run_plan_execute(env: GoalEnv) -> RunOutcome:
    from langgraph.graph import END, START, StateGraph

    from soothe_planner.planner import resolve_method

    cfg = env.config
    model = env.limited_model
    method = resolve_method(model, cfg.planner.structured_output_method)
    planner = model.with_structured_output(PlanSteps, method=method)
    replanner = model.with_structured_output(Replan, method=method)
    agent = _react_agent(model, env.tools)
    turns = _turns(cfg)
    max_steps = cfg.planner.max_iterations * cfg.planner.max_plan_steps

    async def plan(state: _PEState) -> dict[str, Any]:
        out = await planner.ainvoke([HumanMessage(_PLAN_PROMPT.format(goal=env.goal))])
        steps = [s for s in out.steps if s.strip()]  # type: ignore[union-attr]
        return {"plan": steps} if steps else {"plan": [], "error": "the planner returned no steps"}

    async def execute(state: _PEState) -> dict[str, Any]:
        steps = state["plan"]
        task = _STEP_PROMPT.format(plan=_numbered(steps), step=steps[0])
        result = await agent.ainvoke({"messages": [HumanMessage(task)]}, {"recursion_limit": 2 * turns + 1})
        messages = list(result.get("messages") or [])
        text = _final_text(messages) or "(no answer)"
        audit = {"step": steps[0], "result": text[:AUDIT_CHARS], "tool_calls": _tool_calls(messages)}
        return {"past_steps": [*state.get("past_steps", []), (steps[0], text)],
                "audit": [*state.get("audit", []), audit]}

    async def replan(state: _PEState) -> dict[str, Any]:
        done = "\n".join(f"- {s}\n  result: {r}" for s, r in state.get("past_steps", []))
        out = await replanner.ainvoke(
            [HumanMessage(_REPLAN_PROMPT.format(goal=env.goal, plan=_numbered(state["plan"]), done=done))]
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
    detail = {"steps": final.get("audit", [])}
    if final.get("response"):
        return RunOutcome("done", final["response"], detail=detail)
    return RunOutcome("failed", error=final.get("error") or "ended without a response", detail=detail)


Strategy = Callable[[GoalEnv], Awaitable[RunOutcome]]

STRATEGIES: dict[str, Strategy] = {"ours": run_ours, "react": run_react, "plan-execute": run_plan_execute}
