"""Are real goals really done? Run goal suites through one strategy, score every goal by its checks.

``python -m bench goals --config PATH [--suite DIR ...] [--strategy NAME] [--goals id,...]
[--repeats N] [--tag NAME] [--max-seconds N] [--scripted]``, the strategies being ``ours``,
``react``, ``react-scaffold``, ``plan-execute``, ``plan-execute-scaffold`` and ``deep-agents`` (the
last needs the ``bench-peers`` extra; without it the command stops with exit 2, naming it).

Per goal: the suite's workspace is copied fresh into a temporary folder and the config's
``execution.workspace`` pointed at the copy; the strategy runs the goal (``bench/goals_strategies.py``:
same model instance, same tools, same limiter, same time bound for all); then the goal's checks and the
implicit workspace rule are applied (``bench/goals_suite.py``, which also defines the outcomes:
*success*, *failure* — a run past ``--max-seconds`` is one, reason ``timeout`` — and *false
success*). Reported per goal with its workspace violations, LLM calls, prompt and completion
tokens (from the replies' ``usage_metadata``, counted by a callback at the run's root) and wall
time; then totals and medians.

``--suite`` may be given more than once (each suite is reported, then the total; ``--goals``
selects within a single suite). ``--repeats N`` runs the whole selection N times, a fresh
workspace copy per goal per run: greedy decoding on a small model flips near-ties from run to
run, so one run's count says little. The summary gives, per suite and in total, the median,
minimum and maximum over the runs of successes, false successes and failures, and per goal how
many runs it succeeded in (k of N) and how many were false successes; stdout shows that summary
(``9 (8–10)``: median and range), never one chosen run.

Results go to ``bench/results/goals-<strategy>-<suites>[-<tag>][.scripted].json`` (suites joined
by ``+``; ``--tag`` keeps runs of different code apart): the meta data, ``runs`` — per run
``{"run", "complete", "suites": {name: {"goals": [records], "totals"}}}``, each record with the
raw final answer, the checks and the reason, so a reader can audit every verdict — and
``summary`` (``summarise``). A single run of a single suite also keeps the earlier layout's
top-level ``goals`` and ``totals``. A Markdown report goes to stdout.

``--keep-state DIR`` also writes, per goal per run, what the checks before ``done`` read at the run's
end (ours' plan manager and decision, the files its deliverable names as left in the copy) to
``DIR/r<run>-<suite>-<goal>.json``: ``python -m bench.guard_replay DIR`` replays today's checks over
them, so a new check is weighed on recorded runs before a model run. These files stay out of the
results: they are large, and they are inputs, not figures.

``--scripted`` runs no model at all: scripted actors (``bench/goals_scripted.py``) whose outcome is
known go through the real strategy and the real scoring, and the run checks that the harness
scored each as it must (exit 1 if not); each actor's section has the layout above. It is what CI
runs; the model run is for a person.

What was weighed:

- Goals run one after another in one event loop: the model server serves one request at a time,
  and wall time per goal is a measured figure. The shared model is built once and reused.
- A timeout cancels the run. A tool already running in a worker thread may finish after the
  cancellation; the workspace is snapshotted only after the run's task has ended, and a run that
  overran its bound is a ``timeout`` even if its task swallowed the cancellation.
- The runner closes what it starts: temporary folders are context-managed, and the embedded model
  server is stopped on every exit — normal, error, Ctrl-C or SIGTERM (turned into Ctrl-C, as the
  CLI does). An interrupted run still writes the goals it finished, marked ``interrupted``; the
  summary counts only the runs that finished every suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench._common import REPO_ROOT, RESULTS_DIR, write_results
from bench.goals_report import (
    close_section,
    goals_markdown,
    markdown,
    report,
    summarise,
    summary_markdown,
    totals,
)
from bench.goals_strategies import STRATEGIES, RunOutcome, goal_env, unavailable
from bench.goals_suite import (
    SUITE_FILE,
    Goal,
    Suite,
    SuiteError,
    evaluate,
    judge,
    load_suite,
    snapshot,
    violations,
)
from bench.provenance import embedded_model_file

__all__ = ["DEFAULT_SUITE", "goals_markdown", "main", "markdown", "run_goal", "run_goals", "run_repeats", "summarise",
           "summary_markdown", "totals"]  # the report's functions too, read here by callers of the command

DEFAULT_SUITE = REPO_ROOT.parent / "shared" / "data" / "goals"


def config_for(config: Any, workspace: Path) -> Any:
    """``config`` with ``execution.workspace`` pointing at one goal's copy."""
    return config.model_copy(update={"execution": config.execution.model_copy(update={"workspace": workspace})})


