"""The StrangeLoop graph end to end: scripted planner, fake tools, events through LangGraph streaming."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from loop_support import (
    KEEP,
    PhaseScript,
    assess,
    collect,
    failing_tool,
    gated_tool,
    kinds,
    plan,
    read_tool,
    step,
)

from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.execution import StepExecutor
from soothe_planner.graph.loop import NODES_PER_ITERATION, build_strange_loop, goal_input, run_config
from soothe_planner.models import PlanResult
from soothe_planner.testing import FunctionChatModel, ScriptedCall

GOAL = "collect the facts"


async def _run(
    script: PhaseScript,
    executor: StepExecutor,
    *,
    thread: str = "t",
    max_iterations: int = 5,
    planner: Any = None,
    **build: Any,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[str]]:
    graph = build_strange_loop(planner or script.planner(), executor, checkpointer=InMemorySaver(), **build)
    config = run_config(thread, max_iterations)
    events, nodes = await asyncio.wait_for(
        collect(graph, goal_input(GOAL, thread_id=thread, max_iterations=max_iterations), config), 30
    )
    state = (await graph.aget_state(config)).values
    return state, events, nodes


async def test_one_iteration_then_done_streams_events_in_order() -> None:
    script = PhaseScript(
        AssessStatus=[assess("done", 1.0, "both read")],
        GeneratePlan=[plan(step("s1"), step("s2", "s1", description="reread {{s1.output}}"))],
    )
    state, events, nodes = await _run(script, StepExecutor(tools=[read_tool()]))
    assert state["status"] == "done" and state["iteration"] == 1
    assert kinds(events) == [
        "intake",
        "assessment",
        "plan",
        "step_started",
        "step_completed",
        "step_started",
        "step_completed",
        "assessment",
        "completed",
    ]
    assert nodes == [
        "intake",
        "plan_assess",
        "plan_generate",
        "validate",
        "execute",
        "record_iteration",
        "plan_assess",
        "goal_completion",
        "finish",
    ]
    results = {r.step_id: r for r in PlanManager.from_dict(state["plan_manager"]).step_results()}
    assert results["s2"].output == "read(reread read(do s1))"
    assert "step_results" not in state  # a result's one home is its DAG node
    assert "s2: read(reread" in state["final_answer"]
    # iteration 0 has no evidence and no plan: its assessment is known without a call
    assert script.schemas() == ["RouteIntake", "GeneratePlan", "AssessStatus"]
    assert state["llm_calls"] == 3


async def test_failed_step_leads_to_a_replan_that_finishes_the_goal() -> None:
    script = PhaseScript(
        AssessStatus=[assess("done", 1.0)],
        GeneratePlan=[plan(step("s1", tools=["boom"]), step("s2", "s1")), plan(step("s3"))],
    )
    state, events, _ = await _run(script, StepExecutor(tools=[read_tool(), failing_tool()]))
    assert state["status"] == "done"
    # s1 failed for good: the replan is known without an assessment call; only the last round is assessed
    assert script.schemas() == ["RouteIntake", "GeneratePlan", "GeneratePlan", "AssessStatus"]
    assessments = [e for e in events if e["event"] == "assessment"]
    assert assessments[1]["status"] == "replan" and "s1 failed" in assessments[1]["summary"]
    pm = PlanManager.from_dict(state["plan_manager"])
    assert [(n.id, n.status) for n in pm.nodes] == [("s1", "failed"), ("s2", "skipped"), ("s3", "completed")]
    failed = [e for e in events if e["event"] == "step_completed" and not e["success"]]
    assert [(e["step_id"], e["error_type"]) for e in failed] == [("s1", "tool_error"), ("s2", "blocked")]
    # the second generation saw the failure as evidence
    generate_prompts = [c.prompt_text for c in script.calls if c.schema_name == "GeneratePlan"]
    assert "disk on fire" in generate_prompts[1]


async def test_progressive_dag_growth_keeps_finished_steps_and_feeds_their_output_forward() -> None:
    script = PhaseScript(
        AssessStatus=[assess("continue", 0.5), assess("done", 1.0)],
        GeneratePlan=[plan(step("s1"), step("s2")), plan(step("s3", "s1"))],
    )
    log: list[str] = []
    state, _, _ = await _run(script, StepExecutor(tools=[read_tool(log)]))
    pm = PlanManager.from_dict(state["plan_manager"])
    assert [(n.id, n.status, n.iteration) for n in pm.nodes] == [
        ("s1", "completed", 0),
        ("s2", "completed", 0),
        ("s3", "completed", 1),
    ]
    assert len(log) == 3  # nothing re-ran
    assert "read(do s1)" in log[2]  # s3's dependency output, fenced as data
    assert len(pm.history) == 2


async def test_keep_with_nothing_in_flight_asks_for_steps_and_finished_work_stays() -> None:
    script = PhaseScript(
        AssessStatus=[assess("continue", 0.5), assess("done", 1.0)],
        GeneratePlan=[plan(step("s1")), KEEP, plan(step("s2", "s1"))],
    )
    log: list[str] = []
    state, _, _ = await _run(script, StepExecutor(tools=[read_tool(log)]))
    assert state["status"] == "done"
    pm = PlanManager.from_dict(state["plan_manager"])
    assert [(n.id, n.status) for n in pm.nodes] == [("s1", "completed"), ("s2", "completed")]
    assert len(log) == 2


async def test_trivial_intake_is_answered_without_planning_or_execution() -> None:
    script = PhaseScript(intake="trivial", answer="4")
    ran: list[str] = []
    state, events, nodes = await _run(script, StepExecutor(tools=[read_tool(ran)]))
    assert (state["status"], state["final_answer"]) == ("done", "4")
    assert nodes == ["intake", "answer", "finish"] and ran == []
    assert script.schemas() == ["RouteIntake"]
    assert kinds(events)[-1] == "completed"


class _BootstrapPlanner:
    """An LLMPlanner whose phase 2 marks its decision as a one-step continuation bootstrap."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def generate_from_assessment(self, *args: Any, **kw: Any) -> PlanResult:
        result = await self._inner.generate_from_assessment(*args, **kw)
        return result.model_copy(update={"terminal_after_execute": True})


