"""Does the global LLM-call limiter hold its cap under a flood, and does it waste capacity?

1,000 requests are launched at once through ``controller.wrap_model(model)``, where the model
answers after a fixed small async latency. For ``global_max_llm_calls`` = 1, 4, 16 we record:

- the peak number of calls in flight, counted inside the model itself (so the number is what a
  provider would see, not what the limiter believes) — it must equal the limit, never exceed it;
- utilisation = ideal time / actual time, ideal = ceil(n / limit) × latency: 1.0 means the limiter
  kept every slot busy; the gap is the per-call cost of LangChain plus the limiter, plus however
  late the event loop's timer wakes the simulated model;
- slot occupancy = time the model spent serving calls (timed inside it) / (limit × actual time):
  the share of the allowed capacity the model was kept busy. It does not charge the limiter for
  the simulated latency running long (asyncio's timers wake up to a millisecond late, more under
  load; a real provider's reply wakes the loop through its socket instead).

Baselines, measured in the same run: (a) the same unwrapped model called under a plain
``asyncio.Semaphore(limit)`` — LangChain's own per-call work included, no limiter, no budget
counting; the difference to ours is what the limiter costs; (b) the latency alone under the
semaphore, no LangChain — the floor of asyncio scheduling.

The latency is simulated with ``asyncio.sleep``, so the run measures scheduling, not a network.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from typing import Any

from langchain_core.messages import AIMessage

from bench._common import table, write_results

LIMITS = (1, 4, 16)


class _Probe:
    """Counts calls in flight inside the model."""

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.in_flight = 0
        self.peak = 0
        self.calls = 0
        self.busy_s = 0.0

    async def __call__(self, call: Any = None, **_: Any) -> AIMessage:
        self.in_flight += 1
        self.calls += 1
        self.peak = max(self.peak, self.in_flight)
        entered = time.perf_counter()
        try:
            await asyncio.sleep(self.latency)
        finally:
            self.in_flight -= 1
            self.busy_s += time.perf_counter() - entered
        return AIMessage(content="ok")


def _model(probe: _Probe) -> Any:
    from soothe_planner.testing import FunctionChatModel

    return FunctionChatModel(probe)


async def _run_limited(n: int, limit: int, latency: float) -> dict[str, Any]:
    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy

    probe = _Probe(latency)
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=limit))
    model = controller.wrap_model(_model(probe))
    t0 = time.perf_counter()
    await asyncio.gather(*(model.ainvoke(f"request {i}") for i in range(n)))
    elapsed = time.perf_counter() - t0
    ideal = math.ceil(n / limit) * latency
    return {
        "limit": limit,
        "requests": n,
        "calls_seen_by_model": probe.calls,
        "peak_in_flight_model": probe.peak,
        "peak_in_flight_controller": controller.peak_llm_calls,
        "total_llm_calls": controller.total_llm_calls,
        "ideal_s": ideal,
        "actual_s": elapsed,
        "utilisation": ideal / elapsed,
        "model_busy_s": probe.busy_s,
        "slot_occupancy": probe.busy_s / (limit * elapsed),
    }


async def _run_semaphore(n: int, limit: int, latency: float, *, through_langchain: bool) -> dict[str, Any]:
    probe = _Probe(latency)
    sem = asyncio.Semaphore(limit)
    model = _model(probe)

    async def one(i: int) -> Any:
        async with sem:
            if through_langchain:
                return await model.ainvoke(f"request {i}")
            return await probe(i)

    t0 = time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(n)))
    elapsed = time.perf_counter() - t0
    ideal = math.ceil(n / limit) * latency
    return {
        "limit": limit,
        "peak_in_flight_model": probe.peak,
        "actual_s": elapsed,
        "utilisation": ideal / elapsed,
        "slot_occupancy": probe.busy_s / (limit * elapsed),
    }


async def _per_call_cost(n: int) -> dict[str, float]:
    """Seconds of CPU one sequential call costs at zero latency: wrapped, and the same model unwrapped."""
    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy

    out = {}
    for label in ("wrapped", "unwrapped"):
        probe = _Probe(0.0)
        model = _model(probe)
        if label == "wrapped":
            model = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1)).wrap_model(model)
        await model.ainvoke("warm up")
        t0 = time.perf_counter()
        for i in range(n):
            await model.ainvoke(f"request {i}")
        out[label] = (time.perf_counter() - t0) / n
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench breaker", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="200 requests, 10 ms latency")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--latency-ms", type=float, default=None)
    args = ap.parse_args(argv)
    n = args.requests or (200 if args.quick else 1000)
    latency = (args.latency_ms if args.latency_ms is not None else (10.0 if args.quick else 20.0)) / 1000.0

    rows, results = [], []
    for limit in LIMITS:
        ours = asyncio.run(_run_limited(n, limit, latency))
        base = asyncio.run(_run_semaphore(n, limit, latency, through_langchain=True))
        bare = asyncio.run(_run_semaphore(n, limit, latency, through_langchain=False))
        ours["baseline_semaphore_langchain"] = base
        ours["baseline_semaphore_bare"] = bare
        results.append(ours)
        ok = ours["peak_in_flight_model"] == limit and ours["calls_seen_by_model"] == n
        rows.append(
            [
                limit,
                ours["peak_in_flight_model"],
                ours["peak_in_flight_controller"],
                f"{ours['ideal_s']:.2f}",
                f"{ours['actual_s']:.2f}",
                f"{ours['utilisation']:.1%}",
                f"{ours['slot_occupancy']:.1%}",
                f"{base['utilisation']:.1%} / {base['slot_occupancy']:.1%}",
                f"{bare['utilisation']:.1%} / {bare['slot_occupancy']:.1%}",
                "yes" if ok and ours["utilisation"] >= 0.95 else "NO",
            ]
        )
    cost = asyncio.run(_per_call_cost(200))
    print(f"breaker: {n} concurrent requests, model latency {latency * 1000:.0f} ms\n")
    print(
        table(
            [
                "global_max_llm_calls",
                "peak in flight (model)",
                "peak (controller)",
                "ideal s",
                "actual s",
                "utilisation",
                "slot occupancy",
                "semaphore + same model (util. / occ.)",
                "semaphore, no LangChain (util. / occ.)",
                "target met",
            ],
            rows,
        )
    )
    print(
        f"\nper-call CPU at zero latency: {cost['wrapped'] * 1000:.2f} ms through the limiter, "
        f"{cost['unwrapped'] * 1000:.2f} ms unwrapped (the limiter adds "
        f"{(cost['wrapped'] - cost['unwrapped']) * 1e6:.0f} µs a call)"
    )
    path = write_results(
        "breaker",
        {"requests": n, "latency_s": latency, "quick": args.quick, "per_call_cpu_s": cost, "runs": results},
    )
    print(f"\nwrote {path.name}")
    return 0
