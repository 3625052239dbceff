"""Every progress event a run sends is one of the documented, typed events (``soothe_planner.events``)."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from loop_support import PhaseScript, assess, collect, failing_tool, plan, read_tool, step

from soothe_planner.events import EVENT_KINDS, parse_event
from soothe_planner.execution import StepExecutor
from soothe_planner.graph import build_strange_loop, goal_input, run_config


async def _events_of_every_kind() -> list[dict[str, Any]]:
    script = PhaseScript(
        RouteIntake=[{"route": "complex", "answer": ""}, {"route": "trivial", "answer": "4"},
                     {"route": "complex", "answer": ""}],
        GeneratePlan=[
            plan(step("s1"), step("s2", tools=["boom"])),  # rejected by the human
            plan(step("s1"), step("s2", tools=["boom"])),  # approved; s2 fails
            plan(step("s3")),  # after the failure
            plan(step("s4")),  # the capped run's only iteration
        ],
        AssessStatus=[assess("done", 1.0)],
    )
    executor = StepExecutor(tools=[read_tool(), failing_tool()])
    graph = build_strange_loop(script.planner(), executor, checkpointer=InMemorySaver(), approval=True)
    config = run_config("ev", 6)
    events, _ = await collect(graph, goal_input("collect the facts", thread_id="ev", deliverable="answer"), config)
    for reply in ({"approved": False, "feedback": "fewer steps"}, {"approved": True}, {"approved": True}):
        if reply["approved"]:  # an approval names the plan it approves
            reply = {**reply, "sha256": (await graph.aget_state(config)).interrupts[0].value["sha256"]}
        more, _ = await collect(graph, Command(resume=reply), config)
        events += more
    trivial, _ = await collect(graph, goal_input("2 + 2?", thread_id="ev2"), run_config("ev2", 6))
    capped, _ = await collect(graph, goal_input("anything", thread_id="ev3"), run_config("ev3", 6),
                              context={"max_iterations": 1, "approval": False})  # fmt: skip
    return events + trivial + capped


async def test_a_run_through_every_kind_sends_only_documented_events() -> None:
    events = await _events_of_every_kind()
    parsed = [parse_event(e) for e in events]  # extra keys are refused: the docs cannot drift
    assert {e["event"] for e in parsed} == set(EVENT_KINDS)
    approvals = [e for e in parsed if e["event"] == "approval"]
    assert [a["approved"] for a in approvals] == [False, True, True]
    assert approvals[0].get("feedback") == "fewer steps" and len(approvals[1].get("sha256", "")) == 64
    failed = [e for e in parsed if e["event"] == "step_completed" and not e["success"]]
    assert [f["step_id"] for f in failed] == ["s2"] and failed[0]["error_type"] == "tool_error"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"event": "plan", "iteration": 0, "plan_action": "new", "steps": [], "degraded": False, "x": 1}, "plan.x"),
        ({"event": "completed"}, "completed.final_answer: Field required"),
        ({"event": "progress"}, "event"),
        ("completed", "not a documented progress event"),
    ],
)
def test_anything_else_is_refused_naming_the_key(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match="not a documented progress event") as info:
        parse_event(data)
    assert message in str(info.value)
