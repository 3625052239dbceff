"""What does the framework itself cost, per loop iteration and per plan step, as plans grow?

Two measurements:

1. **Overhead per iteration**: one loop iteration for a 20-step plan — ``planner.plan()`` (assess +
   generate, two model calls) + ``PlanManager.ingest`` + ``StepExecutor.run`` with instant fake
   tools — against a model that answers at once (a ``FunctionChatModel`` returning the scripted
   answer). The time spent inside the model's own function is measured and subtracted, so what is
   left is the package plus LangChain's structured-output and tool-call machinery. One planner and
   one executor serve every iteration, as in a run. The tool is a coroutine: LangChain runs a
   synchronous tool in a worker thread, a hop that costs more than the rest of a step. Target: ≤ 5 ms.
2. **PlanManager at scale**: ingest one decision of N steps (a random layered DAG, ≤ 3
   dependencies a step) and walk it to the end — ``ready_steps()``, ``mark_started``,
   ``record_step_outcomes`` — at N = 1k, 10k, 100k. Target: 10k < 100 ms; growth close to
   linear, shown as the time per step at each size relative to 1k. Baseline, in the same run: the
   same walk as a bare Kahn topological sort over plain dicts (the least any pure-Python ready walk
   can cost), so the ratio is the price of validation, statuses, results and history. Peak memory
   of the 100k manager is taken with ``tracemalloc`` in a separate pass (tracing slows the timed
   pass down, so the two are never mixed). Two walks of the same DAG: a *wave* walk takes every
   ready step per ``ready_steps()`` call; a *one-at-a-time* walk takes one ready step, records its
   outcome and asks again, as a scheduler with one free slot does.
3. **Wide plans**: N independent steps (N = 1k, 8k, 64k) run by ``StepExecutor.run`` with an
   instant coroutine tool, on one step slot and on many (32): the scheduler's own cost per
   completion must not grow with the number of steps waiting. Beside it, the manager alone walks
   the same plan one completion at a time. Time per step at each size relative to 1k is the
   linearity figure (a quadratic term shows as a ratio growing with N: 8× the steps, 8× the ratio).

Every timing is printed with the machine's load average (``/proc/loadavg``) at the start and end
of its part: on a shared machine, the load says how far to trust the absolute numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
import tracemalloc
from collections import deque
from typing import Any

from bench._common import loadavg, table, write_results
from bench._dags import RandomDag, random_dag
from soothe_planner.models import StepResult

SIZES = (1_000, 10_000, 100_000)


def _inputs(dag: RandomDag) -> tuple[Any, dict[str, StepResult]]:
    # Results are built before the clock starts: making them is the executor's cost, not the manager's.
    outcome = {
        f"s{i}": StepResult(step_id=f"s{i}", success=True, output="ok", duration_ms=0) for i in range(dag.n)
    }
    return dag.decision(), outcome


def _manager_walk(
    dag: RandomDag, inputs: tuple[Any, dict[str, StepResult]] | None = None
) -> tuple[float, float, Any]:
    from soothe_planner.dag.plan_manager import PlanManager

    decision, outcome = inputs or _inputs(dag)
    gc.collect()
    t0 = time.perf_counter()
    pm = PlanManager("scale benchmark", max_plan_steps=dag.n)
    pm.ingest(decision, 0)
    t1 = time.perf_counter()
    done = 0
    while True:
        ready = pm.ready_steps()
        if not ready:
            break
        for step in ready:
            pm.mark_started(step.id)
        pm.record_step_outcomes([outcome[s.id] for s in ready])
        done += len(ready)
    t2 = time.perf_counter()
    if done != dag.n or pm.has_unfinished():
        raise RuntimeError(f"walk finished {done} of {dag.n} steps")
    return t1 - t0, t2 - t1, pm


def _manager_walk_one_at_a_time(dag: RandomDag, inputs: tuple[Any, dict[str, StepResult]] | None = None) -> float:
    """The walk a one-slot scheduler does: take one ready step, record it, ask again."""
    from soothe_planner.dag.plan_manager import PlanManager

    decision, outcome = inputs or _inputs(dag)
    pm = PlanManager("scale benchmark", max_plan_steps=dag.n)
    pm.ingest(decision, 0)
    gc.collect()
    t0 = time.perf_counter()
    done = 0
    while ready := pm.ready_steps(1):
        sid = ready[0].id
        pm.mark_started(sid)
        pm.record_step_outcomes([outcome[sid]])
        done += 1
    elapsed = time.perf_counter() - t0
    if done != dag.n:
        raise RuntimeError(f"one-at-a-time walk finished {done} of {dag.n} steps")
    return elapsed


def _kahn_walk(dag: RandomDag) -> float:
    t0 = time.perf_counter()
    ids = [f"s{i}" for i in range(dag.n)]
    deps = {ids[i]: [ids[d] for d in dag.deps[i]] for i in range(dag.n)}
    children: dict[str, list[str]] = {k: [] for k in deps}
    waiting = {k: len(v) for k, v in deps.items()}
    for k, v in deps.items():
        for d in v:
            children[d].append(k)
    status = dict.fromkeys(deps, "pending")
    ready = deque(k for k, w in waiting.items() if w == 0)
    done = 0
    while ready:
        k = ready.popleft()
        status[k] = "completed"
        done += 1
        for c in children[k]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    assert done == dag.n
    return time.perf_counter() - t0


def _peak_memory(dag: RandomDag) -> tuple[int, int]:
    """Peak traced bytes of the whole pass (the decision and results included), and the manager's
    own share: the peak above what the inputs hold."""
    gc.collect()
    tracemalloc.start()
    try:
        inputs = _inputs(dag)
        held, _ = tracemalloc.get_traced_memory()
        _, _, pm = _manager_walk(dag, inputs)
        _, peak = tracemalloc.get_traced_memory()
        del pm
    finally:
        tracemalloc.stop()
    return peak, peak - held


def run_scale(sizes: tuple[int, ...], repeats: int) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for n in sizes:
        dag = random_dag(n, layers=max(10, n // 50), seed=n, max_deps=3)
        reps = repeats if n < 100_000 else 1
        ingest, walk, single, base = [], [], [], []
        for _ in range(reps):
            i, w, pm = _manager_walk(dag)
            del pm
            ingest.append(i)
            walk.append(w)
            single.append(_manager_walk_one_at_a_time(dag))
            base.append(_kahn_walk(dag))
        rows.append(
            {
                "steps": n,
                "ingest_s": statistics.median(ingest),
                "walk_s": statistics.median(walk),
                "walk_one_at_a_time_s": statistics.median(single),
                "total_s": statistics.median(ingest) + statistics.median(walk),
                "kahn_baseline_s": statistics.median(base),
            }
        )
    first = rows[0]
    for r in rows:
        r["us_per_step"] = r["total_s"] / r["steps"] * 1e6
        r["per_step_vs_smallest"] = r["us_per_step"] / first["us_per_step"]
        r["vs_kahn"] = r["total_s"] / r["kahn_baseline_s"]
    peak, own = _peak_memory(random_dag(sizes[-1], layers=max(10, sizes[-1] // 50), seed=sizes[-1]))
    return {
        "sizes": rows,
        "peak_memory_bytes": peak,
        "manager_peak_memory_bytes": own,
        "peak_memory_steps": sizes[-1],
    }


# --------------------------------------------------------------------------- wide plans

WIDE_SIZES = (1_000, 8_000, 64_000)
WIDE_SLOTS = (1, 32)


async def _wide_run(n: int, slots: int) -> float:
    from langchain_core.tools import tool

    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
    from soothe_planner.dag.plan_manager import PlanManager
    from soothe_planner.execution import StepExecutor
    from soothe_planner.models import AgentDecision, StepAction

    @tool
    async def noop(query: str = "") -> str:
        """Do nothing, at once."""
        return "ok"

    pm = PlanManager("wide plan", max_plan_steps=n)
    pm.ingest(AgentDecision(steps=[StepAction(id=f"s{i}", description=f"part {i}", tools=["noop"]) for i in range(n)]))
    controller = ConcurrencyController(ConcurrencyPolicy(max_parallel_steps=slots, global_max_llm_calls=0))
    executor = StepExecutor(tools=[noop], controller=controller)
    gc.collect()
    t0 = time.perf_counter()
    results = await executor.run(pm)
    elapsed = time.perf_counter() - t0
    if len(results) != n or not all(r.success for r in results):
        raise RuntimeError(f"wide run finished {len(results)} of {n} steps")
    return elapsed


def run_wide(sizes: tuple[int, ...], slots: tuple[int, ...]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for n in sizes:
        flat = RandomDag(f"wide-{n}", deps=[[] for _ in range(n)], cost=[1.0] * n)
        row: dict[str, Any] = {"steps": n, "load_before": loadavg()}
        for k in slots:
            row[f"executor_s_slots_{k}"] = asyncio.run(_wide_run(n, k))
        row["manager_one_at_a_time_s"] = _manager_walk_one_at_a_time(flat)
        row["load_after"] = loadavg()
        rows.append(row)
    first = rows[0]
    timed = [*(f"executor_s_slots_{k}" for k in slots), "manager_one_at_a_time_s"]
    for r in rows:
        for key in timed:
            r[f"{key}_per_step_vs_smallest"] = (r[key] / r["steps"]) / (first[key] / first["steps"])
    return rows


# --------------------------------------------------------------------------- loop overhead


def _plan_reply(n_steps: int) -> dict[str, Any]:
    steps = [
        {
            "id": f"s{i}",
            "description": f"do part {i}",
            "tools": ["noop"],
            "depends_on": [f"s{i - 1}"] if i % 4 else [],
        }
        for i in range(n_steps)
    ]
    return {"plan_action": "new", "execution_mode": "dependency", "next_action": "run them", "steps": steps}


async def _loop_iteration_times(iterations: int, n_steps: int) -> dict[str, Any]:
    from langchain_core.tools import tool

    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
    from soothe_planner.dag.plan_manager import PlanManager
    from soothe_planner.execution import StepExecutor
    from soothe_planner.models import LoopState, PlanContext, PlannerSettings
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import FunctionChatModel

    @tool
    async def noop(query: str = "") -> str:
        """Do nothing, at once."""
        return "ok"

    model_time = 0.0
    plan_reply = _plan_reply(n_steps)

    def answer(call: Any) -> Any:
        nonlocal model_time
        t = time.perf_counter()
        reply: Any = (
            {"status": "continue", "goal_progress": 0.1, "confidence": 0.9, "summary": "not yet"}
            if call.schema_name == "AssessStatus"
            else plan_reply
        )
        model_time += time.perf_counter() - t
        return reply

    samples: list[float] = []
    parts: list[tuple[float, float, float]] = []
    # one planner and one executor serve every iteration, as in a StrangeLoop run; each iteration
    # gets a fresh plan (manager) so every one plans and runs the same 20 steps
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=0, max_parallel_steps=0))
    model = FunctionChatModel(answer)
    planner = LLMPlanner(model, settings=PlannerSettings(max_plan_steps=n_steps, retries=0), controller=controller)
    executor = StepExecutor(tools=[noop], controller=controller)
    for it in range(iterations + 2):  # two warm-up iterations: imports, schema caches
        manager = PlanManager("overhead benchmark", max_plan_steps=n_steps)
        state = LoopState(goal="overhead benchmark", iteration=1, max_iterations=10)
        context = PlanContext(available_capabilities=executor.capabilities())
        model_time = 0.0
        t0 = time.perf_counter()
        result = await planner.plan(state.goal, state, context, plan_manager=manager)
        t1 = time.perf_counter()
        manager.ingest(result, state.iteration)
        t2 = time.perf_counter()
        results = await executor.run(manager)
        t3 = time.perf_counter()
        elapsed = t3 - t0 - model_time
        if len(results) != n_steps or not all(r.success for r in results):
            raise RuntimeError(f"iteration ran {len(results)} of {n_steps} steps")
        if it >= 2:
            samples.append(elapsed)
            parts.append((t1 - t0 - model_time, t2 - t1, t3 - t2))
    return {
        "iterations": iterations,
        "steps_per_plan": n_steps,
        "median_ms": statistics.median(samples) * 1000,
        "p90_ms": sorted(samples)[int(0.9 * (len(samples) - 1))] * 1000,
        "min_ms": min(samples) * 1000,
        "plan_ms": statistics.median(p[0] for p in parts) * 1000,
        "ingest_ms": statistics.median(p[1] for p in parts) * 1000,
        "execute_ms": statistics.median(p[2] for p in parts) * 1000,
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench scale", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="sizes 1k/10k, fewer repeats")
    ap.add_argument("--skip-loop", action="store_true", help="only the PlanManager part")
    ap.add_argument("--only-wide", action="store_true", help="only the wide-plan part")
    args = ap.parse_args(argv)
    sizes = (1_000, 10_000) if args.quick else SIZES
    payload: dict[str, Any] = {"quick": args.quick}
    if args.only_wide:
        args.skip_loop = True

    if not args.skip_loop:
        load = loadavg()
        loop = asyncio.run(_loop_iteration_times(10 if args.quick else 50, 20))
        loop["load_before"], loop["load_after"] = load, loadavg()
        payload["loop_iteration"] = loop
        print("Framework time per loop iteration (20-step plan, zero-latency model, instant tools)\n")
        print(
            table(
                ["median ms", "p90 ms", "min ms", "plan() ms", "ingest ms", "execute ms", "target", "met"],
                [
                    [
                        loop["median_ms"],
                        loop["p90_ms"],
                        loop["min_ms"],
                        loop["plan_ms"],
                        loop["ingest_ms"],
                        loop["execute_ms"],
                        "≤ 5 ms",
                        "yes" if loop["median_ms"] <= 5 else "NO",
                    ]
                ],
            )
        )
        print()

    if not args.only_wide:
        _print_plan_manager(payload, sizes, args.quick)
    wide_sizes = WIDE_SIZES[:2] if args.quick else WIDE_SIZES
    wide = run_wide(wide_sizes, WIDE_SLOTS)
    payload["wide_plans"] = wide
    print("\nWide plans: N independent steps through StepExecutor.run (instant coroutine tool)\n")
    print(
        table(
            ["steps", *[f"{k} slot{'s' if k > 1 else ''}: s" for k in WIDE_SLOTS],
             *[f"{k} slot{'s' if k > 1 else ''}: per-step vs 1k" for k in WIDE_SLOTS],
             "manager alone, one at a time: ms", "per-step vs 1k", "load (1-min avg) before / after"],
            [
                [r["steps"], *[r[f"executor_s_slots_{k}"] for k in WIDE_SLOTS],
                 *[r[f"executor_s_slots_{k}_per_step_vs_smallest"] for k in WIDE_SLOTS],
                 r["manager_one_at_a_time_s"] * 1000, r["manager_one_at_a_time_s_per_step_vs_smallest"],
                 f"{r['load_before'][0]:.2f} / {r['load_after'][0]:.2f}"]
                for r in wide
            ],
        )
    )
    path = write_results("scale", payload, settings=vars(args))
    print(f"\nwrote {path.name}")
    return 0


def _print_plan_manager(payload: dict[str, Any], sizes: tuple[int, ...], quick: bool) -> None:
    load = loadavg()
    sc = run_scale(sizes, repeats=3 if quick else 5)
    sc["load_before"], sc["load_after"] = load, loadavg()
    payload["plan_manager"] = sc
    print("PlanManager ingest + full ready walk (random layered DAG, ≤ 3 deps/step)\n")
    print(
        table(
            [
                "steps",
                "ingest ms",
                "walk ms",
                "one-at-a-time walk ms",
                "total ms",
                "µs/step",
                "per-step vs 1k",
                "bare Kahn ms",
                "× Kahn",
            ],
            [
                [
                    r["steps"],
                    r["ingest_s"] * 1000,
                    r["walk_s"] * 1000,
                    r["walk_one_at_a_time_s"] * 1000,
                    r["total_s"] * 1000,
                    r["us_per_step"],
                    r["per_step_vs_smallest"],
                    r["kahn_baseline_s"] * 1000,
                    r["vs_kahn"],
                ]
                for r in sc["sizes"]
            ],
        )
    )
    ten_k = next((r for r in sc["sizes"] if r["steps"] == 10_000), None)
    if ten_k:
        print(
            f"\n10k steps: {ten_k['total_s'] * 1000:.1f} ms (target < 100 ms: {'met' if ten_k['total_s'] < 0.1 else 'MISSED'})"
        )
    print(
        f"peak memory, {sc['peak_memory_steps']} steps (tracemalloc): {sc['peak_memory_bytes'] / 2**20:.1f} MiB, "
        f"of which the manager's own: {sc['manager_peak_memory_bytes'] / 2**20:.1f} MiB "
        "(the rest is the decision and results it is given)"
    )
    print(f"load average (1/5/15 min) before: {sc['load_before']}, after: {sc['load_after']}")
