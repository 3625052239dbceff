"""Tracing of the StrangeLoop itself: one readable trace a run, a generation per model call, steps as spans."""

from __future__ import annotations

import json
from typing import Any

import pytest
from tracing_support import SECRET, Capture, Settings, attr, capture, no_langfuse_env, tree

from soothe_planner.tracing import trace_id_for, trace_run

pytestmark = pytest.mark.usefixtures("no_langfuse_env")
__all__ = ["capture", "no_langfuse_env"]  # fixtures, used by name


# --------------------------------------------------------------------------- the real loop


def _loop_script() -> list[Any]:
    """Intake, a generation (iteration 0 has nothing to assess), assess + generate, then an assessment
    that says done."""
    return [
        {"route": "complex"},
        {
            "plan_action": "new",
            "steps": [
                {"id": "s1", "description": "fetch alpha", "tools": ["fetch"]},
                {"id": "s2", "description": "fetch beta", "tools": ["fetch"]},
            ],
        },
        {"status": "continue", "goal_progress": 0.5, "summary": "half way"},
        {
            "plan_action": "new",
            "steps": [
                {"id": "s3", "description": "fetch gamma", "tools": ["fetch"], "depends_on": ["s1", "s2"]}
            ],
        },
        {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "all fetched"},
    ]


def _loop(script: list[Any], **kwargs: Any) -> tuple[Any, Any]:
    from langchain_core.tools import tool

    from soothe_planner.execution import StepExecutor
    from soothe_planner.graph.loop import build_strange_loop
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import ScriptedChatModel

    @tool
    def fetch(topic: str) -> str:
        """Fetch notes on a topic."""
        return f"notes on {topic}"

    model = ScriptedChatModel(script)
    planner = LLMPlanner(model)
    executor = StepExecutor(tools=[fetch], controller=planner.controller)
    return build_strange_loop(planner, executor, **kwargs), model


ITERATION = [
    (1, "plan_assess"),
    (2, "plan-assess"),
    (3, "plan-assess"),
    (2, "after_assess"),
    (1, "plan_generate"),
    (2, "plan-generate"),
    (3, "plan-generate"),
    (2, "after_generate"),
    (1, "validate"),
    (2, "after_validate"),
    (1, "execute"),
]

# Iteration 0 has no evidence and no plan: its assessment is known, so the node makes no call.
FIRST_ITERATION = [(1, "plan_assess"), (2, "after_assess"), *ITERATION[4:]]

TWO_ITERATION_TREE = [
    (0, "soothe-run: Fetch three topics"),
    (1, "intake"),
    (2, "intake"),
    (3, "intake"),
    (2, "after_intake"),
    *FIRST_ITERATION,
    (2, "step:s1"),
    (3, "fetch"),
    (2, "step:s2"),
    (3, "fetch"),
    (2, "after_execute"),
    (1, "record_iteration"),
    *ITERATION,
    (2, "step:s3"),
    (3, "fetch"),
    (2, "after_execute"),
    (1, "record_iteration"),
    (1, "plan_assess"),
    (2, "plan-assess"),
    (3, "plan-assess"),
    (2, "after_assess"),
    (1, "goal_completion"),
    (1, "finish"),
]


async def test_two_iteration_loop_is_one_readable_trace_with_a_generation_per_call(capture: Capture) -> None:
    from soothe_planner.graph.loop import goal_input, run_config

    graph, model = _loop(_loop_script())
    goal = "Fetch three topics"
    with trace_run(Settings(tags=["loop"]), goal=goal, thread_id="t-loop", client=capture.client) as handle:
        final = await graph.ainvoke(
            goal_input(goal, thread_id="t-loop"), handle.config_for(run_config("t-loop"))
        )
    assert final["status"] == "done" and model.remaining == 0
    spans = capture.spans()

    assert tree(spans) == TWO_ITERATION_TREE
    generations = [s for s in spans if attr(s, "langfuse.observation.type") == "generation"]
    # intake, generate, assess + generate, then the assessment that ends the loop
    assert [g.name for g in generations] == [
        "intake", "plan-generate", "plan-assess", "plan-generate", "plan-assess",
    ]  # fmt: skip
    assert len(generations) == len(model.calls) == 5
    for g in generations:
        usage = json.loads(attr(g, "langfuse.observation.usage_details"))
        assert usage["input"] > 0 and usage["output"] > 0
    assert [s.name for s in spans if attr(s, "langfuse.observation.type") == "tool"] == ["fetch"] * 3
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id_for("t-loop")}
    assert attr(spans[0], "session.id") == "t-loop"
    for span in spans:
        for value in (span.attributes or {}).values():
            assert SECRET not in str(value)


async def test_a_run_resumed_after_approval_continues_the_same_trace(capture: Capture) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from soothe_planner.graph.loop import goal_input, run_config

    graph, _ = _loop(_loop_script(), checkpointer=InMemorySaver(), approval=True)
    goal = "Fetch three topics"
    config = run_config("t-approve")
    with trace_run(None, goal=goal, thread_id="t-approve", client=capture.client) as first:
        paused = await graph.ainvoke(goal_input(goal, thread_id="t-approve"), first.config_for(config))
    assert "__interrupt__" in paused
    with trace_run(None, goal=goal, thread_id="t-approve", resumed=True, client=capture.client) as second:
        digest = (await graph.aget_state(config)).interrupts[0].value["sha256"]
        await graph.ainvoke(Command(resume={"approved": True, "sha256": digest}), second.config_for(config))
    spans = capture.spans()
    roots = [name for depth, name in tree(spans) if depth == 0]
    assert roots == ["soothe-run: Fetch three topics", "soothe-run (resumed): Fetch three topics"]
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id_for("t-approve")}
    assert first.trace_id == second.trace_id


async def test_the_executor_puts_each_tool_call_under_its_step_span(capture: Capture) -> None:
    from langchain_core.tools import tool

    from soothe_planner.execution import StepExecutor
    from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import ScriptedChatModel

    @tool
    def fetch(topic: str) -> str:
        """Fetch notes on a topic."""
        if "beta" in topic:
            raise ValueError("beta is unavailable")
        return f"notes on {topic}"

    # s2 fails for good, so the next round is a replan known without an assessment call
    replan = {"plan_action": "new", "steps": [{"id": "s3", "description": "fetch gamma", "tools": ["fetch"]}]}
    script = [*_loop_script()[:2], replan, {"status": "done", "goal_progress": 1.0, "summary": "enough"}]
    planner = LLMPlanner(ScriptedChatModel(script))
    graph = build_strange_loop(
        planner, StepExecutor(tools=[fetch], controller=planner.controller, step_timeout_s=5)
    )
    with trace_run(None, goal="g", thread_id="t-steps", client=capture.client) as handle:
        await graph.ainvoke(goal_input("g", thread_id="t-steps"), handle.config_for(run_config("t-steps")))
    spans = capture.spans()
    shape = tree(spans)
    execute = shape.index((1, "execute"))
    assert shape[execute + 1 : execute + 5] == [(2, "step:s1"), (3, "fetch"), (2, "step:s2"), (3, "fetch")]
    steps = {s.name: s for s in spans if s.name.startswith("step:")}
    assert attr(steps["step:s1"], "langfuse.observation.level") in (None, "DEFAULT")
    assert attr(steps["step:s2"], "langfuse.observation.level") == "ERROR"
    assert "beta is unavailable" in attr(steps["step:s2"], "langfuse.observation.status_message")