async def run_goal(goal: Goal, suite: Suite, strategy: str, config: Any, model: Any,
                   max_seconds: float | None = None, keep_state: Path | None = None) -> dict[str, Any]:
    """Run one goal on a fresh copy of the workspace and score it; the record is plain data.

    With ``keep_state`` (a file path), what the checks before ``done`` read at the end of the run
    goes there too (``kept_state``), for ``bench/guard_replay.py``."""
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
        if keep_state is not None and outcome.state is not None:
            kept = kept_state(goal, suite, outcome, verdict.outcome, copy)
            keep_state.parent.mkdir(parents=True, exist_ok=True)
            keep_state.write_text(json.dumps(kept, ensure_ascii=False), encoding="utf-8")
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


def kept_state(goal: Goal, suite: Suite, outcome: RunOutcome, verdict: str, copy: Path) -> dict[str, Any]:
    """One run's end as the checks before ``done`` read it: the strategy's ``state``, the goal, the
    verdict, and the text of each file the deliverable or the goal's checks name, as the run left
    it in its copy (``None``: absent; the rest of the workspace is the suite's own, unchanged or a
    violation)."""
    declared = (outcome.state or {}).get("plan_manager") or {}
    files = [*(((declared.get("deliverable") or {}).get("files")) or []),
             *(c.path for c in goal.checks if c.kind == "file")]
    left: dict[str, str | None] = {}
    for name in dict.fromkeys(files):
        path = copy / name
        try:
            left[name] = path.read_text(encoding="utf-8") if path.is_file() else None
        except (OSError, UnicodeDecodeError):
            left[name] = None
    return {"suite": suite.name, "suite_root": str(suite.root), "workspace": str(suite.workspace), "goal_id": goal.id, "goal": goal.text,
            "outcome": verdict, "status": outcome.status, "answer": outcome.answer, "files": left,
            **(outcome.state or {})}


