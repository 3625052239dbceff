"""Kill and resume: 20 runs SIGKILLed at seeded random points all finish, each step's effect exactly once.

Each of 20 goals (five steps: two parallel, then a join, then a chain of two) runs in a child
process on SQLite (checkpointer plus step journal). The parent kills the child with SIGKILL at a
point drawn from a seeded RNG — after 0–9 side-effect lines plus 0–25 ms, so some kills land in a
model call, some mid-step, some between a step's end and the next checkpoint — then starts a new
child on the same thread, which resumes from the last checkpoint, until the goal ends.

Children are forked from the test process (every module already imported), so a restart costs
milliseconds instead of a fresh interpreter's import time. The tool sleeps a few milliseconds
while it "works", and writes ``start`` and ``done`` lines around that: a ``done`` line is the
effect. A kill that falls between a tool's effect and the recording of its result makes that step
run again on resume — the window no scheduler can close alone — so the tool is idempotent by the
per-attempt key the executor passes every runner call (``metadata["soothe_step_key"]``); the test
prints how often that absorbed a re-run. Checked at the end: every goal is ``done``; no step was
even started again once its result had been recorded (the step journal, read after each kill);
every step's effect happened exactly once; the final state holds a successful result for every
step (no result lost).
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import random
import signal
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool

from soothe_planner.dag import PlanManager
from soothe_planner.execution import StepExecutor
from soothe_planner.execution.scheduler import JOURNAL_NAMESPACE
from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config
from soothe_planner.graph.persistence import open_persistence
from soothe_planner.models import PlannerSettings
from soothe_planner.planner import LLMPlanner
from soothe_planner.testing import FunctionChatModel, ScriptedCall

RUNS = 20
MAX_KILLS_PER_RUN = 3
STEPS = {"s1": [], "s2": [], "s3": ["s1", "s2"], "s4": ["s3"], "s5": ["s4"]}
DEADLINE_S = 60.0  # a hang guard per child only; nothing asserts on time

pytestmark = [
    pytest.mark.subprocess,
    pytest.mark.skipif(
        sys.platform == "win32" or "fork" not in multiprocessing.get_all_start_methods(), reason="needs fork"
    ),
]


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def _effects(side: Path, thread: str, kind: str = "done") -> Counter[str]:
    return Counter(line.split()[2] for line in _lines(side) if line.startswith(f"{kind} {thread} "))


def _reply(side: Path, thread: str) -> Any:
    def reply(call: ScriptedCall) -> Any:
        if call.schema_name == "AssessStatus":
            done = set(_effects(side, thread)) == set(STEPS)
            return {
                "status": "done" if done else "continue",
                "goal_progress": 1.0 if done else 0.3,
                "confidence": 0.9,
                "summary": "checked the effects",
            }
        if call.schema_name == "GeneratePlan":
            todo = [s for s in STEPS if s not in _effects(side, thread)]
            return {
                "plan_action": "new",
                "next_action": "run what is left",
                "steps": [
                    {
                        "id": s,
                        "description": f"{s}\nwork on {s}",
                        "tools": ["act"],
                        "depends_on": [d for d in STEPS[s] if d in todo],
                    }
                    for s in todo
                ],
            }
        raise AssertionError(f"unexpected call {call.schema_name!r}")

    return reply


def _tool(side: Path, thread: str) -> StructuredTool:
    def act(text: str, config: RunnableConfig) -> str:
        name = text.splitlines()[0].strip()
        key = (config.get("metadata") or {}).get("soothe_step_key", "")
        with side.open("a", encoding="utf-8") as fh:
            fh.write(f"start {thread} {name}\n")
        # Idempotent by the step key the executor hands every runner call: an effect already made
        # by this attempt of this step (killed before its result was recorded) is not made again.
        if key and any(ln.endswith(f" key={key}") for ln in _lines(side)):
            with side.open("a", encoding="utf-8") as fh:
                fh.write(f"dedup {thread} {name}\n")
            return f"act ok: {name}"
        time.sleep(0.005)
        with side.open("a", encoding="utf-8") as fh:
            fh.write(f"done {thread} {name} key={key}\n")
        return f"act ok: {name}"

    return StructuredTool.from_function(
        act, name="act", description="acts once per call", metadata={"read_only": True}
    )


async def _drive(db: Path, side: Path, thread: str) -> dict[str, Any]:
    """Start or resume ``thread`` and run it to its end; returns the final state values."""
    planner = LLMPlanner(
        FunctionChatModel(_reply(side, thread)), settings=PlannerSettings(transport_backoff_s=0.0)
    )
    executor = StepExecutor(tools=[_tool(side, thread)])
    config: Any = run_config(thread, 8)
    async with open_persistence("sqlite", path=db) as p:
        graph = build_strange_loop(planner, executor, checkpointer=p.checkpointer, store=p.store)
        snapshot = await graph.aget_state(config)
        # Finished is what the state says, not an empty ``next``: a run killed after a node's writes
        # were saved but before the next checkpoint shows no next task, yet has work left to do.
        if snapshot.values.get("status") in {"done", "failed"} and not snapshot.next:
            return dict(snapshot.values)
        inp = (
            None
            if snapshot.values
            else {**goal_input("act five times", thread_id=thread, max_iterations=8), "intake": "complex"}
        )
        out: Any = await graph.ainvoke(inp, config, durability="sync")
        return dict(out)


async def _recorded(db: Path, thread: str) -> set[str]:
    """Steps whose successful result the run had durably recorded (the step journal)."""
    async with open_persistence("sqlite", path=db) as p:
        items = await p.store.asearch((JOURNAL_NAMESPACE,), limit=100_000)
    return {
        str(it.value["step_id"]).split(".")[0]
        for it in items
        if it.value.get("success") and it.value.get("thread_id") == thread
    }


def _child(db: str, side: str, thread: str) -> None:
    try:
        asyncio.run(_drive(Path(db), Path(side), thread))
        code = 0
    except BaseException:
        import traceback

        traceback.print_exc()
        code = 1
    os._exit(code)  # never return into the forked copy of the test runner


def _run_child(ctx: Any, db: Path, side: Path, thread: str, kill_after: tuple[int, float] | None) -> bool:
    """Run one child; kill it at ``kill_after`` = (more side-effect lines, extra seconds). True if killed."""
    start_lines = len(_lines(side))
    proc = ctx.Process(target=_child, args=(str(db), str(side), thread))
    proc.start()
    deadline = time.monotonic() + DEADLINE_S
    killed = False
    try:
        if kill_after is not None:
            more, extra = kill_after
            while len(_lines(side)) < start_lines + more and proc.is_alive():
                assert time.monotonic() < deadline, f"{thread}: child hung"
                time.sleep(0.001)
            time.sleep(extra)
            if proc.is_alive():
                os.kill(proc.pid, signal.SIGKILL)
                killed = True
        proc.join(DEADLINE_S)
        assert not proc.is_alive(), f"{thread}: child hung"
    finally:
        if proc.is_alive():
            proc.kill()
            proc.join()
    if not killed:
        assert proc.exitcode == 0, f"{thread}: child failed with exit code {proc.exitcode}"
    return killed


def test_twenty_runs_killed_at_random_points_resume_and_finish_exactly_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    db, side = tmp_path / "loop.sqlite", tmp_path / "effects.txt"
    rng = random.Random(20261130)
    kills = 0
    # (thread, number of side-effect lines at the kill, steps recorded at the kill)
    checkpoints: list[tuple[str, int, set[str]]] = []
    for i in range(RUNS):
        thread = f"run-{i}"
        # First attempts are killed at a random point; a resumed run may be killed again.
        for attempt in range(MAX_KILLS_PER_RUN + 1):
            plan = (
                (rng.randint(0, 9), rng.uniform(0.0, 0.025)) if attempt == 0 or rng.random() < 0.3 else None
            )
            if attempt == MAX_KILLS_PER_RUN:
                plan = None
            killed = _run_child(ctx, db, side, thread, plan)
            if not killed:
                break
            kills += 1
            checkpoints.append((thread, len(_lines(side)), asyncio.run(_recorded(db, thread))))

    async def finals() -> dict[str, dict[str, Any]]:
        out = {}
        for i in range(RUNS):
            out[f"run-{i}"] = await _drive(db, side, f"run-{i}")
        return out

    states = asyncio.run(finals())
    assert kills >= RUNS * 3 // 4, f"only {kills} kills landed: the suite did not test resuming"
    lines = _lines(side)
    rerun_after_record = []
    for thread, at, recorded in checkpoints:
        later = [ln.split()[2] for ln in lines[at:] if ln.startswith(f"start {thread} ")]
        rerun_after_record += [f"{thread}:{s}" for s in later if s in recorded]
    # The window no scheduler can close alone: killed after the tool's effect and before its result
    # was recorded, the step runs again on resume; the tool's key check turns that into a no-op.
    window = {thread: dict(_effects(side, thread, "dedup")) for thread in states}
    print(
        f"{kills} kills; re-runs absorbed by the idempotency key: { {t: w for t, w in window.items() if w} }"
    )
    assert not rerun_after_record, (
        f"steps started again after their result was recorded: {rerun_after_record}"
    )
    assert sum(bool(rec) for _, _, rec in checkpoints) >= kills // 2, "the journal held nothing at most kills"
    for thread, state in states.items():
        assert state.get("status") == "done", f"{thread}: {state.get('status')} {state.get('error')}"
        effects = _effects(side, thread)
        assert effects == dict.fromkeys(STEPS, 1), f"{thread}: step effects {dict(effects)}"
        results = PlanManager.from_dict(state["plan_manager"]).step_results()
        ok = {r.step_id.split(".")[0] for r in results if r.success}
        assert set(STEPS) <= ok, f"{thread}: results recorded for {sorted(ok)}"
