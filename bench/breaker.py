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

Baselines, measured in the same run, each on the same flood and the same probe model:

(a) *semaphore at the model call* — a plain ``asyncio.Semaphore(limit)`` held around the model's
    own ``_agenerate``, the point where ours holds its slot: the fair comparison, since both let
    LangChain's per-call preparation run outside the slot;
(b) *semaphore around ainvoke* — the semaphore held for the whole ``ainvoke`` (preparation and
    callbacks included), as application code usually writes it;
(c) *abatch(max_concurrency=limit)* — LangChain's own cap, which also wraps each whole call;
(d) *semaphore, no LangChain* — the latency alone under the semaphore: the floor of asyncio
    scheduling.

Every variant runs ``--repeats`` times (default 5), interleaved so that drift in the machine's
load falls on all of them alike; the table gives the median and the spread (min–max), and the
load average before and after. The latency is simulated with ``asyncio.sleep``, so the run
measures scheduling, not a network.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import statistics
import time
from typing import Any

from langchain_core.messages import AIMessage
from pydantic import PrivateAttr

from bench._common import loadavg, table, write_results

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


def _model_with_semaphore_at_call(probe: _Probe, limit: int) -> Any:
    """The probe model with a plain semaphore held around its own ``_agenerate`` (where ours holds a slot)."""
    from soothe_planner.testing import FunctionChatModel

    class SemaphoreAtCall(FunctionChatModel):
        _sem: asyncio.Semaphore = PrivateAttr()

        async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
            async with self._sem:
                return await super()._agenerate(*args, **kwargs)

    model = SemaphoreAtCall(probe)
    model._sem = asyncio.Semaphore(limit)
    return model


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


async def _run_baseline(n: int, limit: int, latency: float, kind: str) -> dict[str, Any]:
    probe = _Probe(latency)
    sem = asyncio.Semaphore(limit)
    model = _model_with_semaphore_at_call(probe, limit) if kind == "semaphore at the model call" else _model(probe)

    async def one(i: int) -> Any:
        if kind == "semaphore at the model call":
            return await model.ainvoke(f"request {i}")
        async with sem:
            if kind == "semaphore around ainvoke":
                return await model.ainvoke(f"request {i}")
            return await probe(i)

    t0 = time.perf_counter()
    if kind == "abatch(max_concurrency)":
        await model.abatch([f"request {i}" for i in range(n)], config={"max_concurrency": limit})
    else:
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


VARIANTS = (
    "ours",
    "semaphore at the model call",
    "semaphore around ainvoke",
    "abatch(max_concurrency)",
    "semaphore, no LangChain",
)


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _cell(stat: dict[str, float]) -> str:
    return f"{stat['median']:.1%} ({stat['min']:.1%}–{stat['max']:.1%})"


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench breaker", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="200 requests, 10 ms latency")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--latency-ms", type=float, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    n = args.requests or (200 if args.quick else 1000)
    latency = (args.latency_ms if args.latency_ms is not None else (10.0 if args.quick else 20.0)) / 1000.0
    load_before = loadavg()

    results = []
    for limit in LIMITS:
        runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
        for _ in range(args.repeats):  # interleaved: load drift falls on every variant alike
            for v in VARIANTS:
                run = _run_limited(n, limit, latency) if v == "ours" else _run_baseline(n, limit, latency, v)
                runs[v].append(asyncio.run(run))
        results.append({
            "limit": limit,
            "peak_in_flight_model_max": max(r["peak_in_flight_model"] for r in runs["ours"]),
            "calls_seen_by_model_min": min(r["calls_seen_by_model"] for r in runs["ours"]),
            **{v: {"utilisation": _spread([r["utilisation"] for r in rs]),
                   "slot_occupancy": _spread([r["slot_occupancy"] for r in rs]),
                   "actual_s": _spread([r["actual_s"] for r in rs]),
                   "peak_in_flight_model_max": max(r["peak_in_flight_model"] for r in rs)}
               for v, rs in runs.items()},
        })
    cost = asyncio.run(_per_call_cost(200))
    load_after = loadavg()
    print(f"breaker: {n} concurrent requests, model latency {latency * 1000:.0f} ms, {args.repeats} repeats; "
          f"load average before {load_before}, after {load_after}\n")
    print("Utilisation (ideal ÷ actual time), median (min–max)\n")
    print(table(["limit", "peak in flight (ours, max over repeats)", *VARIANTS],
                [[r["limit"], r["peak_in_flight_model_max"], *(_cell(r[v]["utilisation"]) for v in VARIANTS)]
                 for r in results]))
    print("\nSlot occupancy (time the model served ÷ limit × actual), median (min–max)\n")
    print(table(["limit", *VARIANTS], [[r["limit"], *(_cell(r[v]["slot_occupancy"]) for v in VARIANTS)]
                                       for r in results]))
    held = all(r["peak_in_flight_model_max"] == r["limit"] and r["calls_seen_by_model_min"] == n for r in results)
    print(f"\ncap held exactly in every repeat (peak = limit, every call ran): {'yes' if held else 'NO'}")
    print(
        f"per-call CPU at zero latency: {cost['wrapped'] * 1000:.2f} ms through the limiter, "
        f"{cost['unwrapped'] * 1000:.2f} ms unwrapped (the limiter adds "
        f"{(cost['wrapped'] - cost['unwrapped']) * 1e6:.0f} µs a call)"
    )
    path = write_results(
        "breaker",
        {"requests": n, "latency_s": latency, "quick": args.quick, "repeats": args.repeats,
         "load_before": load_before, "load_after": load_after, "per_call_cpu_s": cost, "limits": results},
        settings=vars(args),
    )
    print(f"\nwrote {path.name}")
    return 0
