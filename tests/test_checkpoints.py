"""A paused StrangeLoop thread survives a round trip through each checkpointer and resumes on a fresh graph."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from loop_support import PhaseScript, approval, assess, collect, plan, read_tool, step

from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.execution import StepExecutor
from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config
from soothe_planner.graph.persistence import Persistence, open_persistence

DSN_ENV = "SOOTHE_TEST_POSTGRES_DSN"


def _script() -> PhaseScript:
    return PhaseScript(
        AssessStatus=[assess("continue", 0.5), assess("done", 1.0)],
        GeneratePlan=[plan(step("s1"), step("s2", "s1")), plan(step("s3", "s2"))],
    )


def _postgres_dsn() -> str:
    dsn = os.environ.get(DSN_ENV)
    if not dsn:
        pytest.skip(f"{DSN_ENV} is not set: start a server with `eval \"$(bash .ci/postgres.sh)\"`")
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=3):
            pass
    except Exception as exc:  # a DSN with no server behind it
        pytest.skip(f"no PostgreSQL server answers at {DSN_ENV} ({type(exc).__name__}: {exc})")
    return dsn


Opener = Callable[[], AbstractAsyncContextManager[Persistence]]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def opener(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Opener]:
    backend = request.param
    if backend == "memory":
        # One in-memory pair for the whole test: "a fresh graph" is all memory can show.
        async with open_persistence("memory") as shared:

            def same() -> AbstractAsyncContextManager[Persistence]:
                return _Fixed(shared)

            yield same
        return
    kw: dict[str, Any] = (
        {"path": tmp_path / "loop.sqlite"} if backend == "sqlite" else {"dsn": _postgres_dsn()}
    )
    yield lambda: open_persistence(backend, **kw)


class _Fixed(AbstractAsyncContextManager[Persistence]):
    def __init__(self, p: Persistence) -> None:
        self.p = p

    async def __aenter__(self) -> Persistence:
        return self.p

    async def __aexit__(self, *exc: object) -> None:
        return None


async def test_paused_thread_round_trips_and_resumes_on_a_fresh_graph(opener: Opener) -> None:
    thread = f"ck-{uuid.uuid4().hex[:8]}"  # a shared PostgreSQL keeps threads of earlier runs
    config = run_config(thread, 5)
    log: list[str] = []
    script = _script()

    async with opener() as p:
        graph = build_strange_loop(script.planner(), StepExecutor(tools=[read_tool(log)]),
                                   checkpointer=p.checkpointer, store=p.store, approval=True)
        await collect(graph, goal_input("grow the plan", thread_id=thread), config)
        await collect(graph, await approval(graph, config), config)
        # paused again: iteration 1's plan awaits approval, iteration 0's results are recorded
        before = (await graph.aget_state(config)).values
    assert before["iteration"] == 1 and len(PlanManager.from_dict(before["plan_manager"]).step_results()) == 2
    assert [line.splitlines()[0] for line in log] == ["do s1", "do s2"]
    assert [s["id"] for s in before["current_decision"]["steps"]] == ["s3"]

    async with opener() as p:
        fresh = build_strange_loop(script.planner(), StepExecutor(tools=[read_tool(log)]),
                                   checkpointer=p.checkpointer, store=p.store, approval=True)
        snap = await fresh.aget_state(config)
        after = snap.values
        assert snap.next == ("approve",)
        for key in ("plan_manager", "current_decision", "sealed_plan", "plan_result", "iteration"):
            assert after[key] == before[key], key
        pm = PlanManager.from_dict(after["plan_manager"])
        assert [(n.id, n.status) for n in pm.nodes] == [("s1", "completed"), ("s2", "completed"), ("s3", "pending")]
        assert pm.node("s1").result is not None and pm.node("s1").result.output == "read(do s1)"

        await collect(fresh, await approval(fresh, config), config)
        final = (await fresh.aget_state(config)).values
    assert final["status"] == "done"
    assert [line.splitlines()[0] for line in log] == ["do s1", "do s2", "do s3"]  # nothing ran twice
