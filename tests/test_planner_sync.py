"""Every public async method of ``LLMPlanner`` has a ``_sync`` twin that takes the same arguments and works
from a plain script, from a thread whose event loop runs (a notebook), and from worker threads."""

from __future__ import annotations

import asyncio
import inspect
from concurrent.futures import ThreadPoolExecutor

import pytest

from soothe_planner import LLMPlanner, LoopState, PlanContext, PlanManager
from soothe_planner.concurrency import run_sync
from soothe_planner.testing import ScriptedChatModel

PLAN = {"plan_action": "new", "execution_mode": "dependency", "next_action": "go",
        "steps": [{"id": "s1", "description": "do the thing", "tools": []}]}  # fmt: skip


def test_every_public_async_method_has_a_sync_twin_with_the_same_parameters() -> None:
    asyncs = {n for n, f in inspect.getmembers(LLMPlanner, inspect.iscoroutinefunction) if not n.startswith("_")}
    assert {"plan", "create_plan", "assess_status", "reflect"} <= asyncs
    for name in asyncs:
        twin = getattr(LLMPlanner, f"{name}_sync", None)
        assert twin is not None and not inspect.iscoroutinefunction(twin), name
        assert list(inspect.signature(twin).parameters) == list(inspect.signature(getattr(LLMPlanner, name)).parameters), name


def test_plan_sync_in_a_script() -> None:
    planner = LLMPlanner(ScriptedChatModel([PLAN]))
    pm = PlanManager("g")
    result = planner.plan_sync("g", LoopState(goal="g", iteration=0), PlanContext(), pm)
    assert result.plan_action == "new" and [s.id for s in result.decision.steps] == ["s1"]  # type: ignore[union-attr]


async def test_sync_twins_work_where_an_event_loop_already_runs_and_from_threads() -> None:
    planner = LLMPlanner(ScriptedChatModel(["hello", "one", "two"]))
    assert planner.answer_sync("say hello", PlanContext()) == "hello"  # this thread's loop is running
    with ThreadPoolExecutor(2) as pool:
        answers = list(pool.map(lambda q: planner.answer_sync(q, PlanContext()), ["a", "b"]))
    assert sorted(answers) == ["one", "two"]


async def test_the_bridge_refuses_a_sync_call_from_its_own_loop_instead_of_waiting_forever() -> None:
    async def inner() -> str:
        return "x"

    async def calls_sync_from_the_bridge() -> str:
        return run_sync(inner())

    with pytest.raises(RuntimeError, match="await the async form instead"):
        await asyncio.to_thread(run_sync, calls_sync_from_the_bridge())