async def test_terminal_after_execute_ends_the_goal_after_its_one_execution() -> None:
    script = PhaseScript(AssessStatus=[], GeneratePlan=[plan(step("s1"))])
    state, _, nodes = await _run(
        script, StepExecutor(tools=[read_tool()]), planner=_BootstrapPlanner(script.planner())
    )
    assert state["status"] == "done"
    assert nodes[-3:] == ["plan_assess", "goal_completion", "finish"]
    assert script.schemas() == ["RouteIntake", "GeneratePlan"]  # no assessment call after the bootstrap step


async def test_max_iterations_fails_the_goal_and_keeps_the_last_plan_result() -> None:
    script = PhaseScript(
        AssessStatus=[assess("continue", 0.1), assess("continue", 0.2)],
        GeneratePlan=[plan(step("s1")), plan(step("s2"))],
    )
    state, events, _ = await _run(script, StepExecutor(tools=[read_tool()]), max_iterations=2)
    assert state["status"] == "failed" and state["error"] == "max_iterations (2) reached"
    assert state["plan_result"]["decision"]["steps"][0]["id"] == "s2"
    assert events[-1]["event"] == "error"


def test_run_config_sets_an_explicit_recursion_limit_from_max_iterations() -> None:
    cfg = run_config("t", 3)
    assert cfg["configurable"]["thread_id"] == "t"
    assert cfg["recursion_limit"] == NODES_PER_ITERATION * 4 + 8
    with pytest.raises(ValueError, match="max_iterations"):
        run_config("t", 0)


