"""Replay a recording of real runs (``local_record.py``) to a model server: how fast, and was each reply usable?

``python -m bench local --replay [--recording FILE]`` sends every recorded request, in the order
the loop sent it, streamed, to the package's embedded server on the recording's model (or
``--model``), twice:

- **cold** first — nothing kept: a fresh server for each goal's run (as every CLI run starts
  one), its prompt cache off, and before every request a short call of another prompt, so that
  nothing of the previous request can be reused either;
- **warm** second — one server with the shipped settings (its prompt cache on) for the whole
  recording, the requests back to back in the recorded order: each reuses what the earlier ones
  (earlier iterations, earlier goals) left, never a whole identical prompt.

Each reply is timed (``local_servers.stream``) and judged by what the recorded run needed
(``local_expect.judge``: the right assessment status, every item a step was given, a plan the
planner's own check accepts). Reported per phase and kind of call: how many calls, the median
prompt and completion tokens, the median and the 90th percentile (nearest rank: the smallest value
at least 90 % of the calls do not exceed) of the time to first token and of the total time, and
how many replies were usable; then each target (plan ≤ 6 s, assessment ≤ 3 s, model step ≤ 4 s)
met or missed, cold first: met only when the median is within it *and* every reply was usable.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench._common import loadavg, table, write_results
from bench.local import FLUSH, TARGETS_S, Config, Counter, Sample, ServerFactory, held, summarise
from bench.local_expect import judge as judge_call
from bench.local_servers import Server

__all__ = ["PHASES", "p90", "phases", "render", "replay", "summarise_replay", "verdict"]

PHASES = ("cold", "warm")
CallJudge = Callable[[dict[str, Any], str], str]


def phases(planner: dict[str, Any]) -> list[Config]:
    """The cold server, then the warm one, for a recording made with ``planner``'s settings."""
    profile = str(planner.get("prompt_profile") or "compact")
    method = str(planner.get("structured_output_method") or "function_calling")
    return [Config("cold", "python", profile, method, reuse=False, restart=True,
                   tuning={"prompt_cache_mib": 0, "prompt_states_mib": 0}),
            Config("warm", "python", profile, method, reuse=True)]


def p90(values: Sequence[float]) -> float:
    """The 90th percentile by nearest rank: the ⌈0.9·n⌉-th smallest value."""
    if not values:
        raise ValueError("p90 needs at least one value")
    ordered = sorted(values)
    return ordered[math.ceil(0.9 * len(ordered)) - 1]


def summarise_replay(samples: Sequence[Sample]) -> dict[str, Any]:
    """``summarise``'s medians, plus the 90th percentiles of TTFT and total time and the usable count."""
    out = summarise(samples)
    out["ttft_p90_s"] = round(p90([s.ttft for s in samples]), 3)
    out["total_p90_s"] = round(p90([s.total for s in samples]), 3)
    out.setdefault("usable", sum(s.problem == "" for s in samples))
    out.setdefault("problems", [])
    return out


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in loadavg()) or "n/a"


def replay(config: Config, threads: int, recording: dict[str, Any], *, make_server: ServerFactory, counter: Counter,
           lock: str | None = None, kinds: Sequence[str] | None = None, judge: CallJudge = judge_call) -> dict[str, Any]:
    """Replay every recorded call (of ``kinds``; all by default) on ``config``'s server(s); the phase's rows."""
    samples: dict[str, list[Sample]] = {}

    def send(server: Server, calls: Sequence[dict[str, Any]]) -> None:
        for call in calls:
            if kinds is not None and call["kind"] not in kinds:
                continue
            if not config.reuse:
                server.stream(FLUSH)
            body = call["body"]
            got = server.stream(body)
            samples.setdefault(call["kind"], []).append(Sample(
                got.ttft, got.total, got.completion_tokens or counter.count(got.text), got.cpu_s,
                got.prompt_tokens or counter.prompt_tokens(body), got.reused, got.text, judge(call, got.text)))

    goals = recording["goals"]
    with held(lock):
        load_before = _load()
        started = time.monotonic()
        if config.restart:
            for goal in goals:
                with make_server(config, threads) as fresh:
                    send(fresh, goal["calls"])
        else:
            with make_server(config, threads) as server:
                server.stream(FLUSH)  # unmeasured: the model's pages in memory, as for the cold servers' flushes
                for goal in goals:
                    send(server, goal["calls"])
        seconds = time.monotonic() - started
        load_after = _load()
    return {"config": config.name, "threads": threads, "load_before": load_before, "load_after": load_after,
            "seconds": round(seconds, 1), "rows": {k: summarise_replay(ss) for k, ss in samples.items()}}


