"""The approval gate as LangGraph's human-in-the-loop request (the Agent Inbox shape).

The pause carries ``action_request`` (the plan as the ``run_plan`` action's args, with its digest),
``config`` (accept, edit, respond, ignore) and the rendering as ``description``; the replies are
resumed as Agent Chat UI resumes them, a list of one ``{"type": ..., "args": ...}``. An accept
must still name the plan shown; an edit is validated as a planner's plan and sealed under its own
digest; a response is feedback for a re-plan; ignore ends the run as rejected. The earlier reply
shape is pinned by ``test_approval.py`` and ``test_security_approval.py``, unchanged.
"""

from __future__ import annotations

import json
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from loop_support import PhaseScript, assess, collect, plan, read_tool, step

from soothe_planner.execution import StepExecutor
from soothe_planner.graph.approval import parse_reply, seal_digest
from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config

GOAL = "tidy the notes"


async def _paused(script: PhaseScript, log: list[str], thread: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    graph = build_strange_loop(script.planner(), StepExecutor(tools=[read_tool(log)]),
                               checkpointer=InMemorySaver(), approval=True)
    config = run_config(thread, 4)
    await collect(graph, goal_input(GOAL, thread_id=thread), config)
    return graph, config, (await graph.aget_state(config)).interrupts[0].value


def _resume(response: dict[str, Any]) -> Command:
    return Command(resume=[response])  # as Agent Chat UI and Agent Inbox resume


async def test_the_pause_is_a_human_in_the_loop_request_carrying_the_plan_and_its_digest() -> None:
    script = PhaseScript(AssessStatus=[assess("done", 1.0)], GeneratePlan=[plan(step("s1"), step("s2", "s1"))])
    _, _, pending = await _paused(script, [], "shape")
    request = pending["action_request"]
    assert request["action"] == "run_plan"
    assert [s["id"] for s in request["args"]["steps"]] == ["s1", "s2"]
    assert request["args"]["steps"][1]["depends_on"] == ["s1"] and request["args"]["steps"][0]["tools"] == ["read"]
    assert request["args"]["sha256"] == pending["sha256"] == seal_digest(pending["plan"])
    assert pending["config"] == {"allow_accept": True, "allow_edit": True, "allow_respond": True, "allow_ignore": True}
    assert pending["description"] == pending["rendering"] and "```mermaid" in pending["description"]


async def test_accept_of_the_action_request_shown_runs_the_plan_it_names() -> None:
    script = PhaseScript(AssessStatus=[assess("done", 1.0)], GeneratePlan=[plan(step("s1"))])
    log: list[str] = []
    graph, config, pending = await _paused(script, log, "accept")
    await collect(graph, _resume({"type": "accept", "args": pending["action_request"]}), config)
    state = (await graph.aget_state(config)).values
    assert state["status"] == "done" and log == ["do s1"]
    assert state["sealed_plan"]["sha256"] == pending["sha256"]


async def test_accept_of_a_plan_swapped_while_waiting_or_naming_no_plan_is_refused() -> None:
    for thread, swap, args in (("swapped", True, None), ("bare", False, "no args")):
        script = PhaseScript(AssessStatus=[assess("continue", 0.0)],
                             GeneratePlan=[plan(step("s1", description="list the notes")), plan(step("t1"))])
        log: list[str] = []
        graph, config, pending = await _paused(script, log, thread)
        if swap:
            state = (await graph.aget_state(config)).values
            changed = {**state["current_decision"],
                       "steps": [{**state["current_decision"]["steps"][0], "description": "delete the notes"}]}
            await graph.aupdate_state(config, {"current_decision": changed})
        reply = pending["action_request"] if args is None else None
        await collect(graph, _resume({"type": "accept", "args": reply}), config)
        after = await graph.aget_state(config)
        assert log == [] and not after.values.get("sealed_plan"), thread
        feedback = after.values["approval_feedback"]
        assert ("changed after it was shown" if swap else "named no plan digest") in feedback
        assert [s["id"] for s in after.interrupts[0].value["plan"]["steps"]] == ["t1"]  # asked again, a new plan


async def test_an_edit_runs_the_edited_plan_after_validation_under_a_new_digest() -> None:
    script = PhaseScript(AssessStatus=[assess("done", 1.0)], GeneratePlan=[plan(step("s1", description="delete all"))])
    log: list[str] = []
    graph, config, pending = await _paused(script, log, "edit")
    planner_calls = len(script.calls)
    edited = dict(pending["action_request"]["args"])
    # The UI edits every argument as text: the steps come back as their JSON, rewritten by the human.
    edited["steps"] = json.dumps([step("e1", description="list the notes"), step("e2", "e1", description="count")])
    await collect(graph, _resume({"type": "edit", "args": {"action": "run_plan", "args": edited}}), config)
    state = (await graph.aget_state(config)).values
    assert state["status"] == "done"
    assert [line.splitlines()[0] for line in log] == ["list the notes", "count"]  # the edited plan ran, not the planner's
    sealed = state["sealed_plan"]
    assert sealed["sha256"] != pending["sha256"]
    assert sealed["sha256"] == seal_digest(sealed["plan"]) == seal_digest(state["current_decision"])
    assert [s["id"] for s in sealed["plan"]["steps"]] == ["e1", "e2"]
    assert [c.schema_name for c in script.calls[planner_calls:]] == ["AssessStatus"]  # no re-plan
    assert any("plan edited by the reviewer" in line for line in state["action_history"])


async def test_an_edit_that_does_not_validate_runs_nothing_and_asks_again_with_the_errors() -> None:
    script = PhaseScript(AssessStatus=[assess("done", 1.0)], GeneratePlan=[plan(step("s1"))])
    log: list[str] = []
    graph, config, pending = await _paused(script, log, "bad-edit")
    bad = {**pending["action_request"]["args"],
           "steps": [step("e1", "ghost"), step("e2", tools=("rm_rf",))]}
    await collect(graph, _resume({"type": "edit", "args": {"action": "run_plan", "args": bad}}), config)
    snap = await graph.aget_state(config)
    assert log == [] and snap.next == ("approve",) and not snap.values.get("sealed_plan")
    again = snap.interrupts[0].value
    assert again["sha256"] == pending["sha256"]  # the same plan, asked about again
    assert again["description"].startswith("Your edit was not applied, so nothing ran:")
    assert "'ghost'" in again["description"] and "rm_rf" in again["description"]

    await collect(graph, _resume({"type": "accept", "args": again["action_request"]}), config)
    state = (await graph.aget_state(config)).values
    assert state["status"] == "done" and log == ["do s1"]


async def test_a_response_is_feedback_for_a_re_plan() -> None:
    script = PhaseScript(AssessStatus=[assess("done", 1.0)],
                         GeneratePlan=[plan(step("s1", description="delete everything")), plan(step("t1"))])
    log: list[str] = []
    graph, config, _ = await _paused(script, log, "respond")
    await collect(graph, _resume({"type": "response", "args": "never delete; list first"}), config)
    snap = await graph.aget_state(config)
    assert log == [] and snap.values["approval_feedback"] == "never delete; list first"
    assert "never delete; list first" in [c.prompt_text for c in script.calls if c.schema_name == "GeneratePlan"][1]
    assert [s["id"] for s in snap.interrupts[0].value["plan"]["steps"]] == ["t1"]


async def test_ignore_ends_the_run_as_rejected_and_nothing_runs() -> None:
    script = PhaseScript(AssessStatus=[assess("done", 1.0)], GeneratePlan=[plan(step("s1"))])
    log: list[str] = []
    graph, config, _ = await _paused(script, log, "ignore")
    planner_calls = len(script.calls)
    await collect(graph, _resume({"type": "ignore", "args": None}), config)
    snap = await graph.aget_state(config)
    state = snap.values
    assert log == [] and snap.next == () and not snap.interrupts
    assert state["status"] == "failed" and "rejected" in state["error"] and not state.get("sealed_plan")
    assert state["messages"][-1].content.startswith("The goal failed: the plan was rejected")
    assert len(script.calls) == planner_calls  # no re-plan


def test_the_earlier_reply_shape_and_the_new_one_are_read_alike() -> None:
    digest = "ab" * 32
    assert parse_reply({"approved": True, "sha256": digest}, digest).approved
    assert parse_reply([{"type": "accept", "args": {"action": "run_plan", "args": {"sha256": digest}}}], digest).approved
    assert parse_reply({"type": "accept", "args": {"sha256": digest}}, digest).approved
    assert not parse_reply({"type": "accept", "args": {"sha256": "cd" * 32}}, digest).approved
    assert parse_reply({"type": "ignore"}, digest).ignored
    assert parse_reply({"type": "edit", "args": "not a request"}, digest).refused
    # a mapping that merely has a "type" key beside "approved" is the earlier shape
    assert parse_reply({"approved": True, "sha256": digest, "type": "accept"}, digest).approved
