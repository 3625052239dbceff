"""Are real goals really done? Run a goal suite through one strategy and score every goal by its checks.

``python -m bench goals --suite DIR --config PATH [--strategy ours|react|plan-execute]
[--goals id,...] [--max-seconds N] [--scripted]``

Per goal: the suite's workspace is copied fresh into a temporary folder and the config's
``execution.workspace`` pointed at the copy; the strategy runs the goal (``bench/goals_strategies.py``:
same model instance, same tools, same limiter for all three); then the goal's checks and the
implicit workspace rule are applied (``bench/goals_suite.py``, which defines the outcomes: a
*success*, a *failure* — a run past ``--max-seconds`` is one, reason ``timeout`` — or a *false
success*). Reported per goal with its workspace violations, LLM calls,
prompt and completion tokens (from the replies' ``usage_metadata``, counted by a callback at the
run's root) and wall time; then totals and medians. The raw final answers and the reasons go to
``bench/results/goals-<strategy>-<suite>.json`` so a reader can audit every verdict; a Markdown
table goes to stdout.

``--scripted`` runs no model at all: scripted actors (``bench/goals_scripted.py``) whose outcome is
known go through the real strategy and the real scoring, and the run checks that the harness
scored each as it must (exit 1 if not). It is what CI runs; the model run is for a person.

What was weighed:

- Goals run one after another in one event loop: the model server serves one request at a time,
  and wall time per goal is a measured figure. The shared model is built once and reused.
- A timeout cancels the run. A tool already running in a worker thread may finish after the
  cancellation; the workspace is snapshotted only after the run's task has ended, and a run that
  overran its bound is a ``timeout`` even if its task swallowed the cancellation.
- The runner closes what it starts: temporary folders are context-managed, and the embedded model
  server is stopped on every exit — normal, error, Ctrl-C or SIGTERM (turned into Ctrl-C, as the
  CLI does). An interrupted run still writes the goals it finished, marked ``interrupted``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench._common import REPO_ROOT, RESULTS_DIR, table, write_results
from bench.goals_strategies import STRATEGIES, RunOutcome, goal_env
from bench.goals_suite import Goal, Suite, SuiteError, evaluate, judge, load_suite, snapshot, violations

DEFAULT_SUITE = REPO_ROOT.parent / "shared" / "data" / "goals"
OUTCOMES = ("success", "false_success", "failure")


def config_for(config: Any, workspace: Path) -> Any:
    """``config`` with ``execution.workspace`` pointing at one goal's copy."""
    return config.model_copy(update={"execution": config.execution.model_copy(update={"workspace": workspace})})


async def run_goal(goal: Goal, suite: Suite, strategy: str, config: Any, model: Any,
                   max_seconds: float | None = None) -> dict[str, Any]:
    """Run one goal on a fresh copy of the workspace and score it; the record is plain data."""
    run = STRATEGIES[strategy]
    with tempfile.TemporaryDirectory(prefix=f"goal-{goal.id[:40]}-") as tmp:
        copy = Path(tmp) / "workspace"
        shutil.copytree(suite.workspace, copy, symlinks=True)
        before = snapshot(copy)
        env = goal_env(goal.text, config_for(config, copy), model)
        deadline = asyncio.timeout(max_seconds) if max_seconds else None
        started = time.perf_counter()
        raised = False
        try:
            if deadline is None:
                outcome = await run(env)
            else:
                async with deadline:
                    outcome = await run(env)
        except TimeoutError as exc:
            expired = deadline is not None and deadline.expired()
            raised = not expired
            outcome = RunOutcome("timeout", error="timeout") if expired else \
                RunOutcome("failed", error=f"TimeoutError: {exc}")
        except Exception as exc:
            raised = True
            outcome = RunOutcome("failed", error=f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}")
        wall = time.perf_counter() - started
        if max_seconds and wall > max_seconds and outcome.status != "timeout":
            outcome = RunOutcome("timeout", outcome.answer, "timeout", {**outcome.detail, "overran": outcome.status})
        broken = violations(before, snapshot(copy), goal.allowed_paths)
        checks = evaluate(goal, outcome.answer, copy)
    verdict = judge(outcome.status, outcome.error, checks, broken, expect=goal.expect, raised=raised)
    return {
        "id": goal.id,
        "goal": goal.text,
        "outcome": verdict.outcome,
        "reason": verdict.reason,
        "status": outcome.status,
        "raised": raised,
        "answer": outcome.answer,
        "checks": [asdict(c) for c in verdict.checks],
        "violations": [asdict(v) for v in verdict.violations],
        **env.counter.as_dict(),
        "limiter_llm_calls": env.resolved.controller.total_llm_calls,
        "wall_s": round(wall, 3),
        "detail": outcome.detail,
    }