def _in_order(results: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cold before warm (then any other), each phase's thread counts in the order run."""
    rank = {name: i for i, name in enumerate(PHASES)}
    return sorted(results, key=lambda r: rank.get(r["config"], len(PHASES)))


def render(results: Sequence[dict[str, Any]]) -> str:
    headers = ["server", "threads", "call", "n", "prompt tok", "compl tok", "TTFT s", "TTFT p90 s", "total s",
               "total p90 s", "usable", "load before → after"]
    rows = [[res["config"], res["threads"], kind, r["n"], r["prompt_tokens"], r["completion_tokens"], r["ttft_s"],
             r["ttft_p90_s"], r["total_s"], r["total_p90_s"], f"{r['usable']}/{r['n']}",
             f"{res['load_before']} → {res['load_after']}"]
            for res in _in_order(results) for kind, r in res["rows"].items()]
    return table(headers, rows)


def verdict(results: Sequence[dict[str, Any]]) -> list[str]:
    """Per phase (cold first) and target: the median and p90 total time, the usable replies, met or missed."""
    lines = []
    for res in _in_order(results):
        for kind, target in TARGETS_S.items():
            r = res["rows"].get(kind)
            if not r:
                continue
            met = r["total_s"] <= target and r["usable"] == r["n"]
            lines.append(f"{res['config']} @ {res['threads']} thread(s): {kind} median {r['total_s']:.2f} s, "
                         f"p90 {r['total_p90_s']:.2f} s (target ≤ {target:.0f} s), {r['usable']} of {r['n']} "
                         f"replies usable — {'met' if met else 'missed'}")
    return lines


def expected_statuses(recording: dict[str, Any]) -> dict[str, int]:
    """How many recorded assessments should be done, and how many continue or replan."""
    out = {"done": 0, "continue or replan": 0}
    for goal in recording["goals"]:
        for call in goal["calls"]:
            if call["kind"] == "assess":
                out["done" if call["expect"]["status"] == ["done"] else "continue or replan"] += 1
    return out


# --------------------------------------------------------------------------- the commands


def record_command(args: Any, spec: str, answer: Any = None) -> int:
    """``--record``: run the chosen goals on the model, write the recording; 1 if it has no continue/replan case."""
    from bench.goals_suite import SuiteError
    from bench.local_record import DEFAULT_GOALS, DEFAULT_RECORDING, choose, record, write_recording
    from bench.provenance import embedded_model_file

    names = [n.strip() for n in args.goals.split(",") if n.strip()] if args.goals else list(DEFAULT_GOALS)
    try:
        chosen = choose(names)
    except SuiteError as exc:
        raise SystemExit(f"bench local --record: {exc}") from None
    print(f"recording {len(chosen)} goal(s) on {spec}" + (" (scripted)" if answer is not None else ""), flush=True)
    with held(None if answer is not None else args.lock):  # the embedded server runs while recording
        recording = record(chosen, spec, answer=answer, max_seconds=args.max_seconds, echo=True)
    path = write_recording(recording, Path(args.recording or DEFAULT_RECORDING),
                           model_file=None if answer is not None else embedded_model_file(spec))
    counts = expected_statuses(recording)
    print(f"wrote {path.name}: {sum(len(g['calls']) for g in recording['goals'])} calls; assessments that should be "
          + ", ".join(f"{k}: {v}" for k, v in counts.items()))
    if not counts["continue or replan"]:
        print("no assessment whose right answer is continue or replan: a judge that rewards 'done' alone would pass; "
              "record other goals", flush=True)
        return 1
    return 0


def replay_command(args: Any, model: Any, threads: Sequence[int], *, make_server: ServerFactory,
                   counter: Counter, measured_here: bool) -> int:
    """``--replay``: the cold phase, then the warm one, at each thread count; the report and the results file."""
    from bench.local_record import DEFAULT_RECORDING, load_recording
    from bench.provenance import embedded_model_file

    path = Path(args.recording or DEFAULT_RECORDING)
    recording = load_recording(path)
    kinds = tuple(k.strip() for k in args.kinds.split(",") if k.strip()) if args.kinds else None
    spec = args.model or recording["model"]
    print(f"replaying {path.name}: {sum(len(g['calls']) for g in recording['goals'])} calls of "
          f"{len(recording['goals'])} goal(s) on {spec}; threads {list(threads)}", flush=True)
    results = []
    for config in phases(recording.get("planner") or {}):
        for n in threads:
            res = replay(config, n, recording, make_server=make_server, counter=counter, lock=args.lock, kinds=kinds)
            results.append(res)
            print(render([res]) + f"\n({res['seconds']:.0f} s)\n", flush=True)
    print(render(results))
    for line in verdict(results):
        print(line)
    recorded = {k: recording.get(k) for k in ("model", "scripted", "planner")}
    with contextlib.suppress(KeyError, TypeError):
        recorded["commit"] = recording["provenance"]["commit"]
    payload = {"model": spec, "model_alias": model.alias, "recording": path.name, "recorded": recorded,
               "threads": list(threads), "expected_statuses": expected_statuses(recording), "results": _in_order(results)}
    out = write_results("local_replay", payload, directory=Path(args.results_dir),
                        settings={k: v for k, v in payload.items() if k != "results"},
                        model_file=embedded_model_file(spec) if measured_here else None)
    print(f"\nwrote {out}")
    return 0