async def run_goals(goals: list[Goal], suite: Suite, strategy: str, config: Any, model: Any,
                    max_seconds: float | None, records: list[dict[str, Any]], *, echo: bool = False,
                    prefix: str = "", keep_state: Path | None = None, run: int = 1) -> None:
    """Run ``goals`` in order, appending each record to ``records`` as it finishes (kept if interrupted).
    With ``keep_state`` (a folder), each run's end goes to ``<folder>/r<run>-<suite>-<goal>.json``."""
    for goal in goals:
        where = keep_state / f"r{run}-{suite.name}-{goal.id}.json" if keep_state is not None else None
        record = await run_goal(goal, suite, strategy, config, model, max_seconds, where)
        records.append(record)
        if echo:
            print(f"· {prefix}{goal.id}: {record['outcome']} in {record['wall_s']:.1f} s, {record['llm_calls']} calls"
                  + (f" ({record['reason'][:100]})" if record["reason"] else ""), file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Selection:
    """One suite of the command and the goals chosen from it."""

    suite: Suite
    goals: list[Goal]


async def run_repeats(selections: list[Selection], strategy: str, config: Any, model_for: Callable[[Selection], Any],
                      max_seconds: float | None, repeats: int, runs: list[dict[str, Any]], *,
                      echo: bool = False, keep_state: Path | None = None) -> None:
    """Run every selection ``repeats`` times, appending each run to ``runs`` as it starts (kept if interrupted).

    A run is ``{"run": i, "complete": bool, "suites": {name: {"goals": [records], "totals": {...}}}}``;
    ``totals`` is set when the suite's goals have all run, ``complete`` when every suite has.
    """
    for i in range(1, repeats + 1):
        run: dict[str, Any] = {"run": i, "complete": False, "suites": {}}
        runs.append(run)
        for sel in selections:
            records: list[dict[str, Any]] = []
            entry = run["suites"][sel.suite.name] = {"goals": records}
            prefix = (f"run {i}/{repeats} " if repeats > 1 else "") + (f"{sel.suite.name}/" if len(selections) > 1 else "")
            await run_goals(sel.goals, sel.suite, strategy, config, model_for(sel), max_seconds, records,
                            echo=echo, prefix=prefix, keep_state=keep_state, run=i)
            entry["totals"] = totals(records)
        run["complete"] = True


# --------------------------------------------------------------------------- the command


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench goals", description=__doc__.splitlines()[0])
    p.add_argument("--suite", action="append", default=None,
                   help="a folder holding suite.yaml; give it more than once for several suites")
    p.add_argument("--config", required=True, help="the YAML config (models, planner, tools, budget)")
    p.add_argument("--strategy", choices=sorted(STRATEGIES), default="ours")
    p.add_argument("--goals", help="comma-separated goal ids of a single suite (default: every goal, in suite order)")
    p.add_argument("--repeats", type=int, default=1, help="run the whole selection N times and report the spread")
    p.add_argument("--tag", help="a name added to the results file's, so runs of different code do not overwrite")
    p.add_argument("--max-seconds", type=float, default=None, help="bound on each goal's wall time")
    p.add_argument("--scripted", action="store_true", help="no model: scripted actors check the harness")
    p.add_argument("--results-dir", default=str(RESULTS_DIR), help="where the results JSON goes")
    p.add_argument("--keep-state", metavar="DIR", default=None,
                   help="also write each run's end (plan manager, decision, delivered files) to DIR, one file per "
                        "goal per run, for `python -m bench.guard_replay DIR` (ours only; never in the results)")
    return p


_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def results_name(strategy: str, suites: list[str], tag: str | None = None, scripted: bool = False) -> str:
    """``goals-<strategy>-<suite>[+<suite>...][-<tag>][.scripted]``: the results file's name, without ``.json``."""
    return f"goals-{strategy}-{'+'.join(suites)}" + (f"-{tag}" if tag else "") + (".scripted" if scripted else "")


def _display_path(value: str) -> str:
    """A path for the results file: as given when relative, else only its last parts (no machine paths)."""
    path = Path(value)
    return value if not path.is_absolute() else "/".join(path.parts[-2:])


def _model_label(spec: str) -> str:
    kind, _, name = spec.partition(":")
    return f"scripted:{Path(name).name}" if kind == "scripted" else spec


def select(folders: list[str], goal_ids: str | None) -> list[Selection]:
    """Each suite with its chosen goals; ``SuiteError`` for a malformed suite, a clash of names or stray ids."""
    suites = [load_suite(f) for f in folders]
    names = [s.name for s in suites]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise SuiteError(f"two --suite folders are named {twice[0]!r}: results are keyed by the folder's name")
    ids = [g.strip() for g in goal_ids.split(",") if g.strip()] if goal_ids else None
    if ids and len(suites) > 1:
        raise SuiteError("--goals selects goals of a single suite; give one --suite with it")
    return [Selection(s, s.select(ids)) for s in suites]


def _meta(args: argparse.Namespace, selections: list[Selection], config: Any) -> dict[str, Any]:
    one = selections[0] if len(selections) == 1 else None
    return {
        "suite": "+".join(s.suite.name for s in selections),
        "suites": {s.suite.name: [g.id for g in s.goals] for s in selections},
        "strategy": args.strategy,
        "config": _display_path(args.config),
        "model": "scripted actors" if args.scripted else _model_label(config.models.default),
        "model_base_url": None if args.scripted else config.models.base_url,
        "max_seconds": args.max_seconds,
        "repeats": args.repeats,
        "tag": args.tag,
        **({"goal_ids": [g.id for g in one.goals]} if one else {}),
        "cpus": os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def _sections(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Where runs are kept: each scripted actor's entry, or the output itself for a model run."""
    return list(out["actors"].values()) if "actors" in out else [out] if "runs" in out else []


async def _scripted(args: argparse.Namespace, selections: list[Selection], config: Any, out: dict[str, Any]) -> int:
    from bench.goals_scripted import ACTORS, actor_model, expectation_problems, scriptable

    problems: list[str] = []
    out["actors"] = {}
    several = len(selections) > 1
    for actor in ACTORS:
        section: dict[str, Any] = {"summary": None, "runs": []}
        out["actors"][actor] = section
        await run_repeats(selections, args.strategy, config, lambda sel, a=actor: actor_model(sel.goals, a),
                          args.max_seconds, args.repeats, section["runs"],
                          keep_state=Path(args.keep_state) / actor if args.keep_state else None)
        close_section(section, single=args.repeats == 1 and not several)
        print(f"\n{report(section, f'scripted {actor} ({args.strategy})')}")
        for run in section["runs"]:
            for sel in selections:
                by_id = {g.id: g for g in sel.goals}
                where = (f"run {run['run']}: " if args.repeats > 1 else "") + (f"{sel.suite.name}: " if several else "")
                for record in run["suites"][sel.suite.name]["goals"]:
                    problems += [where + p for p in expectation_problems(actor, by_id[record["id"]], record)]
    skipped = [(f"{sel.suite.name}/" if several else "") + g.id for sel in selections for g in sel.goals
               if not scriptable(g)]
    out["sanity"] = {"passed": not problems, "problems": problems, "unscriptable": skipped}
    print()
    if skipped:
        print(f"unscriptable (no answer found that passes their answer checks): {', '.join(skipped)}")
    print("harness sanity: " + ("passed" if not problems else "FAILED\n- " + "\n- ".join(problems)))
    return 0 if not problems else 1


async def _measured(args: argparse.Namespace, selections: list[Selection], config: Any, out: dict[str, Any]) -> int:
    from soothe_planner.config import resolve_chat_model

    model = resolve_chat_model(config)
    await run_repeats(selections, args.strategy, config, lambda sel: model, args.max_seconds, args.repeats,
                      out["runs"], echo=True, keep_state=Path(args.keep_state) if args.keep_state else None)
    close_section(out, single=args.repeats == 1 and len(selections) == 1)
    print(report(out, f"{args.strategy} ({out['model']})"))
    return 0


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # unwind like Ctrl-C, so the model server and temporary folders are closed


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.max_seconds is not None and args.max_seconds <= 0:
        parser.error(f"--max-seconds must be > 0, got {args.max_seconds:g} (leave it out for no bound)")
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    if args.tag is not None and not _TAG.fullmatch(args.tag):
        parser.error(f"--tag must be letters, digits, '.', '_' or '-' (up to 64, not starting with a sign), "
                     f"got {args.tag!r}")
    problem = unavailable(args.strategy)
    if problem is not None:
        print(f"bench goals: error: {problem}", file=sys.stderr)
        return 2
    from soothe_planner.config import load_config
    from soothe_planner.errors import PlannerError

    try:
        selections = select(args.suite or [str(DEFAULT_SUITE)], args.goals)
        config = load_config(args.config)
    except (SuiteError, PlannerError) as exc:
        print(f"bench goals: error: {exc}", file=sys.stderr)
        return 2
    out: dict[str, Any] = _meta(args, selections, config)
    if not args.scripted:  # a scripted run keeps them per actor
        out.update(summary=None, runs=[])
    name = results_name(args.strategy, [s.suite.name for s in selections], args.tag, args.scripted)
    single = args.repeats == 1 and len(selections) == 1
    previous = None
    if threading.current_thread() is threading.main_thread():
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
    code = 130
    try:
        runner = _scripted if args.scripted else _measured
        code = asyncio.run(runner(args, selections, config, out))
    except KeyboardInterrupt:
        out["interrupted"] = True
        for section in _sections(out):
            close_section(section, single)
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
    model_file = None if args.scripted else embedded_model_file(config.models.default, config.models.base_url)
    suite_files = [s.suite.root / SUITE_FILE for s in selections]
    path = write_results(name, out, directory=Path(args.results_dir), config_files=[Path(args.config), *suite_files],
                         model_file=model_file)
    print(f"\nresults: {_display_path(str(path))}", file=sys.stderr)
    return code
