"""What does a cap shared through PostgreSQL cost per LLM call, against the process's own cap?

``concurrency.backend: postgres`` (``soothe_planner/concurrency/shared.py``) takes a leased row
before each provider call and gives it back after: two short statements, each a hop to the
database agent's thread and a round trip to the server. Measured here on localhost, each figure
against the process backend measured in the same run, interleaved so load drift falls on both:

- *limiter alone*: ``N`` sequential ``controller.llm_call()`` blocks with nothing inside — the
  limiter's own cost per call;
- *wrapped call, zero latency*: ``N`` sequential ``ainvoke`` of a wrapped ``FunctionChatModel``
  answering at once — the cost as a run sees it, LangChain's per-call work included;
- *flood*: ``F`` concurrent ``ainvoke`` with a model latency of ``L`` ms at a cap of 4 —
  utilisation (ideal time ÷ actual), i.e. how much capacity the hand-over between calls loses when
  a freed slot goes through the database instead of straight to the next waiter.

The DSN comes from ``--dsn``, else ``SOOTHE_TEST_POSTGRES_DSN`` (``eval "$(bash .ci/postgres.sh)"``
starts a throwaway server). Results: ``bench/results/shared_cap.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import statistics
import time
import uuid
from typing import Any

from langchain_core.messages import AIMessage

from bench._common import loadavg, table, write_results

BACKENDS = ("process", "postgres")
CAP = 4


def _controller(backend: str, dsn: str, scope: str) -> Any:
    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy

    extra: dict[str, Any] = {"backend": "postgres", "dsn": dsn, "scope": scope} if backend == "postgres" else {}
    return ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=CAP, **extra))


def _model(latency: float) -> Any:
    from soothe_planner.testing import FunctionChatModel

    async def answer(call: Any = None, **_: Any) -> AIMessage:
        if latency:
            await asyncio.sleep(latency)
        return AIMessage(content="ok")

    return FunctionChatModel(answer)


async def _limiter_alone(controller: Any, n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        async with controller.llm_call("bench"):
            pass
    return (time.perf_counter() - t0) / n


async def _wrapped_call(controller: Any, n: int) -> float:
    model = controller.wrap_model(_model(0.0))
    await model.ainvoke("warm up")
    t0 = time.perf_counter()
    for i in range(n):
        await model.ainvoke(f"request {i}")
    return (time.perf_counter() - t0) / n


async def _flood(controller: Any, n: int, latency: float) -> float:
    model = controller.wrap_model(_model(latency))
    t0 = time.perf_counter()
    await asyncio.gather(*(model.ainvoke(f"request {i}") for i in range(n)))
    return math.ceil(n / CAP) * latency / (time.perf_counter() - t0)


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench shared_cap", description=__doc__.split("\n")[0])
    ap.add_argument("--dsn", default=os.environ.get("SOOTHE_TEST_POSTGRES_DSN"))
    ap.add_argument("--quick", action="store_true", help="200 calls, a flood of 100, 2 repeats")
    ap.add_argument("--repeats", type=int, default=None)
    ap.add_argument("--latency-ms", type=float, default=20.0)
    args = ap.parse_args(argv)
    if not args.dsn:
        print("shared_cap: no PostgreSQL: pass --dsn or start one with: eval \"$(bash .ci/postgres.sh)\"")
        return 2
    n, flood, repeats = (200, 100, 2) if args.quick else (1000, 400, args.repeats or 5)
    latency = args.latency_ms / 1000.0
    scope = f"bench-{uuid.uuid4().hex[:8]}"
    load_before = loadavg()
    controllers = {b: _controller(b, args.dsn, scope) for b in BACKENDS}
    asyncio.run(_limiter_alone(controllers["postgres"], 5))  # connect and create the table outside the timing

    runs: dict[str, dict[str, list[float]]] = {b: {"limiter_s": [], "call_s": [], "flood": []} for b in BACKENDS}
    for _ in range(repeats):
        for b in BACKENDS:
            c = controllers[b]
            runs[b]["limiter_s"].append(asyncio.run(_limiter_alone(c, n)))
            runs[b]["call_s"].append(asyncio.run(_wrapped_call(c, n)))
            runs[b]["flood"].append(asyncio.run(_flood(c, flood, latency)))
    load_after = loadavg()

    stats = {b: {k: _spread(v) for k, v in r.items()} for b, r in runs.items()}
    med = {b: {k: s["median"] for k, s in st.items()} for b, st in stats.items()}
    summary = {
        "limiter_ratio": med["postgres"]["limiter_s"] / med["process"]["limiter_s"],
        "call_ratio": med["postgres"]["call_s"] / med["process"]["call_s"],
        "flood_ratio": med["postgres"]["flood"] / med["process"]["flood"],
        "overhead_per_call_ms": (med["postgres"]["call_s"] - med["process"]["call_s"]) * 1000,
    }
    print(f"shared_cap: cap {CAP}, {n} sequential calls, a flood of {flood} at {args.latency_ms:.0f} ms, "
          f"{repeats} repeats, load {load_before[:1]} -> {load_after[:1]}; medians (min-max)\n")

    def cell(b: str, k: str, scale: float = 1.0) -> str:
        s = stats[b][k]
        return f"{s['median'] * scale:.3f} ({s['min'] * scale:.3f}-{s['max'] * scale:.3f})"

    print(table(
        ["measure", "process", "postgres", "postgres / process"],
        [["limiter alone, ms a call", cell("process", "limiter_s", 1000), cell("postgres", "limiter_s", 1000),
          f"{summary['limiter_ratio']:.1f}x"],
         ["wrapped call at zero latency, ms", cell("process", "call_s", 1000), cell("postgres", "call_s", 1000),
          f"{summary['call_ratio']:.2f}x"],
         [f"flood utilisation at {args.latency_ms:.0f} ms", cell("process", "flood"), cell("postgres", "flood"),
          f"{summary['flood_ratio']:.3f}"]],
    ))
    print(f"\noverhead per call: {summary['overhead_per_call_ms']:.2f} ms")
    path = write_results("shared_cap", {
        "cap": CAP, "calls": n, "flood": flood, "latency_s": latency, "repeats": repeats,
        "load_before": load_before, "load_after": load_after, "backends": stats, "summary": summary,
    }, settings=vars(args))
    print(f"wrote {path}")
    return 0
