"""How many LLM calls and prompt tokens does a completed goal cost, against two common loop designs?

Scenarios (seeded, ≥ 20): a goal is a ground-truth task DAG split into *stages* — the steps of
stage k become known only once stage k-1 is done (as when step outputs reveal what to do next),
so a goal needs as many planning rounds as it has stages. Some step attempts fail (the tool
raises); the goal is complete when every ground-truth step has succeeded once. Step outputs are
~600 characters of text, as a search or a file read returns.

Every strategy runs on the same scripted model: a ``FunctionChatModel`` that answers from the
scenario's ground truth and what has really run (it never reads the prompt), so each strategy
gets the same, perfect decisions and what differs is only what the strategy *asks* and *sends*.
Step execution calls the same fake tools for all three and costs no LLM call in any of them.

1. **ours** — the real StrangeLoop (``build_strange_loop``: ``LLMPlanner.plan`` two-phase over a
   goal-wide ``PlanManager``; intake preset to ``complex``, no synthesis): a small assessment call
   each iteration whose answer is not already known (it is at iteration 0, with no plan yet, and
   after a step failed for good: ``replan``), and a generation call only when the goal is not
   done, whose prompt holds the compact DAG rendering with excerpts of older results and, fenced,
   the results new since the last plan in full.
2. **one call per iteration** (a Magentic-One-style ledger): each iteration one structured call
   with the full context — task, tools, current plan and the full text of every step result so
   far — answering "is the request satisfied?" and "what are the next steps (a DAG)?".
3. **replan after every step** (LangGraph's plan-and-execute tutorial): one planning call, then
   execute ONE step, then a replanning call shown the objective, the original plan and every past
   step with its full result, answering with the remaining plan or the final response.

Prompt tokens are counted with tiktoken's cl100k_base over every message of every call plus the
JSON schema of the tool the structured call binds (providers bill that too). The scenarios, the
fake tools and the token counting live in ``economy_world.py``; the baselines, whose prompts are
written in the spirit of the designs they stand for with the same tool list and the same
ground-truth answers (and no longer than the originals), in ``economy_baselines.py``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel

from bench._common import table, write_results
from bench.economy_baselines import run_ledger, run_replan_every_step
from bench.economy_world import (
    Scenario,
    Tally,
    World,
    call_tokens,
    make_scenarios,
    schema_tokens,
    section_tokens,
    step_text,
)

__all__ = ["STRATEGIES", "main", "make_scenarios", "run_ours"]

# --------------------------------------------------------------------------- ours


async def run_ours(sc: Scenario, max_iterations: int = 12) -> Tally:
    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
    from soothe_planner.execution import StepExecutor
    from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config
    from soothe_planner.models import PlannerSettings
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import FunctionChatModel
    from soothe_planner.wire import AssessStatus, ChooseContinuation, RouteIntake, generation_model

    settings = PlannerSettings(max_plan_steps=8, max_iterations=max_iterations)
    schemas: dict[str, type[BaseModel]] = {
        "AssessStatus": AssessStatus,
        "GeneratePlan": generation_model(settings.max_plan_steps),
        "ChooseContinuation": ChooseContinuation,
        "RouteIntake": RouteIntake,
    }
    world = World(sc)
    tally = Tally()

    def answer(call: Any) -> Any:
        tally.add(call_tokens(call, schemas))
        section_tokens(call, tally.sections)
        schema = schemas.get(call.schema_name or "")
        if schema:
            tally.sections["schema"] = tally.sections.get("schema", 0) + schema_tokens(schema)
        if call.schema_name == "AssessStatus":
            if world.done:
                return {
                    "status": "done",
                    "goal_progress": 1.0,
                    "confidence": 0.9,
                    "summary": "all parts done",
                }
            status = "replan" if world.failed_since_plan else "continue"
            progress = len(world.succeeded) / len(sc.steps)
            return {"status": status, "goal_progress": progress, "confidence": 0.8, "summary": "more to do"}
        if call.schema_name == "GeneratePlan":
            world.failed_since_plan = False
            front = world.frontier()
            ids = {s.id for s in front}
            steps = [
                {
                    "id": s.id,
                    "description": step_text(s),
                    "tools": [s.tool],
                    "depends_on": [d for d in s.deps if d in ids],
                }
                for s in front
            ]
            return {
                "plan_action": "new",
                "execution_mode": "dependency",
                "next_action": "run the next part",
                "steps": steps,
            }
        raise AssertionError(f"unexpected call {call.schema_name!r}")

    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=0, max_parallel_steps=4))
    model = FunctionChatModel(answer)
    planner = LLMPlanner(model, settings=settings, controller=controller)
    executor = StepExecutor(tools=world.tools(), controller=controller)
    graph = build_strange_loop(planner, executor)
    state = {**goal_input(sc.goal, thread_id=sc.name, max_iterations=max_iterations), "intake": "complex"}
    out: Any = await graph.ainvoke(state, run_config(sc.name, max_iterations))  # type: ignore[call-overload]
    tally.completed = out.get("status") == "done" and world.done
    tally.iterations = int(out.get("iteration") or 0)
    return tally


# --------------------------------------------------------------------------- the run

STRATEGIES: dict[str, Callable[[Scenario], Any]] = {
    "ours": run_ours,
    "one call per iteration": run_ledger,
    "replan after every step": run_replan_every_step,
}


async def _measure(scenarios: list[Scenario]) -> dict[str, list[Tally]]:
    out: dict[str, list[Tally]] = {k: [] for k in STRATEGIES}
    for sc in scenarios:
        for name, fn in STRATEGIES.items():
            out[name].append(await fn(sc))
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench economy", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="8 scenarios instead of 24")
    ap.add_argument("--scenarios", type=int, default=None)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    n = args.scenarios or (8 if args.quick else 24)
    scenarios = make_scenarios(n, args.seed)
    print(
        f"economy: {n} scenarios, {sum(len(s.steps) for s in scenarios)} ground-truth steps, "
        f"{sum(len(s.fail_attempts) for s in scenarios)} failing attempts, tokens: cl100k_base\n"
    )
    res = asyncio.run(_measure(scenarios))
    ref = "replan after every step"
    summary: dict[str, dict[str, Any]] = {}
    for name, tallies in res.items():
        done = [t for t in tallies if t.completed]
        k = max(1, len(done))
        summary[name] = {
            "completed": len(done),
            "calls_per_goal": sum(t.calls for t in done) / k,
            "prompt_tokens_per_goal": sum(t.prompt_tokens for t in done) / k,
            "median_tokens_per_call": statistics.median([c for t in done for c in t.per_call] or [0]),
            "iterations_per_goal": sum(t.iterations for t in done) / k,
        }
    base = summary[ref]
    rows = []
    for name, s in summary.items():
        s["calls_vs_replan_every_step"] = s["calls_per_goal"] / base["calls_per_goal"]
        s["tokens_vs_replan_every_step"] = s["prompt_tokens_per_goal"] / base["prompt_tokens_per_goal"]
        s["tokens_vs_one_call_per_iteration"] = (
            s["prompt_tokens_per_goal"] / summary["one call per iteration"]["prompt_tokens_per_goal"]
        )
        rows.append(
            [
                name,
                f"{s['completed']}/{n}",
                s["calls_per_goal"],
                s["prompt_tokens_per_goal"],
                s["median_tokens_per_call"],
                s["calls_vs_replan_every_step"],
                s["tokens_vs_replan_every_step"],
                s["tokens_vs_one_call_per_iteration"],
            ]
        )
    print(
        table(
            [
                "strategy",
                "completed",
                "LLM calls / goal",
                "prompt tokens / goal",
                "median tokens / call",
                "calls ÷ replan-every-step",
                "tokens ÷ replan-every-step",
                "tokens ÷ one-call",
            ],
            rows,
        )
    )
    ours = summary["ours"]
    print(
        f"\ntargets: calls ≤ 0.6× replan-every-step: {ours['calls_vs_replan_every_step']:.2f} "
        f"({'met' if ours['calls_vs_replan_every_step'] <= 0.6 else 'MISSED'}); "
        f"tokens ≤ 0.5×: {ours['tokens_vs_replan_every_step']:.2f} "
        f"({'met' if ours['tokens_vs_replan_every_step'] <= 0.5 else 'MISSED'}); "
        f"tokens < one-call: {ours['tokens_vs_one_call_per_iteration']:.2f} "
        f"({'met' if ours['tokens_vs_one_call_per_iteration'] < 1 else 'MISSED'})"
    )
    sections: dict[str, int] = {}
    for tally in res["ours"]:
        for section, n_tokens in tally.sections.items():
            sections[section] = sections.get(section, 0) + n_tokens
    total = sum(sections.values()) or 1
    print("\nours: where the prompt tokens go (all scenarios)")
    print(
        table(
            ["section", "tokens", "share"],
            [[k, v, f"{v / total:.0%}"] for k, v in sorted(sections.items(), key=lambda kv: -kv[1])],
        )
    )
    summary["ours"]["token_sections"] = sections
    per_scenario = [
        {
            "scenario": sc.name,
            "stages": sc.stages,
            "steps": len(sc.steps),
            "failing_attempts": len(sc.fail_attempts),
            **{
                name: {
                    "calls": res[name][i].calls,
                    "prompt_tokens": res[name][i].prompt_tokens,
                    "completed": res[name][i].completed,
                    "iterations": res[name][i].iterations,
                }
                for name in res
            },
        }
        for i, sc in enumerate(scenarios)
    ]
    path = write_results(
        "economy", {"quick": args.quick, "seed": args.seed, "summary": summary, "scenarios": per_scenario}
    )
    print(f"\nwrote {path.name}")
    return 0