async def test_plan_mode_offers_every_configured_tool_marked_and_refuses_others() -> None:
    script = PhaseScript(
        AssessStatus=[assess("done", 1.0)],
        GeneratePlan=[plan(step("s1", tools=["rm"])), plan(step("s1", tools=["write"]))],
    )
    wrote: list[str] = []
    ex = StepExecutor(tools=[read_tool(), read_tool(wrote, name="write", read_only=False)])
    state, _, _ = await _run(script, ex)
    prompts = [c.prompt_text for c in script.calls if c.schema_name == "GeneratePlan"]
    # the write tool is offered, unmarked; the read tool is marked read-only
    assert "- read(text) [read-only]: read something" in prompts[0]
    assert "- write(text): write something" in prompts[0]
    assert "'rm'" in prompts[1]  # a tool outside the configuration is refused, and re-asked
    assert state["status"] == "done" and wrote == ["do s1"]  # the write step ran once, after validation


async def test_slow_branch_does_not_hold_back_the_fast_branch_inside_the_graph() -> None:
    release = asyncio.Event()
    script = PhaseScript(
        AssessStatus=[assess("done", 1.0)],
        GeneratePlan=[plan(step("a", tools=["slow"]), step("b"), step("c", "b"))],
    )
    graph = build_strange_loop(
        script.planner(),
        StepExecutor(tools=[gated_tool("slow", release), read_tool()]),
        checkpointer=InMemorySaver(),
    )
    order: list[tuple[str, str]] = []
    async for mode, chunk in graph.astream(
        goal_input(GOAL, thread_id="d"), run_config("d", 3), stream_mode=["updates", "custom"]
    ):
        if mode == "custom" and chunk["event"] in ("step_started", "step_completed"):
            order.append((chunk["event"], chunk["step_id"]))
            if (chunk["event"], chunk["step_id"]) == ("step_completed", "c"):
                release.set()
    done = [sid for ev, sid in order if ev == "step_completed"]
    assert done == ["b", "c", "a"]


async def test_peak_in_flight_llm_calls_never_exceeds_the_global_limit() -> None:
    limit = 2
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=limit, max_parallel_steps=4))
    in_flight = 0
    observed = 0
    both = asyncio.Event()

    async def agent_reply(call: ScriptedCall) -> str:
        nonlocal in_flight, observed
        in_flight += 1
        observed = max(observed, in_flight)
        if in_flight >= limit:
            both.set()
        await asyncio.wait_for(both.wait(), 10.0)
        in_flight -= 1
        return "thought"

    script = PhaseScript(
        AssessStatus=[assess("done", 1.0)],
        GeneratePlan=[plan(*(step(f"s{i}", tools=()) for i in range(4)))],
    )
    executor = StepExecutor(
        tools=[read_tool()], agent_model=FunctionChatModel(agent_reply), controller=controller
    )
    state, _, _ = await _run(script, executor, planner=script.planner(controller=controller))
    assert state["status"] == "done"
    assert observed == limit
    assert controller.peak_llm_calls == limit
    assert controller.total_llm_calls == 3 + 4  # intake, 1 assessment, 1 generation + 4 agent calls
    print(f"peak in-flight LLM calls {controller.peak_llm_calls} of limit {limit}")


