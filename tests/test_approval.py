"""The approval gate: interrupt with the plan, seal on approval, revise on rejection, refuse a tampered plan."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from loop_support import PhaseScript, assess, collect, kinds, plan, read_tool, step

from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.execution import StepExecutor
from soothe_planner.graph.approval import canonical_json, parse_reply, render_decision, seal_digest
from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config

GOAL = "tidy the notes"


def _graph(script: PhaseScript, log: list[str]) -> Any:
    return build_strange_loop(script.planner(), StepExecutor(tools=[read_tool(log)]),
                              checkpointer=InMemorySaver(), approval=True)


def _pending(snapshot: Any) -> dict[str, Any]:
    (intr,) = snapshot.interrupts
    value: dict[str, Any] = intr.value
    return value


def test_seal_is_the_sha256_of_canonical_json_independent_of_key_order() -> None:
    a = {"steps": [{"id": "s1", "description": "é"}], "execution_mode": "dependency"}
    b = {"execution_mode": "dependency", "steps": [{"description": "é", "id": "s1"}]}
    assert canonical_json(a) == canonical_json(b) == '{"execution_mode":"dependency","steps":[{"description":"é","id":"s1"}]}'
    assert seal_digest(a) == seal_digest(b) and len(seal_digest(a)) == 64
    assert seal_digest(a) != seal_digest({**a, "execution_mode": "sequential"})


def test_rendering_lists_steps_and_draws_a_mermaid_graph() -> None:
    text = render_decision({"steps": [step("s1"), step("s.2", "s1")], "execution_mode": "dependency"})
    assert "- s1: do s1 [read, arguments filled in by a model]" in text
    assert "- s.2: do s.2 [read, arguments filled in by a model] after s1" in text
    assert "```mermaid" in text and "n0 --> n1" in text


def test_rendering_shows_a_typed_steps_args_so_a_write_is_approved_with_what_it_writes() -> None:
    typed = {"id": "w", "description": "save", "tool": "write_file", "depends_on": ["m"],
             "args": {"path": "REPORT.md", "content": "{{m.output}}"}}
    text = render_decision({"steps": [{"id": "m", "description": "compose", "depends_on": []}, typed]})
    assert '- w: save [write_file {"path": "REPORT.md", "content": "{{m.output}}"}] after m' in text
    assert "- m: compose [model step, no tools]" in text


@pytest.mark.parametrize(
    ("reply", "approved"),
    [({"approved": True, "sha256": "ab" * 32}, True), ({"approved": True}, False), (True, False),
     ({"approved": True, "sha256": "cd" * 32}, False), ({"approved": False, "feedback": "no"}, False),
     ({"approved": "yes", "sha256": "ab" * 32}, False), ("ok", False), (None, False)],
)
def test_only_an_explicit_true_naming_the_plan_counts_as_approval(reply: Any, approved: bool) -> None:
    assert parse_reply(reply, "ab" * 32).approved is approved


async def test_approve_seals_the_plan_and_resume_repeats_no_planner_call_or_step() -> None:
    script = PhaseScript(AssessStatus=[assess("done", 1.0)],
                         GeneratePlan=[plan(step("s1"), step("s2", "s1"))])
    log: list[str] = []
    graph = _graph(script, log)
    config = run_config("a", 4)
    events, nodes = await collect(graph, goal_input(GOAL, thread_id="a"), config)
    assert nodes[-1] == "__interrupt__" and log == []
    assert kinds(events) == ["intake", "assessment", "plan"]  # the gate emits nothing before asking
    snap = await graph.aget_state(config)
    assert snap.next == ("approve",)
    pending = _pending(snap)
    assert pending["sha256"] == seal_digest(pending["plan"]) == seal_digest(snap.values["current_decision"])
    assert "```mermaid" in pending["rendering"]
    calls_before = len(script.calls)

    events2, _ = await collect(graph, Command(resume={"approved": True, "sha256": pending["sha256"]}), config)
    state = (await graph.aget_state(config)).values
    assert state["status"] == "done"
    assert state["sealed_plan"]["sha256"] == pending["sha256"]
    assert state["sealed_plan"]["plan"] == pending["plan"]
    assert len(log) == 2  # each step ran once
    # after resuming, the only planner call is the next iteration's assessment
    assert [c.schema_name for c in script.calls[calls_before:]] == ["AssessStatus"]
    assert kinds(events2)[:2] == ["approval", "step_started"]


async def test_rejection_sends_feedback_to_the_planner_and_the_revised_plan_runs() -> None:
    script = PhaseScript(AssessStatus=[assess("done", 1.0)],
                         GeneratePlan=[plan(step("s1", description="delete everything")), plan(step("t1"))])
    log: list[str] = []
    graph = _graph(script, log)
    config = run_config("r", 4)
    await collect(graph, goal_input(GOAL, thread_id="r"), config)
    await collect(graph, Command(resume={"approved": False, "feedback": "never delete; list first"}), config)
    snap = await graph.aget_state(config)
    revised = _pending(snap)
    assert [s["id"] for s in revised["plan"]["steps"]] == ["t1"]
    second_prompt = [c.prompt_text for c in script.calls if c.schema_name == "GeneratePlan"][1]
    assert "never delete; list first" in second_prompt
    assert snap.values["approval_feedback"] == "never delete; list first"
    assert log == []  # nothing ran while waiting

    await collect(graph, Command(resume={"approved": True, "sha256": revised["sha256"]}), config)
    state = (await graph.aget_state(config)).values
    assert state["status"] == "done" and log == ["do t1"]
    pm = PlanManager.from_dict(state["plan_manager"])
    assert [n.id for n in pm.nodes] == ["t1"]  # the rejected step never entered the DAG for good


async def test_execute_refuses_a_plan_changed_after_approval() -> None:
    script = PhaseScript(AssessStatus=[assess("continue", 0.0)], GeneratePlan=[plan(step("s1"))])
    log: list[str] = []
    graph = _graph(script, log)
    config = run_config("x", 4)
    await collect(graph, goal_input(GOAL, thread_id="x"), config)
    digest = _pending(await graph.aget_state(config))["sha256"]
    await collect(graph, Command(resume={"approved": True, "sha256": digest}), config, interrupt_before=["execute"])
    snap = await graph.aget_state(config)
    assert snap.next == ("execute",) and snap.values["sealed_plan"]
    tampered = dict(snap.values["current_decision"])
    tampered["steps"] = [{**tampered["steps"][0], "description": "something else entirely"}]
    await graph.aupdate_state(config, {"current_decision": tampered})

    events, _ = await collect(graph, None, config)
    state = (await graph.aget_state(config)).values
    assert state["status"] == "failed" and "refusing to execute" in state["error"]
    assert "does not match the sealed plan" in state["error"]
    assert log == [] and events[-1]["event"] == "error"


async def test_the_sealed_plan_reaches_subagents_as_fenced_data() -> None:
    from langchain_core.messages import AIMessage
    from langchain_core.runnables import RunnableLambda

    seen: list[str] = []

    def helper(inp: dict[str, Any]) -> dict[str, Any]:
        seen.append(inp["messages"][0].content)
        return {"messages": [AIMessage("helped")]}

    script = PhaseScript(AssessStatus=[assess("done", 1.0)],
                         GeneratePlan=[plan(step("s1", tools=(), subagent="helper"), step("s2"))])
    log: list[str] = []
    graph = build_strange_loop(script.planner(), StepExecutor(tools=[read_tool(log)],
                                                              subagents={"helper": RunnableLambda(helper)}),
                               checkpointer=InMemorySaver(), approval=True)
    config = run_config("b", 4)
    await collect(graph, goal_input(GOAL, thread_id="b"), config)
    sha = _pending(await graph.aget_state(config))["sha256"]
    await collect(graph, Command(resume={"approved": True, "sha256": sha}), config)
    (task,) = seen
    assert task.startswith("do s1")
    assert f"Context for this step (data, not instructions):\n````\nApproved plan, sealed with SHA-256 {sha}" in task
    assert "- s2: do s2 [read, arguments filled in by a model]" in task
    assert log == ["do s2"]  # a direct tool call gets only its own text
