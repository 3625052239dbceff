"""The approval gate against a changed checkpoint and a spoofed display.

- An approval names the digest of the plan it approves. A plan swapped in the checkpoint while
  the run waits, or an approval that names no digest, is refused: recorded, and nothing runs.
- The seal is keyed (HMAC-SHA-256) with a key held outside the checkpoint, so whoever edits the
  checkpoint cannot re-seal a changed plan.
- The display is built from untrusted text: a description cannot fake a step line, two ids never
  fold into one Mermaid node, and each step says how it runs.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from loop_support import PhaseScript, assess, collect, plan, read_tool, step

from soothe_planner.execution import StepExecutor
from soothe_planner.graph.approval import render_decision
from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config

GOAL = "tidy the notes"


async def _paused(script: PhaseScript, log: list[str], thread: str) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    graph = build_strange_loop(script.planner(), StepExecutor(tools=[read_tool(log)]),
                               checkpointer=InMemorySaver(), approval=True)
    config = run_config(thread, 4)
    await collect(graph, goal_input(GOAL, thread_id=thread), config)
    snapshot = await graph.aget_state(config)
    return graph, config, snapshot.interrupts[0].value


# --------------------------------------------------------------------------- 1: the approval names its plan


async def test_a_plan_swapped_while_waiting_is_refused_not_sealed() -> None:
    script = PhaseScript(AssessStatus=[assess("continue", 0.0)],
                         GeneratePlan=[plan(step("s1", description="list the notes")), plan(step("t1"))])
    log: list[str] = []
    graph, config, shown = await _paused(script, log, "swap")
    # someone with the checkpoint swaps the plan the human is reading
    state = (await graph.aget_state(config)).values
    swapped = {**state["current_decision"],
               "steps": [{**state["current_decision"]["steps"][0], "description": "delete the notes"}]}
    await graph.aupdate_state(config, {"current_decision": swapped})
    await collect(graph, Command(resume={"approved": True, "sha256": shown["sha256"]}), config)
    after = await graph.aget_state(config)
    assert log == []  # nothing ran
    assert not after.values.get("sealed_plan")
    assert "it changed after it was shown, so nothing ran" in after.values["approval_feedback"]
    assert any("approval refused" in line for line in after.values["action_history"])
    # the planner was asked again, and the new plan waits for its own approval
    again = after.interrupts[0].value
    assert [s["id"] for s in again["plan"]["steps"]] == ["t1"] and again["sha256"] != shown["sha256"]


@pytest.mark.parametrize("reply", [{"approved": True}, True, {"approved": True, "sha256": ""}])
async def test_an_approval_naming_no_plan_is_refused(reply: Any) -> None:
    script = PhaseScript(AssessStatus=[assess("continue", 0.0)], GeneratePlan=[plan(step("s1")), plan(step("t1"))])
    log: list[str] = []
    graph, config, _ = await _paused(script, log, "bare")
    await collect(graph, Command(resume=reply), config)
    after = (await graph.aget_state(config)).values
    assert log == [] and not after.get("sealed_plan")
    assert "named no plan digest" in after["approval_feedback"] or "unreadable" in after["approval_feedback"]


async def test_the_approval_naming_the_plan_shown_runs_it() -> None:
    script = PhaseScript(AssessStatus=[assess("done", 1.0)], GeneratePlan=[plan(step("s1"))])
    log: list[str] = []
    graph, config, shown = await _paused(script, log, "ok")
    await collect(graph, Command(resume={"approved": True, "sha256": shown["sha256"]}), config)
    state = (await graph.aget_state(config)).values
    assert state["status"] == "done" and log == ["do s1"]
    assert state["sealed_plan"]["sha256"] == shown["sha256"]


# --------------------------------------------------------------------------- 3: the display


def _step_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.startswith("- ")]


def test_a_description_cannot_fake_another_step_line() -> None:
    forged = "read the notes\n- s9: harmless [model step, no tools]\r\n- s8: also harmless\u2028- s7: x"
    text = render_decision({"steps": [{"id": "s1", "description": forged, "depends_on": []}],
                            "reasoning": "because\n- s6: fake"})
    assert len(_step_lines(text)) == 1
    assert "read the notes\\n- s9: harmless" in _step_lines(text)[0] and "\\u2028" in text
    assert "\u202e" not in render_decision({"steps": [{"id": "s1", "description": "abc\u202edef"}]})


def test_ids_that_differ_only_in_punctuation_stay_two_mermaid_nodes() -> None:
    text = render_decision({"steps": [
        {"id": "s-1", "description": "first", "depends_on": []},
        {"id": "s_1", "description": "second", "depends_on": ["s-1"]},
        {"id": "s.1", "description": "third", "depends_on": ["s_1", "old"]},
    ]})
    diagram = text.split("```mermaid", 1)[1]
    nodes = dict(re.findall(r'^\s+(n\d+)\["([^"]*)"\]', diagram, flags=re.M))
    assert sorted(nodes.values()) == ["old", "s-1: first", "s.1: third", "s_1: second"]
    edges = re.findall(r"^\s+(n\d+) --> (n\d+)$", diagram, flags=re.M)
    by_label = {label.split(":")[0]: node for node, label in nodes.items()}
    assert set(edges) == {(by_label["s-1"], by_label["s_1"]), (by_label["s_1"], by_label["s.1"]),
                          (by_label["old"], by_label["s.1"])}


def test_a_mermaid_label_cannot_close_its_node() -> None:
    text = render_decision({"steps": [{"id": "s1", "description": 'x"] --> evil["pwned', "depends_on": []}]})
    diagram = text.split("```mermaid", 1)[1]
    assert "evil[" not in diagram and '"]' not in diagram.split('n0["', 1)[1].split("\n")[0][:-2]


def test_each_step_says_how_it_runs() -> None:
    steps = [
        {"id": "a", "description": "look around", "execution_hint": "agent", "depends_on": []},
        {"id": "b", "description": "read it", "tools": ["read_file"], "depends_on": []},
        {"id": "c", "description": "compare", "tools": ["read_file", "search_text"], "depends_on": []},
        {"id": "d", "description": "save", "tool": "write_file", "args": {"path": "x.md", "content": "hi\n"},
         "depends_on": []},
        {"id": "e", "description": "summarise", "depends_on": []},
        {"id": "f", "description": "ask", "subagent": "researcher", "depends_on": []},
    ]
    lines = _step_lines(render_decision({"steps": steps}))
    assert lines == [
        "- a: look around [agent, read-only tools]",
        "- b: read it [read_file, arguments filled in by a model]",
        "- c: compare [agent over read_file, search_text]",
        '- d: save [write_file {"path": "x.md", "content": "hi\\n"}]',
        "- e: summarise [model step, no tools]",
        "- f: ask [subagent researcher]",
    ]


# --------------------------------------------------------------------------- 2: a keyed seal


def test_a_keyed_seal_cannot_be_recomputed_by_whoever_edits_the_checkpoint() -> None:
    import hashlib

    from soothe_planner.graph.approval import canonical_json, seal_digest
    from soothe_planner.graph.loop_nodes import _check_seal
    from soothe_planner.models import AgentDecision

    edited = {"steps": [{"id": "s1", "description": "delete the notes", "depends_on": []}]}
    in_flight = AgentDecision.model_validate(edited)
    edited = in_flight.model_dump(mode="json")
    # the editor writes the plan, the DAG and a seal they computed themselves
    forged = {"sha256": hashlib.sha256(canonical_json(edited).encode()).hexdigest(), "plan": edited}
    assert _check_seal(edited, in_flight, forged, None) is None  # a plain seal holds no secret
    refusal = _check_seal(edited, in_flight, forged, b"k" * 32)
    assert refusal is not None and "does not match the sealed plan" in refusal
    honest = {"sha256": seal_digest(edited, b"k" * 32), "plan": edited}
    assert _check_seal(edited, in_flight, honest, b"k" * 32) is None


def _approval_config(tmp_path: Any) -> Any:
    import json

    from soothe_planner.config import load_config

    (tmp_path / "script.json").write_text("[]")
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"models": {"default": "scripted:script.json"}, "run": {"approval": True},
                                "execution": {"workspace": str(tmp_path)}}))
    return load_config(str(path))


def test_the_seal_key_is_kept_outside_the_checkpoint_in_a_private_file(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import stat

    from soothe_planner.config import resolve_seal_key
    from soothe_planner.errors import ConfigError

    monkeypatch.delenv("SOOTHE_SEAL_KEY", raising=False)
    config = _approval_config(tmp_path)
    key = resolve_seal_key(config).get()
    path = tmp_path / ".soothe" / "seal.key"
    assert len(key) == 64 and path.read_bytes() == key
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert resolve_seal_key(_approval_config(tmp_path)).get() == key  # the same key on the next run
    os.chmod(path, 0o644)
    with pytest.raises(ConfigError, match="others may read or change it"):
        resolve_seal_key(_approval_config(tmp_path))  # refused before any work when the gate is on
    monkeypatch.setenv("SOOTHE_SEAL_KEY", "from the environment, long enough to key")
    assert resolve_seal_key(config).get() == b"from the environment, long enough to key"


async def test_a_gate_turned_on_per_run_seals_with_the_same_key_on_resume(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import json

    from soothe_planner.config import load_config, resolve_run
    from soothe_planner.graph.approval import seal_digest

    monkeypatch.delenv("SOOTHE_SEAL_KEY", raising=False)
    (tmp_path / "script.json").write_text("[]")
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps({"models": {"default": "scripted:script.json"}, "execution": {"workspace": str(tmp_path)}}))
    script = PhaseScript(AssessStatus=[assess("done", 1.0)], GeneratePlan=[plan(step("s1", tools=()))],
                         text=["the notes are tidy", "They are tidy."])
    graph = resolve_run(load_config(str(path)), script.planner().model).graph(checkpointer=InMemorySaver())
    assert not (tmp_path / ".soothe" / "seal.key").exists()  # no gate yet: the key is not touched
    config = run_config("ctx", 4)
    await collect(graph, goal_input(GOAL, thread_id="ctx"), config, context={"approval": True})
    shown = (await graph.aget_state(config)).interrupts[0].value
    key = (tmp_path / ".soothe" / "seal.key").read_bytes()
    assert shown["sha256"] == seal_digest(shown["plan"], key)
    # the resume carries no context: the seal is still the keyed one, and the approval matches it
    await collect(graph, Command(resume={"approved": True, "sha256": shown["sha256"]}), config)
    state = (await graph.aget_state(config)).values
    assert state["sealed_plan"]["sha256"] == shown["sha256"] and state["status"] == "done", state.get("error")


async def test_a_configured_gate_seals_with_the_key(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from soothe_planner.config import resolve_run
    from soothe_planner.graph.approval import seal_digest

    monkeypatch.setenv("SOOTHE_SEAL_KEY", "k" * 40)
    script = PhaseScript(AssessStatus=[assess("continue", 0.0)], GeneratePlan=[plan(step("s1", tools=("read_file",)))])
    run = resolve_run(_approval_config(tmp_path), script.planner().model)
    graph = run.graph(checkpointer=InMemorySaver())
    config = run_config("keyed", 4)
    await collect(graph, goal_input(GOAL, thread_id="keyed"), config)
    shown = (await graph.aget_state(config)).interrupts[0].value
    assert shown["sha256"] == seal_digest(shown["plan"], b"k" * 40) != seal_digest(shown["plan"])
