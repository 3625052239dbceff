"""The planner's graph nodes over plain-data state: routing, the loop's bookkeeping, progress events."""

from __future__ import annotations

import json
from typing import Any

from langgraph.graph import END, START, StateGraph

from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.graph.nodes import (
    PlannerNodes,
    route_after_assess,
    route_after_intake,
    route_after_resolve,
)
from soothe_planner.graph.state import LoopGraphState
from soothe_planner.models import (
    AgentDecision,
    PlanContext,
    PlannerSettings,
    PlanResult,
    StepAction,
    StepResult,
)
from soothe_planner.planner import LLMPlanner
from soothe_planner.testing import ScriptedChatModel

GOAL = "list the files and describe them"
CTX = PlanContext(available_capabilities=["list_dir", "read_file"])


def assess(status: str, progress: float = 0.5) -> dict[str, Any]:
    return {"status": status, "goal_progress": progress, "confidence": 0.8, "summary": f"{status} per evidence"}


def plan(*ids: str) -> dict[str, Any]:
    steps = [{"id": sid, "description": f"do {sid}", "depends_on": [], "tools": ["list_dir"]} for sid in ids]
    return {"plan_action": "new", "execution_mode": "dependency", "next_action": "go", "steps": steps}


def nodes(*replies: Any, synthesize: bool = False, **settings: Any) -> tuple[PlannerNodes, ScriptedChatModel]:
    model = ScriptedChatModel(responses=list(replies))
    planner = LLMPlanner(model, settings=PlannerSettings(transport_backoff_s=0, **settings))
    return PlannerNodes(planner, context=CTX, synthesize=synthesize), model


