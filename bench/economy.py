"""How many LLM calls and prompt tokens does a completed goal cost, against common loop designs?

Scenarios (seeded): a goal is a ground-truth task DAG split into *stages* — the steps of stage k
become known only once stage k-1 is done (as when step outputs reveal what to do next), so a goal
needs as many planning rounds as it has stages. Some step attempts fail (the tool raises); the
goal is complete when every ground-truth step has succeeded once. Step outputs are ~600
characters of text, each carrying one fact a later step needs.

Every strategy runs on the same scripted oracle (``economy_world.World.next_round``), which plans
from what the prompt *contains*: a step whose inputs (facts of earlier steps) are not in the
prompt cannot be planned; the oracle asks for the producing step's output to be read again first
(an extra step and an extra round). So a strategy that sends less pays for what it dropped.
Step execution calls the same fake tools for all and costs no LLM call in any of them.

1. **ours** — the real StrangeLoop (``build_strange_loop``: ``LLMPlanner.plan`` two-phase over a
   goal-wide ``PlanManager``), run as the shipped config runs it: the intake call routes the goal
   first and a synthesis call writes the final answer (both counted); ``max_plan_steps`` is the
   package default (8), so a wider frontier takes more than one round.
2. **one call per iteration** (a Magentic-One-style ledger), plus its final-answer call;
3. **replan after every step** (LangGraph's plan-and-execute tutorial);
   each of 2 and 3 also *with our compaction* (a result in full only while new, then a
   160-character excerpt), so the context policy is not what decides the comparison.

Two runs in one command: the default suite (24 scenarios, 2–5 steps a stage, as before) for the
headline table, and a sweep over the number of steps per stage (1 to 8, 12 scenarios each): the
ratio of calls between designs follows the scenario shape, and the sweep shows where ours loses.

Prompt tokens are counted with tiktoken's cl100k_base over every message of every call plus the
JSON schema of the tool the structured call binds (providers bill that too). The scenarios, the
fake tools and the token counting live in ``economy_world.py``; the baselines in
``economy_baselines.py``. Everything is deterministic: a re-run gives the same tables.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections.abc import Callable
from functools import partial
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
)

__all__ = ["STRATEGIES", "main", "make_scenarios", "run_ours"]

# --------------------------------------------------------------------------- ours


async def run_ours(sc: Scenario, max_iterations: int = 16) -> Tally:
    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
    from soothe_planner.execution import StepExecutor
    from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config
    from soothe_planner.models import PlannerSettings
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import FunctionChatModel
    from soothe_planner.wire import AssessStatus, ChooseContinuation, RouteIntake, generation_model

    settings = PlannerSettings(max_iterations=max_iterations)
    schemas: dict[str, type[BaseModel]] = {
        "AssessStatus": AssessStatus,
        "GeneratePlan": generation_model(settings.max_plan_steps),
        "ChooseContinuation": ChooseContinuation,
        "RouteIntake": RouteIntake,
    }
    world = World(sc)
    tally = Tally()

    def answer(call: Any) -> Any:
        tally.add(call_tokens(call, schemas), call.schema_name)
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
        if call.schema_name == "RouteIntake":
            return {"route": "complex"}
        if call.schema_name is None:  # synthesis: the final answer, a plain text call
            return "The report is complete."
        if call.schema_name == "GeneratePlan":
            world.failed_since_plan = False
            prompt = "\n".join(m.text for m in call.messages)
            steps = [
                {"id": p.id, "description": p.text, "tools": [p.tool], "depends_on": p.deps}
                for p in world.next_round(prompt, cap=settings.max_plan_steps)
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
    graph = build_strange_loop(planner, executor, synthesize=True)
    state = goal_input(sc.goal, thread_id=sc.name, max_iterations=max_iterations)
    out: Any = await graph.ainvoke(state, run_config(sc.name, max_iterations))  # type: ignore[call-overload]
    tally.completed = out.get("status") == "done" and world.done
    tally.iterations = int(out.get("iteration") or 0)
    tally.rereads = world.rereads
    return tally


# --------------------------------------------------------------------------- the run

STRATEGIES: dict[str, Callable[[Scenario], Any]] = {
    "ours": run_ours,
    "one call per iteration": run_ledger,
    "one call per iteration + our compaction": partial(run_ledger, compact=True),
    "replan after every step": run_replan_every_step,
    "replan after every step + our compaction": partial(run_replan_every_step, compact=True),
}
REF = "replan after every step"
SWEEP_WIDTHS = (1, 2, 3, 4, 5, 6, 7, 8)


async def _measure(scenarios: list[Scenario]) -> dict[str, list[Tally]]:
    out: dict[str, list[Tally]] = {k: [] for k in STRATEGIES}
    for sc in scenarios:
        for name, fn in STRATEGIES.items():
            out[name].append(await fn(sc))
    return out


def _summarise(res: dict[str, list[Tally]], n: int) -> dict[str, dict[str, Any]]:
    summary: dict[str, dict[str, Any]] = {}
    for name, tallies in res.items():
        done = [t for t in tallies if t.completed]
        k = max(1, len(done))
        summary[name] = {
            "completed": len(done),
            "scenarios": n,
            "calls_per_goal": sum(t.calls for t in done) / k,
            "prompt_tokens_per_goal": sum(t.prompt_tokens for t in done) / k,
            "rereads_per_goal": sum(t.rereads for t in done) / k,
            "median_tokens_per_call": statistics.median([c for t in done for c in t.per_call] or [0]),
            "iterations_per_goal": sum(t.iterations for t in done) / k,
        }
    ours = summary["ours"]
    for s in summary.values():
        s["calls_vs_replan_every_step"] = s["calls_per_goal"] / summary[REF]["calls_per_goal"]
        s["tokens_vs_replan_every_step"] = s["prompt_tokens_per_goal"] / summary[REF]["prompt_tokens_per_goal"]
        s["ours_calls_vs_this"] = ours["calls_per_goal"] / s["calls_per_goal"]
        s["ours_tokens_vs_this"] = ours["prompt_tokens_per_goal"] / s["prompt_tokens_per_goal"]
    return summary


def _verdict(ratio: float) -> str:
    return f"**{ratio:.2f} (ours loses)**" if ratio > 1.0 else f"{ratio:.2f}"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench economy", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="8 scenarios and 4 per sweep point")
    ap.add_argument("--scenarios", type=int, default=None)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--no-sweep", action="store_true", help="only the default suite")
    args = ap.parse_args(argv)
    n = args.scenarios or (8 if args.quick else 24)
    scenarios = make_scenarios(n, args.seed)
    print(
        f"economy: {n} scenarios, {sum(len(s.steps) for s in scenarios)} ground-truth steps, "
        f"{sum(len(s.fail_attempts) for s in scenarios)} failing attempts, tokens: cl100k_base\n"
    )
    res = asyncio.run(_measure(scenarios))
    summary = _summarise(res, n)
    print(table(
        ["strategy", "completed", "LLM calls / goal", "prompt tokens / goal", "re-reads / goal",
         "median tokens / call", "calls ÷ replan-every-step", "tokens ÷ replan-every-step",
         "ours ÷ this: calls", "ours ÷ this: tokens"],
        [[name, f"{s['completed']}/{n}", s["calls_per_goal"], s["prompt_tokens_per_goal"], s["rereads_per_goal"],
          s["median_tokens_per_call"], s["calls_vs_replan_every_step"], s["tokens_vs_replan_every_step"],
          _verdict(s["ours_calls_vs_this"]), _verdict(s["ours_tokens_vs_this"])] for name, s in summary.items()],
    ))
    ours = summary["ours"]
    print(
        f"\ntargets: calls ≤ 0.6× replan-every-step: {ours['calls_vs_replan_every_step']:.2f} "
        f"({'met' if ours['calls_vs_replan_every_step'] <= 0.6 else 'MISSED'}); "
        f"tokens ≤ 0.5×: {ours['tokens_vs_replan_every_step']:.2f} "
        f"({'met' if ours['tokens_vs_replan_every_step'] <= 0.5 else 'MISSED'}); "
        f"tokens < one-call: {ours['ours_tokens_vs_this'] if False else summary['one call per iteration']['ours_tokens_vs_this']:.2f} "
        f"({'met' if summary['one call per iteration']['ours_tokens_vs_this'] < 1 else 'MISSED'})"
    )
    sections: dict[str, int] = {}
    for tally in res["ours"]:
        for section, n_tokens in tally.sections.items():
            sections[section] = sections.get(section, 0) + n_tokens
    total = sum(sections.values()) or 1
    print("\nours: where the prompt tokens go (all scenarios)")
    print(table(["section", "tokens", "share"],
                [[k, v, f"{v / total:.0%}"] for k, v in sorted(sections.items(), key=lambda kv: -kv[1])]))
    summary["ours"]["token_sections"] = sections
    per_scenario = [
        {"scenario": sc.name, "stages": sc.stages, "steps": len(sc.steps), "failing_attempts": len(sc.fail_attempts),
         **{name: {"calls": res[name][i].calls, "prompt_tokens": res[name][i].prompt_tokens,
                   "rereads": res[name][i].rereads, "completed": res[name][i].completed,
                   "iterations": res[name][i].iterations} for name in res}}
        for i, sc in enumerate(scenarios)
    ]
    sweep = [] if args.no_sweep else _sweep(4 if args.quick else 12, args.seed)
    path = write_results("economy", {"quick": args.quick, "seed": args.seed, "summary": summary,
                                     "scenarios": per_scenario, "sweep": sweep}, settings=vars(args))
    print(f"\nwrote {path.name}")
    return 0


def _sweep(per_width: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    for w in SWEEP_WIDTHS:
        scenarios = make_scenarios(per_width, seed + w, width=(w, w))
        summary = _summarise(asyncio.run(_measure(scenarios)), per_width)
        rows.append({"steps_per_stage": w, "summary": summary})
    names = [k for k in STRATEGIES if k != "ours"]
    print(f"\nSweep: steps per stage, {per_width} scenarios each (1–4 stages). Ours ÷ each design, "
          "LLM calls / prompt tokens per completed goal; above 1.00 ours costs more\n")
    print(table(
        ["steps / stage", "ours: calls, tokens, re-reads", *names],
        [[r["steps_per_stage"],
          f"{r['summary']['ours']['calls_per_goal']:.2f}, {r['summary']['ours']['prompt_tokens_per_goal']:.0f}, "
          f"{r['summary']['ours']['rereads_per_goal']:.2f}",
          *(f"{_verdict(r['summary'][k]['ours_calls_vs_this'])} / {_verdict(r['summary'][k]['ours_tokens_vs_this'])}"
            for k in names)] for r in rows],
    ))
    incomplete = {r["steps_per_stage"]: {k: v["completed"] for k, v in r["summary"].items() if v["completed"] < per_width}
                  for r in rows}
    if any(incomplete.values()):
        print(f"\nnot every goal completed: {incomplete}")
    return rows