async def run_goals(goals: list[Goal], suite: Suite, strategy: str, config: Any, model: Any,
                    max_seconds: float | None, records: list[dict[str, Any]], *, echo: bool = False) -> None:
    """Run ``goals`` in order, appending each record to ``records`` as it finishes (kept if interrupted)."""
    for goal in goals:
        record = await run_goal(goal, suite, strategy, config, model, max_seconds)
        records.append(record)
        if echo:
            print(f"· {goal.id}: {record['outcome']} in {record['wall_s']:.1f} s, {record['llm_calls']} calls"
                  + (f" ({record['reason'][:100]})" if record["reason"] else ""), file=sys.stderr, flush=True)


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def totals(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts by outcome, workspace violations, sums and medians over the goals run."""
    counts = {k: sum(r["outcome"] == k for r in records) for k in OUTCOMES}
    calls = sum(r["llm_calls"] for r in records)
    return {
        "goals": len(records),
        **counts,
        "timeouts": sum(r["status"] == "timeout" for r in records),
        "goals_with_violations": sum(bool(r["violations"]) for r in records),
        "violations": sum(len(r["violations"]) for r in records),
        "llm_calls": calls,
        "llm_calls_per_success": round(calls / counts["success"], 2) if counts["success"] else None,
        "prompt_tokens": sum(r["prompt_tokens"] for r in records),
        "completion_tokens": sum(r["completion_tokens"] for r in records),
        "calls_without_usage": sum(r["calls_without_usage"] for r in records),
        "wall_s": round(sum(r["wall_s"] for r in records), 3),
        "median_wall_s": _median([r["wall_s"] for r in records]),
        "median_llm_calls": _median([r["llm_calls"] for r in records]),
        "median_prompt_tokens": _median([r["prompt_tokens"] for r in records]),
        "median_completion_tokens": _median([r["completion_tokens"] for r in records]),
    }


def _short(text: str, n: int = 70) -> str:
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= n else text[: n - 1] + "…"


def markdown(records: list[dict[str, Any]], sums: dict[str, Any]) -> str:
    rows = [
        [r["id"], r["outcome"], _short(r["reason"]) or "—",
         ", ".join(f"{v['path']} ({v['change']})" for v in r["violations"]) or "—",
         r["llm_calls"], r["prompt_tokens"], r["completion_tokens"], f"{r['wall_s']:.1f}"]
        for r in records
    ]
    per_goal = table(["goal", "outcome", "reason", "workspace violations", "LLM calls", "prompt tokens",
                      "completion tokens", "wall s"], rows)
    n = sums["goals"]
    summary = table(
        ["successes", "false successes", "failures (timeouts)", "goals with violations", "LLM calls",
         "calls / success", "prompt tokens", "completion tokens", "median wall s", "median LLM calls"],
        [[f"{sums['success']}/{n}", sums["false_success"], f"{sums['failure']} ({sums['timeouts']})",
          sums["goals_with_violations"], sums["llm_calls"],
          "—" if sums["llm_calls_per_success"] is None else sums["llm_calls_per_success"],
          sums["prompt_tokens"], sums["completion_tokens"],
          "—" if sums["median_wall_s"] is None else f"{sums['median_wall_s']:.1f}",
          "—" if sums["median_llm_calls"] is None else sums["median_llm_calls"]]],
    )
    return f"{per_goal}\n\n{summary}"


# --------------------------------------------------------------------------- the command


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench goals", description=__doc__.splitlines()[0])
    p.add_argument("--suite", default=str(DEFAULT_SUITE), help="a folder holding suite.yaml")
    p.add_argument("--config", required=True, help="the YAML config (models, planner, tools, budget)")
    p.add_argument("--strategy", choices=sorted(STRATEGIES), default="ours")
    p.add_argument("--goals", help="comma-separated goal ids (default: every goal, in suite order)")
    p.add_argument("--max-seconds", type=float, default=None, help="bound on each goal's wall time")
    p.add_argument("--scripted", action="store_true", help="no model: scripted actors check the harness")
    p.add_argument("--results-dir", default=str(RESULTS_DIR), help="where the results JSON goes")
    return p


def _display_path(value: str) -> str:
    """A path for the results file: as given when relative, else only its last parts (no machine paths)."""
    path = Path(value)
    return value if not path.is_absolute() else "/".join(path.parts[-2:])


def _model_label(spec: str) -> str:
    kind, _, name = spec.partition(":")
    return f"scripted:{Path(name).name}" if kind == "scripted" else spec


def _meta(args: argparse.Namespace, suite: Suite, config: Any, goals: list[Goal]) -> dict[str, Any]:
    return {
        "suite": suite.name,
        "strategy": args.strategy,
        "config": _display_path(args.config),
        "model": "scripted actors" if args.scripted else _model_label(config.models.default),
        "model_base_url": None if args.scripted else config.models.base_url,
        "max_seconds": args.max_seconds,
        "goal_ids": [g.id for g in goals],
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


async def _scripted(args: argparse.Namespace, suite: Suite, config: Any, goals: list[Goal],
                    out: dict[str, Any]) -> int:
    from bench.goals_scripted import ACTORS, actor_model, expectation_problems, scriptable

    problems: list[str] = []
    out["actors"] = {}
    for actor in ACTORS:
        records: list[dict[str, Any]] = []
        out["actors"][actor] = {"goals": records}
        await run_goals(goals, suite, args.strategy, config, actor_model(goals, actor), args.max_seconds, records)
        out["actors"][actor]["totals"] = sums = totals(records)
        print(f"\n### scripted {actor} ({args.strategy})\n\n{markdown(records, sums)}")
        by_id = {g.id: g for g in goals}
        for record in records:
            problems += expectation_problems(actor, by_id[record["id"]], record)
    skipped = [g.id for g in goals if not scriptable(g)]
    out["sanity"] = {"passed": not problems, "problems": problems, "unscriptable": skipped}
    print()
    if skipped:
        print(f"unscriptable (no string found for their answer_matches): {', '.join(skipped)}")
    print("harness sanity: " + ("passed" if not problems else "FAILED\n- " + "\n- ".join(problems)))
    return 0 if not problems else 1


async def _measured(args: argparse.Namespace, suite: Suite, config: Any, goals: list[Goal],
                    out: dict[str, Any]) -> int:
    from soothe_planner.config import resolve_chat_model

    model = resolve_chat_model(config)
    records: list[dict[str, Any]] = out["goals"]
    await run_goals(goals, suite, args.strategy, config, model, args.max_seconds, records, echo=True)
    out["totals"] = sums = totals(records)
    print(f"### {args.strategy} on suite {suite.name!r} ({out['model']})\n\n{markdown(records, sums)}")
    return 0


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # unwind like Ctrl-C, so the model server and temporary folders are closed


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.max_seconds is not None and args.max_seconds <= 0:
        parser.error(f"--max-seconds must be > 0, got {args.max_seconds:g} (leave it out for no bound)")
    from soothe_planner.config import load_config
    from soothe_planner.errors import PlannerError

    try:
        suite = load_suite(args.suite)
        goals = suite.select([g.strip() for g in args.goals.split(",") if g.strip()] if args.goals else None)
        config = load_config(args.config)
    except (SuiteError, PlannerError) as exc:
        print(f"bench goals: error: {exc}", file=sys.stderr)
        return 2
    out: dict[str, Any] = {**_meta(args, suite, config, goals), "goals": []}
    name = f"goals-{args.strategy}-{suite.name}" + (".scripted" if args.scripted else "")
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    code = 130
    try:
        runner = _scripted if args.scripted else _measured
        code = asyncio.run(runner(args, suite, config, goals, out))
    except KeyboardInterrupt:
        out["interrupted"] = True
        print("bench goals: interrupted; the goals finished so far are written", file=sys.stderr)
    except PlannerError as exc:  # a config that cannot be built (a key, a tool spec): before any goal ran
        print(f"bench goals: error: {exc}", file=sys.stderr)
        return 2
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if "soothe_planner.local.embedded" in sys.modules:
            sys.modules["soothe_planner.local.embedded"].shutdown_shared_server()
        out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]
    path = write_results(name, out, directory=Path(args.results_dir))
    print(f"\nresults: {_display_path(str(path))}", file=sys.stderr)
    return code