def merge(state: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    json.dumps(update)  # every update is plain data, as checkpoints need
    return {**state, **update}


def execute(state: dict[str, Any], ok: bool = True) -> dict[str, Any]:
    """What the executor node does, minimally: run the in-flight steps and record outcomes on the DAG."""
    pm = PlanManager.from_dict(state["plan_manager"])
    results = []
    for step in state["current_decision"]["steps"]:
        pm.mark_started(step["id"])
        results.append(StepResult(step_id=step["id"], success=ok, output=f"output of {step['id']}",
                                  error=None if ok else "boom", error_type=None if ok else "tool_error"))
    pm.record_step_outcomes(results)
    return merge(state, {"plan_manager": pm.to_dict()})


def finished(*results: StepResult) -> dict[str, Any]:
    """A plan manager (as state holds it) whose steps finished with ``results``: their one home."""
    pm = PlanManager(GOAL)
    pm.ingest(AgentDecision(steps=[StepAction(id=r.step_id, description=f"do {r.step_id}") for r in results]))
    for r in results:
        pm.mark_started(r.step_id)
    pm.record_step_outcomes(list(results))
    return pm.to_dict()


async def test_trivial_intake_answers_and_routes_to_answer() -> None:
    n, model = nodes({"route": "trivial", "answer": "Paris"})
    state = merge({"goal": "capital of France?"}, await n.intake({"goal": "capital of France?"}))
    assert state["final_answer"] == "Paris" and state["status"] == "done"
    assert route_after_intake(state) == "answer"
    assert state["llm_calls"] == 1 and state["iteration"] == 0
    assert state["plan_manager"]["goal"] == "capital of France?"
    assert (await n.answer(state))["status"] == "done" and len(model.calls) == 1


async def test_complex_intake_routes_to_the_loop_and_marks_a_continuation() -> None:
    n, _ = nodes({"route": "complex", "answer": ""})
    update = await n.intake({"goal": GOAL, "prior_goals": ["earlier goal"]})
    assert update["continuation"] is True and update["intake"] == "complex"
    assert route_after_intake({**update}) == "plan_assess"


async def test_trivial_follow_up_goes_to_the_continuation_check_not_a_direct_answer() -> None:
    n, _ = nodes({"route": "trivial", "answer": "Paris"})
    update = await n.intake({"goal": "and its population?", "prior_goals": ["capital of France?"]})
    assert update["intake"] == "trivial" and update["continuation"] is True
    assert update["status"] == "running" and update["final_answer"] is None
    assert route_after_intake({**update}) == "plan_assess"


async def test_intake_given_in_state_costs_no_call() -> None:
    n, model = nodes()
    update = await n.intake({"goal": GOAL, "intake": "complex"})
    assert "intake" not in update and not model.calls


async def test_iteration_cap_fails_the_goal_and_keeps_the_last_result() -> None:
    n, model = nodes()
    last = PlanResult(status="continue", plan_action="keep").model_dump(mode="json")
    update = await n.plan_assess({"goal": GOAL, "iteration": 4, "max_iterations": 3, "plan_result": last})
    assert update == {"status": "failed", "error": "max_iterations (3) reached"}
    assert route_after_assess({**update}) == "failed" and not model.calls
    nothing_ran = await n.plan_assess({"goal": GOAL, "iteration": 3, "max_iterations": 3})  # no plan result
    assert nothing_ran == {"status": "failed", "error": "max_iterations (3) reached"} and not model.calls


async def test_the_last_round_at_the_cap_is_judged_once_and_no_plan_follows() -> None:
    last = PlanResult(status="continue", plan_action="keep").model_dump(mode="json")
    state = {"goal": GOAL, "iteration": 3, "max_iterations": 3, "plan_result": last,
             "plan_manager": finished(StepResult(step_id="s1", success=True, output="two files: a.py, b.py"))}
    n, model = nodes(assess("replan"))
    update = await n.plan_assess(state)
    assert len(model.calls) == 1 and "Iteration 3 of at most 3." in model.calls[0].last_text
    assert update["status"] == "failed" and update["error"] == "max_iterations (3) reached"
    assert update["assessment"]["status"] == "replan" and route_after_assess(update) == "failed"
    n, model = nodes(assess("done", 1.0))
    update = await n.plan_assess(state)
    assert "status" not in update and route_after_assess(update) == "goal_completion"


async def test_a_whole_loop_by_hand_plans_executes_and_completes() -> None:
    n, model = nodes({"route": "complex", "answer": ""}, plan("s1", "s2"), assess("done", 1.0))
    state: dict[str, Any] = {"goal": GOAL, "thread_id": "t", "max_iterations": 5}
    state = merge(state, await n.intake(state))
    state = merge(state, await n.plan_assess(state))
    assert route_after_assess(state) == "plan_generate"
    assert len(model.calls) == 1  # no evidence and no plan yet: nothing to ask the model
    state = merge(state, await n.plan_generate(state))
    state = merge(state, await n.resolve_decision(state))
    assert route_after_resolve(state) == "execute"
    assert [s["id"] for s in state["current_decision"]["steps"]] == ["s1", "s2"]
    state = execute(state)
    state = merge(state, await n.record_iteration(state))
    assert state["iteration"] == 1 and "iteration 0: continue" in state["action_history"][0]
    assert "s1 ok" in state["working_memory"]
    assert "output of s1" not in state["working_memory"]  # results travel in the evidence and the plan
    state = merge(state, await n.plan_assess(state))
    assert route_after_assess(state) == "goal_completion"
    state = merge(state, await n.goal_completion(state))
    assert state["status"] == "done" and "output of s1" in state["final_answer"]
    assert state["llm_calls"] == 3 == len(model.calls)  # intake, generate, assess


async def test_a_rejected_decision_goes_back_to_generation_once_then_fails() -> None:
    n, _ = nodes()
    cyclic = AgentDecision(steps=[StepAction(id="a", description="a", depends_on=["b"]),
                                  StepAction(id="b", description="b", depends_on=["a"])])
    result = PlanResult(status="continue", plan_action="new", decision=cyclic).model_dump(mode="json")
    state: dict[str, Any] = {"goal": GOAL, "iteration": 0, "plan_result": result,
                             "assessment": assess("continue"), "plan_manager": n.new_manager(GOAL).to_dict()}
    state = merge(state, await n.resolve_decision(state))
    assert route_after_resolve(state) == "plan_generate"
    assert "cycle" in state["working_memory"] and state.get("status") != "failed"
    state = merge(state, await n.resolve_decision(state))
    assert state["status"] == "failed" and route_after_resolve(state) == "failed"
    assert "twice" in state["error"]


async def test_replan_supersedes_pending_steps_at_resolve() -> None:
    n, _ = nodes()
    pm = n.new_manager(GOAL)
    pm.ingest(AgentDecision(steps=[StepAction(id="old", description="old plan")]), 0)
    fresh = AgentDecision(steps=[StepAction(id="new", description="new plan")])
    state: dict[str, Any] = {"goal": GOAL, "iteration": 1, "assessment": assess("replan"),
                             "plan_result": PlanResult(status="replan", plan_action="new", decision=fresh).model_dump(mode="json"),
                             "plan_manager": pm.to_dict()}
    state = merge(state, await n.resolve_decision(state))
    assert [s["id"] for s in state["current_decision"]["steps"]] == ["new"]


async def test_keep_with_nothing_in_flight_fails_instead_of_spinning() -> None:
    n, _ = nodes()
    result = PlanResult(status="continue", plan_action="keep", degraded=True).model_dump(mode="json")
    state: dict[str, Any] = {"goal": GOAL, "iteration": 1, "assessment": assess("continue"), "plan_result": result}
    update = await n.resolve_decision(state)
    assert update["status"] == "failed" and "degraded" in update["error"]


async def test_bootstrap_step_that_completed_ends_the_goal_without_a_call() -> None:
    n, model = nodes()
    decision = AgentDecision(steps=[StepAction(id="s1", description="one more")])
    result = PlanResult(status="continue", plan_action="new", decision=decision, terminal_after_execute=True)
    state: dict[str, Any] = {"goal": GOAL, "iteration": 1, "plan_result": result.model_dump(mode="json"),
                             "plan_manager": finished(StepResult(step_id="s1", success=True, output="x"))}
    update = await n.plan_assess(state)
    assert update["assessment"]["status"] == "done" and not model.calls


async def test_goal_completion_synthesises_one_answer_when_asked() -> None:
    n, model = nodes("There are two files.", synthesize=True)
    state: dict[str, Any] = {"goal": GOAL, "llm_calls": 3,
                             "plan_manager": finished(StepResult(step_id="s1", success=True, output="a.txt b.txt"))}
    update = await n.goal_completion(state)
    assert update["final_answer"] == "There are two files." and update["llm_calls"] == 4
    assert "a.txt b.txt" in model.calls[0].last_text
    assert model.calls[0].metadata["soothe_phase"] == "answer"


async def test_planner_failure_in_generation_fails_the_goal_with_the_reason() -> None:
    n, _ = nodes("x", "x", "x", retries=1)
    state: dict[str, Any] = {"goal": GOAL, "iteration": 1, "assessment": assess("continue")}
    update = await n.plan_generate(state)
    assert update["status"] == "failed" and "plan-generate" in update["error"]
    assert route_after_resolve({**state, **update, **(await n.resolve_decision({**state, **update}))}) == "failed"


async def test_nodes_emit_progress_events_on_the_custom_stream() -> None:
    n, _ = nodes(assess("continue", 0.2), plan("s1"))
    graph = StateGraph(LoopGraphState)
    graph.add_node("plan_assess", n.plan_assess)
    graph.add_node("plan_generate", n.plan_generate)
    graph.add_edge(START, "plan_assess")
    graph.add_edge("plan_assess", "plan_generate")
    graph.add_edge("plan_generate", END)
    app = graph.compile()
    events = [chunk async for chunk in app.astream({"goal": GOAL, "iteration": 1}, stream_mode="custom")]
    kinds = [e["event"] for e in events]
    assert kinds == ["assessment", "plan"]
    assert events[0]["status"] == "continue" and events[1]["steps"][0]["id"] == "s1"
