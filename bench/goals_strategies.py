"""How does each contender run one goal, on the same model, tools and workspace copy?

Each strategy is ``async (GoalEnv) -> RunOutcome`` (``bench/goals_env.py``), named in ``STRATEGIES``:

- ``ours`` — the StrangeLoop as the config sets it: ``resolve_run`` and ``ResolvedRun.graph``, the
  one builder the CLI and the server use, so every key is read as they read it; ``run.approval``
  is off (nobody is there to approve). Its checkpointer is in memory: the loop's behaviour does not depend
  on the backend, and a benchmark should leave no SQLite file behind.
- ``react``, ``plan-execute`` and their ``-scaffold`` variants — the baselines
  (``bench/goals_baselines.py``): what a user would pick instead, told in the same words how to say
  a goal cannot be done (``FAILED:``), the variants also given the files and examples ours' prompt has.
- ``deep-agents`` — the peer (``bench/goals_peers.py``): Deep Agents with its to-do planning tool,
  over our tools; it needs the ``bench-peers`` extra, and ``unavailable`` says so before any goal runs.

What is shared, so the comparison is about strategy and nothing else: one chat model instance
(built once from ``models``), the tools ours' executor holds — ``execution.tools`` built for the
goal's workspace copy, the counting tools among them when the config names them (``GoalEnv.tools``:
the same objects) — one ``ConcurrencyController`` per goal from the config, through which every
strategy's model calls pass (the same in-flight cap and the same ``max_total_llm_calls`` budget for
all), the same ``--max-seconds`` bound (``bench/goals.py``) and one usage-counting callback
attached at the root of each run.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from bench.goals_baselines import run_plan_execute, run_plan_execute_scaffold, run_react, run_react_scaffold
from bench.goals_env import AUDIT_CHARS, GoalEnv, RunOutcome, UsageCounter, goal_env
from bench.goals_peers import missing_extra, run_deep_agents

__all__ = ["STRATEGIES", "GoalEnv", "RunOutcome", "Strategy", "UsageCounter", "goal_env", "unavailable"]


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
    decision = values.get("current_decision")
    planner = env.resolved.planner
    state = {"plan_manager": values.get("plan_manager"),
             "decision": decision.model_dump(mode="json") if hasattr(decision, "model_dump") else decision,
             "capabilities": [c.model_dump(mode="json") for c in env.resolved.executor.capabilities()],
             "small_model": planner.small_model, "grounded": planner.grounding_required()}
    return RunOutcome("done" if status == "done" else "failed", str(values.get("final_answer") or ""),
                      values.get("error"), detail, state)


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



Strategy = Callable[[GoalEnv], Awaitable[RunOutcome]]

STRATEGIES: dict[str, Strategy] = {
    "ours": run_ours,
    "react": run_react,
    "react-scaffold": run_react_scaffold,
    "plan-execute": run_plan_execute,
    "plan-execute-scaffold": run_plan_execute_scaffold,
    "deep-agents": run_deep_agents,
}


def unavailable(strategy: str) -> str | None:
    """Why ``strategy`` cannot run here (a package of an extra is missing), or ``None``."""
    return missing_extra() if strategy == "deep-agents" else None
