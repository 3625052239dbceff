"""Which ready step starts first: longest remaining path (in steps), ties in plan order."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.tools import StructuredTool

from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.execution import StepExecutor
from soothe_planner.execution.ordering import StepOrder, remaining_path_lengths
from soothe_planner.models import AgentDecision, PlanStep, StepAction, StepResult

HANG_GUARD_S = 10.0  # only guards against a hang; no assertion depends on time


def _manager(steps: list[tuple[str, list[str]]], *, tool: str = "work") -> PlanManager:
    pm = PlanManager("g", max_plan_steps=len(steps) + 5)
    pm.ingest(
        AgentDecision(
            steps=[StepAction(id=sid, description=f"do {sid}", tools=[tool], depends_on=deps) for sid, deps in steps]
        )
    )
    return pm


def _executor(slots: int, started: list[str], *, peak: list[int] | None = None) -> StepExecutor:
    in_flight = [0]

    async def work(text: str) -> str:
        in_flight[0] += 1
        if peak is not None:
            peak[0] = max(peak[0], in_flight[0])
        started.append(text.split()[1])
        await asyncio.sleep(0)
        in_flight[0] -= 1
        return "ok"

    tool = StructuredTool.from_function(coroutine=work, name="work", description="work")
    return StepExecutor(
        tools=[tool], controller=ConcurrencyController(ConcurrencyPolicy(max_parallel_steps=slots))
    )


async def _run(ex: StepExecutor, pm: PlanManager, **kw: Any) -> list[StepResult]:
    return await asyncio.wait_for(ex.run(pm, **kw), HANG_GUARD_S)


def test_remaining_path_length_counts_steps_to_the_farthest_leaf() -> None:
    steps = [
        PlanStep(id="a", description="a"),
        PlanStep(id="b", description="b", depends_on=["a"]),
        PlanStep(id="c", description="c", depends_on=["b"]),
        PlanStep(id="d", description="d", depends_on=["a"]),
        PlanStep(id="x", description="x"),
        PlanStep(id="y", description="y", depends_on=["outside"]),  # unknown ids are ignored
    ]
    assert remaining_path_lengths(steps) == {"a": 3, "b": 2, "c": 1, "d": 1, "x": 1, "y": 1}


async def test_with_one_slot_a_long_chain_head_starts_before_independent_leaves() -> None:
    # Plan order lists the leaves first; first-ready-first-served would start l1, l2, then the chain.
    pm = _manager([("l1", []), ("l2", []), ("h", []), ("m", ["h"]), ("t", ["m"])])
    started: list[str] = []
    results = await _run(_executor(1, started), pm)
    assert started == ["h", "m", "l1", "l2", "t"]  # after m, l1 / l2 / t tie at 1: plan order
    assert all(r.success for r in results) and len(results) == 5


async def test_ties_keep_plan_order() -> None:
    pm = _manager([("c", []), ("a", []), ("b", []), ("z", [])])
    started: list[str] = []
    await _run(_executor(1, started), pm)
    assert started == ["c", "a", "b", "z"]


async def test_with_two_slots_the_first_pair_are_the_two_longest_chains() -> None:
    pm = _manager(
        [("leaf1", []), ("leaf2", []), ("p", []), ("p2", ["p"]), ("q", []), ("q2", ["q"]), ("q3", ["q2"])]
    )
    started: list[str] = []
    peak = [0]
    await _run(_executor(2, started, peak=peak), pm)
    assert set(started[:2]) == {"q", "p"}
    assert peak[0] <= 2
    assert sorted(started) == sorted(["leaf1", "leaf2", "p", "p2", "q", "q2", "q3"])


async def test_sequential_mode_still_runs_dependencies_first_and_one_at_a_time() -> None:
    pm = _manager([("l1", []), ("h", []), ("t", ["h"])])
    started: list[str] = []
    peak = [0]
    await _run(_executor(4, started, peak=peak), pm, execution_mode="sequential")
    assert started == ["h", "l1", "t"]
    assert peak[0] == 1


def test_pick_takes_the_room_it_is_given_and_recomputes_for_steps_added_later() -> None:
    pm = _manager([("a", []), ("b", []), ("c", ["b"])])
    order = StepOrder(pm)
    assert [s.id for s in order.pick(pm.ready_steps(), 1)] == ["b"]
    assert [s.id for s in order.pick(pm.ready_steps(), None)] == ["b", "a"]
    pm.ingest(AgentDecision(steps=[StepAction(id="n1", description="n1"), StepAction(id="n2", description="n2", depends_on=["n1"]), StepAction(id="n3", description="n3", depends_on=["n2"])]))
    assert [s.id for s in order.pick(pm.ready_steps(), 1)] == ["n1"]
    assert order.priority("n1") == 3


@pytest.mark.parametrize("slots", [1, 3])
async def test_a_reference_to_a_completed_step_that_is_not_a_dependency_still_resolves(slots: int) -> None:
    seen: list[str] = []

    async def work(text: str) -> str:
        seen.append(text)
        return text.split()[1].upper()

    tool = StructuredTool.from_function(coroutine=work, name="work", description="work")
    ex = StepExecutor(tools=[tool], controller=ConcurrencyController(ConcurrencyPolicy(max_parallel_steps=slots)))
    pm = PlanManager("g")
    pm.ingest(
        AgentDecision(
            steps=[
                StepAction(id="a", description="do a", tools=["work"]),
                StepAction(id="b", description="do b", tools=["work"], depends_on=["a"]),
                StepAction(id="c", description="do c with {{a}}", tools=["work"], depends_on=["b"]),
            ]
        )
    )
    results = await _run(ex, pm)
    assert all(r.success for r in results)
    assert any(t.startswith("do c with A") for t in seen)