def test_langgraph_json_points_at_a_factory_that_returns_the_compiled_loop(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib.util
    import inspect
    import json
    import sys
    from pathlib import Path

    from langgraph.graph.state import CompiledStateGraph

    root = Path(__file__).resolve().parent.parent
    spec = json.loads((root / "langgraph.json").read_text())["graphs"]["strange_loop"]
    file, attr = spec.split(":")
    module_spec = importlib.util.spec_from_file_location("soothe_server_under_test", root / file)
    assert module_spec is not None and module_spec.loader is not None
    module = importlib.util.module_from_spec(module_spec)
    monkeypatch.setitem(sys.modules, "soothe_server_under_test", module)  # as the server registers it
    module_spec.loader.exec_module(module)

    (tmp_path / "script.json").write_text("[]")
    (tmp_path / "soothe.yaml").write_text("checkpoint:\n  backend: memory\nrun:\n  approval: true\n")
    monkeypatch.setenv("SOOTHE_SCRIPTED_MODEL", str(tmp_path / "script.json"))
    monkeypatch.setenv("SOOTHE_CONFIG", str(tmp_path / "soothe.yaml"))
    factory = getattr(module, attr)
    assert inspect.iscoroutinefunction(factory)  # the server awaits it; its blocking work runs in a thread
    graph = asyncio.run(factory())
    assert isinstance(graph, CompiledStateGraph)
    assert {"intake", "plan_assess", "plan_generate", "validate", "approve", "execute"} <= set(graph.nodes)
    assert graph.checkpointer is None  # the server brings its own persistence


@pytest.mark.parametrize(("parallelism", "expected_peak"), [("sequential", 1), ("dependency", 3)])
async def test_policy_step_parallelism_decides_how_many_steps_run_at_once(parallelism: str, expected_peak: int) -> None:
    from langchain_core.tools import StructuredTool

    in_flight = 0
    peak = 0
    three = asyncio.Event()

    async def work(text: str) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight == 3:
            three.set()
        if parallelism != "sequential":
            await asyncio.wait_for(three.wait(), 10.0)
        await asyncio.sleep(0)
        in_flight -= 1
        return "worked"

    script = PhaseScript(AssessStatus=[assess("done", 1.0)],
                         GeneratePlan=[plan(step("a", tools=["work"]), step("b", tools=["work"]),
                                            step("c", tools=["work"]), mode="parallel")])
    tool = StructuredTool.from_function(coroutine=work, name="work", description="w", metadata={"read_only": True})
    state, _, _ = await _run(script, StepExecutor(tools=[tool]),
                             policy=ConcurrencyPolicy(step_parallelism=parallelism))  # type: ignore[arg-type]
    assert state["status"] == "done" and peak == expected_peak


async def test_a_follow_up_repeating_the_same_goal_on_a_thread_runs_its_steps_again() -> None:
    from langgraph.store.memory import InMemoryStore

    script = PhaseScript(
        RouteIntake=[{"route": "complex"}, {"route": "complex"}],
        # a follow-up skips the iteration-0 assessment (the planner's rule for follow-up turns)
        AssessStatus=[assess("done", 1.0), assess("done", 1.0)],
        GeneratePlan=[plan(step("s1")), plan(step("s1"))],
    )
    log: list[str] = []
    graph = build_strange_loop(script.planner(), StepExecutor(tools=[read_tool(log)]),
                               checkpointer=InMemorySaver(), store=InMemoryStore())
    config = run_config("same", 3)
    await collect(graph, goal_input(GOAL, thread_id="same"), config)
    first_run = (await graph.aget_state(config)).values["run_id"]
    await collect(graph, goal_input(GOAL, thread_id="same", prior_goals=[GOAL]), config)
    state = (await graph.aget_state(config)).values
    assert state["status"] == "done" and state["run_id"] != first_run
    assert log == ["do s1", "do s1"]  # the journal of the first run was not replayed


async def test_the_compiled_graph_carries_a_recursion_limit_from_its_max_iterations() -> None:
    from soothe_planner.graph.loop import recursion_limit_for
    from soothe_planner.models import PlannerSettings

    script = PhaseScript()
    graph = build_strange_loop(script.planner(PlannerSettings(max_iterations=2)), StepExecutor(), max_iterations=2)
    assert graph.config is not None and graph.config["recursion_limit"] == recursion_limit_for(2)
    # an option of the graph, not read from one planner's settings
    default = build_strange_loop(script.planner(PlannerSettings(max_iterations=2)), StepExecutor())
    assert default.config is not None and default.config["recursion_limit"] == recursion_limit_for(10)
