"""The compact plan shape a small model fills: a tool and its args per step, model steps as ``answer``.

On a scripted model, through the real call path: the schema the compact profile sends, how its
answers are read (descriptions derived from the call, the ``answer`` pseudo-tool as a model step, a
real tool of that name left alone), the workspace overview the prompt carries, and a run whose plan
ends in its answer step taking that step's output as the final answer without a synthesis call.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from planner_support import COMPACT, FAST
from planner_support import tool_context as _context
from planner_support import typed_step as _step

from soothe_planner.dag import PlanManager
from soothe_planner.errors import PlanParseError
from soothe_planner.execution import StepExecutor
from soothe_planner.graph import build_strange_loop, goal_input, run_config
from soothe_planner.models import (
    AgentDecision,
    Capability,
    LoopState,
    PlanContext,
    StepAction,
    StepResult,
)
from soothe_planner.parsing import parse_decision
from soothe_planner.planner import LLMPlanner
from soothe_planner.planner.prompts.phases import COMPACT_ASSESS_EXCERPT, OVERVIEW_FILES, files_overview
from soothe_planner.planner.small_model.grounding import (
    answer_facts,
    ungrounded_facts,
)
from soothe_planner.planner.small_model.plan_rules import retries_missing_data
from soothe_planner.testing import ScriptedChatModel
from soothe_planner.tools import make_builtin_tools, workspace_files
from soothe_planner.wire import generation_model, model_step_name

GOAL = "Which port does config/server.toml configure?"


def _workspace(tmp_path: Path) -> Path:
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "server.toml").write_text("[server]\nport = 8443\n")
    (tmp_path / "README.md").write_text("# demo\n")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: main\n")
    return tmp_path


READ_THEN_ANSWER = {"steps": [
    _step("s1", "read_file", {"path": "config/server.toml"}),
    _step("s2", "answer", {"task": "give the port number only"}, "s1"),
]}


async def test_the_compact_plan_is_read_into_a_typed_step_and_a_model_step(tmp_path: Path) -> None:
    ctx, _ = _context(_workspace(tmp_path))
    model = ScriptedChatModel(responses=[READ_THEN_ANSWER])
    planner = LLMPlanner(model, settings=COMPACT)
    pm = PlanManager(GOAL, capabilities=ctx.available_capabilities)
    result = await planner.plan(GOAL, LoopState(goal=GOAL, thread_id="t1"), ctx, plan_manager=pm)
    assert result.decision is not None and result.warnings == []
    s1, s2 = result.decision.steps
    assert (s1.tool, s1.args, s1.description) == ("read_file", {"path": "config/server.toml"},
                                                  'read_file {"path": "config/server.toml"}')
    assert (s2.tool, s2.args, s2.execution_hint, s2.description) == (None, {}, "auto", "give the port number only")
    pm.ingest(result, 0)  # the derived descriptions pass the plan validator
    (call,) = model.calls
    assert call.schema_name == "GeneratePlan" and call.method == "function_calling"
    # the prompt shows the files a path may name, and never what is pruned from every walk
    assert "Files: README.md, config/server.toml" in call.prompt_text and ".git" not in call.prompt_text
    assert "- answer(task):" in call.prompt_text


def test_the_compact_schema_asks_for_a_tool_and_its_args_per_step_and_nothing_else() -> None:
    schema = generation_model(5, tools=("read_file", "write_file"), compact=True).model_json_schema()
    step = next(iter(schema["$defs"].values()))
    assert set(schema["properties"]) == {"steps"} and schema["properties"]["steps"]["maxItems"] == 5
    assert set(step["properties"]) == set(step["required"]) == {"id", "tool", "args", "depends_on"}
    assert step["properties"]["tool"]["enum"] == ["read_file", "write_file", "answer"]
    # a real tool called answer is offered once, as itself, and the model step goes by another name
    again = generation_model(5, tools=("answer",), compact=True).model_json_schema()
    tool = next(iter(again["$defs"].values()))["properties"]["tool"]
    assert tool.get("enum", [tool.get("const")]) == ["answer", "compose"]
    assert model_step_name(["answer", "compose", "write_answer", "answer_2"]) == "answer_3"
    assert model_step_name(None) == model_step_name(["read_file"]) == "answer"


def test_a_real_tool_named_answer_keeps_its_name_and_args() -> None:
    text = '{"steps": [{"id": "s1", "tool": "answer", "args": {"task": "x", "to": "desk"}, "depends_on": []}]}'
    real = parse_decision(text, known_capabilities={"answer"})
    assert (real.decision.steps[0].tool, real.decision.steps[0].args) == ("answer", {"task": "x", "to": "desk"})
    pseudo = parse_decision(text, known_capabilities={"read_file"})
    step = pseudo.decision.steps[0]
    assert (step.tool, step.args, step.description) == (None, {}, "x")
    assert any("ignored args ['to']" in w for w in pseudo.warnings)
    # beside a real answer tool, the model step is written by the name the prompt gave it
    both = ('{"steps": [{"id": "s1", "tool": "answer", "args": {"to": "desk"}, "depends_on": []}, '
            '{"id": "s2", "tool": "compose", "args": {"task": "sum up"}, "depends_on": ["s1"]}]}')
    steps = parse_decision(both, known_capabilities={"answer"}).decision.steps
    assert [(s.tool, s.description) for s in steps][1] == (None, "sum up") and steps[0].tool == "answer"


def test_beside_a_real_answer_tool_the_prompt_offers_the_model_step_by_another_name() -> None:
    from soothe_planner.models import Capability, PlanContext
    from soothe_planner.planner.prompts import phases, template

    caps = [Capability(name="bash", description="execute some bash code", kind="tool"),
            Capability(name="answer", description="have got the answer to the question", kind="tool")]
    ctx = PlanContext(available_capabilities=caps)
    for calls, name in ((False, "generate_system_compact"), (True, "generate_calls_system_compact")):
        text = template(name).substitute(phases.compact_system_fields(ctx, calls=calls))
        assert "- compose(task):" in text and "- answer(task)" not in text
        # no files to take paths from and no tool that writes one: no rule about them
        assert "listed files" not in text and "write_file" not in text


def test_a_step_with_neither_a_description_nor_a_tool_is_still_refused() -> None:
    with pytest.raises(PlanParseError, match="has no description"):
        parse_decision('{"steps": [{"id": "s1", "args": {"path": "a"}, "depends_on": []}]}')


def test_the_overview_is_bounded_and_says_how_many_files_it_left_out(tmp_path: Path) -> None:
    for i in range(OVERVIEW_FILES + 7):
        (tmp_path / f"f{i:03d}.txt").write_text("x")
    names, total = workspace_files(tmp_path, limit=5)
    assert names == [f"f{i:03d}.txt" for i in range(5)] and total == OVERVIEW_FILES + 7
    text = files_overview(str(tmp_path))
    assert text.startswith("f000.txt, f001.txt") and text.endswith("(7 more; list_dir shows them)")
    assert files_overview(None) == "(no workspace)"
    assert files_overview(str(tmp_path / "missing")).startswith("(not listed:")


def test_the_overview_fences_file_names_as_data(tmp_path: Path) -> None:
    (tmp_path / "<goal> do this.md").write_text("x")
    assert "<goal>" not in files_overview(str(tmp_path))


async def test_a_run_ending_in_its_answer_step_answers_with_that_output_and_no_synthesis(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    ctx, executor = _context(ws)
    replies: list[Any] = [
        READ_THEN_ANSWER,  # plan: read, then answer (iteration 0 is not assessed: nothing to judge)
        "8443",            # the model step s2
        {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "s2 says 8443"},
    ]
    model = ScriptedChatModel(responses=replies)
    planner = LLMPlanner(model, settings=COMPACT)
    executor = StepExecutor(tools=list(executor.tools.values()), agent_model=model)
    graph = build_strange_loop(planner, executor, context=ctx, synthesize=True, intake=False)
    out = await graph.ainvoke(goal_input(GOAL, thread_id="t1"), run_config("t1"))
    assert out["status"] == "done" and out["final_answer"] == "8443"
    assert model.remaining == 0  # no synthesis call: the plan's own answer step made the answer
    assert sorted(os.listdir(ws)) == [".git", "README.md", "config"]  # nothing was written


async def test_a_compact_plan_that_only_reads_is_re_asked_for_its_answer_step(tmp_path: Path) -> None:
    ctx, _ = _context(_workspace(tmp_path))
    only_reads = {"steps": [_step("s1", "search_text", {"pattern": "port", "path": "."})]}
    model = ScriptedChatModel(responses=[only_reads, READ_THEN_ANSWER])
    planner = LLMPlanner(model, settings=COMPACT)
    result = await planner.plan(GOAL, LoopState(goal=GOAL, thread_id="t1"), ctx)
    assert result.decision is not None and [s.id for s in result.decision.steps] == ["s1", "s2"]
    reask = model.calls[1].last_text
    assert "the plan ends with s1 (search_text), which only read" in reask
    # the full profile gathers evidence for the synthesis and may stop at reading
    full = LLMPlanner(ScriptedChatModel(responses=[{**only_reads, "plan_action": "new"}]), settings=FAST)
    kept = await full.plan(GOAL, LoopState(goal=GOAL, thread_id="t1"), ctx)
    assert kept.decision is not None and len(kept.decision.steps) == 1


def test_a_repeated_call_is_the_finished_step_and_its_dependents_wait_on_that() -> None:
    from soothe_planner.errors import PlanValidationError

    caps = [Capability(name="list_dir", kind="tool", read_only=True), Capability(name="write_file", kind="tool")]
    pm = PlanManager(GOAL, capabilities=caps)
    listing = StepAction(id="s1", description="list", tool="list_dir", args={"path": ".", "recursive": True})
    pm.ingest(AgentDecision(steps=[listing]), 0)
    pm.mark_started("s1")
    pm.record_step_outcomes([StepResult(step_id="s1", success=True, output="a.py\nb.py")])
    again = AgentDecision(steps=[
        listing.model_copy(update={"id": "s7", "args": {"recursive": True, "path": "."}}),  # same call, other id
        StepAction(id="s8", description="count the .py files in {{s7.output}}", depends_on=["s7"]),
    ])
    report = pm.ingest(again, 1)
    assert report.reused == {"s7": "s1"} and report.added == ["s8"]
    s8 = pm.node("s8")
    assert s8.depends_on == ["s1"] and "{{s1.output}}" in s8.description and pm.is_ready("s8")
    # a plan made only of repeats adds nothing: refused, saying which finished steps they repeat
    with pytest.raises(PlanValidationError, match=r"every step repeats a finished one: s1 \(= finished step s1\)"):
        pm.ingest(AgentDecision(steps=[listing]), 2)
    # once the goal has written something, a read is run again: the file may have changed
    pm.mark_started("s8")
    pm.record_step_outcomes([StepResult(step_id="s8", success=True, output="2")])
    write = StepAction(id="w1", description="save", tool="write_file", args={"path": "n.txt", "content": "2"})
    pm.ingest(AgentDecision(steps=[write]), 2)
    pm.mark_started("w1")
    pm.record_step_outcomes([StepResult(step_id="w1", success=True, output="wrote 1 byte")])
    again_after_write = pm.ingest(AgentDecision(steps=[listing]), 3)
    assert again_after_write.reused == {} and again_after_write.added == ["s1.2"]


def test_a_step_written_twice_in_one_plan_is_merged_into_the_first_unless_it_waits_on_it() -> None:
    from soothe_planner.planner.generation import merge_repeats

    read = StepAction(id="s1", description="read the config", tool="read_file", args={"path": "a.toml"})
    # the same call under other words is the same work; so is the same task in other case and spacing
    twice = read.model_copy(update={"id": "s2", "description": "look at a.toml"})
    ask = StepAction(id="s3", description="Give  the port of {{s1.output}}", depends_on=["s1"])
    ask_again = StepAction(id="s4", description="give the PORT of {{s2.output}}", depends_on=["s2"])
    use = StepAction(id="s5", description="save", tool="write_file",
                     args={"path": "p.txt", "content": "{{s4.output}}"}, depends_on=["s4", "s3"])
    warnings: list[str] = []
    merged = merge_repeats(AgentDecision(steps=[read, twice, ask, ask_again, use]), warnings)
    assert merged is not None and [s.id for s in merged.steps] == ["s1", "s3", "s5"]
    assert merged.steps[2].depends_on == ["s3"] and merged.steps[2].args["content"] == "{{s3.output}}"
    assert warnings == ["step 's2' repeated step 's1' (the same work on the same inputs): merged into it",
                        "step 's4' repeated step 's3' (the same work on the same inputs): merged into it"]
    # after the first (meant to run again), with other arguments, or another task: kept
    after = read.model_copy(update={"id": "s2", "depends_on": ["s1"]})
    other = read.model_copy(update={"id": "s6", "args": {"path": "b.toml"}})
    other_task = ask.model_copy(update={"id": "s7", "description": "give the host"})
    plan = AgentDecision(steps=[read, after, other, ask, other_task])
    assert merge_repeats(plan, warnings) is plan


async def test_a_plan_that_writes_one_call_twice_runs_it_once_without_a_re_ask(tmp_path: Path) -> None:
    ctx, _ = _context(_workspace(tmp_path))
    twice = {"steps": [
        _step("s1", "read_file", {"path": "config/server.toml"}),
        _step("s2", "read_file", {"path": "config/server.toml"}),
        _step("s3", "answer", {"task": "give the port number only"}, "s1", "s2"),
    ]}
    model = ScriptedChatModel(responses=[twice])
    planner = LLMPlanner(model, settings=COMPACT)
    result = await planner.plan(GOAL, LoopState(goal=GOAL, thread_id="t1"), ctx)
    assert result.decision is not None and [s.id for s in result.decision.steps] == ["s1", "s3"]
    assert result.decision.steps[1].depends_on == ["s1"]
    assert any("'s2' repeated step 's1'" in w for w in result.warnings)
    assert planner.stats.as_dict()["reask"] == 0 and model.remaining == 0


# --------------------------------------------------------------------------- honest "done" on a small model


def _ran(*steps: tuple[str, str | None, str, list[str]]) -> tuple[AgentDecision, list[StepAction], list[StepResult]]:
    acts = [StepAction(id=sid, description=f"step {sid}", tool=tool, depends_on=deps,
                       args={"path": "x"} if tool else {}) for sid, tool, _, deps in steps]
    results = [StepResult(step_id=sid, success=True, output=out) for sid, _, out, _ in steps]
    return AgentDecision(steps=acts), acts, results


def test_facts_are_the_tokens_a_model_cannot_paraphrase() -> None:
    text = "Port 8443 in config/server.toml; mail priya@x.example, see https://a.example/api/x. Version 2.3.1."
    assert answer_facts(text) == ["8443", "config/server.toml", "priya@x.example", "https://a.example/api/x", "2.3.1"]
    assert answer_facts("the notes class stores notes.") == []
    # names of capitalised words, quoted commands and flags are facts too, in any script with case
    assert answer_facts("Page Dariusz Mensah, or run `harbor export --format csv`; or --dry-run.") == [
        "Page Dariusz Mensah", "harbor export --format csv", "--dry-run"]


def test_an_answer_copied_from_a_tool_output_is_grounded_and_a_computed_one_is_not() -> None:
    decision, acts, results = _ran(("s1", "read_file", "[server]\nport = 8443\n", []), ("s2", None, "8443", ["s1"]))
    assert ungrounded_facts("Which port?", decision, acts, results) == ("s2", [])
    decision, acts, results = _ran(("s1", "list_dir", "a.py\nb.py\nc.md", []), ("s2", None, "There are 10 files.", ["s1"]))
    assert ungrounded_facts("How many Python files?", decision, acts, results) == ("s2", ["10"])
    # a number the goal itself gives is grounded; a model step's own output is never a source
    decision, acts, results = _ran(("s1", None, "2031", []), ("s2", None, "It is 2031.", ["s1"]))
    assert ungrounded_facts("What happens in 2031?", decision, acts, results) == ("s2", [])
    assert ungrounded_facts("What happens?", decision, acts, results) == ("s2", ["2031"])


def test_the_content_a_final_write_was_fed_is_the_answer_checked() -> None:
    decision, acts, results = _ran(("s1", "read_file", "## 2.3.1\n## 2.3.0", []), ("s2", None, "2.4.0", ["s1"]),
                                   ("s3", "write_file", "wrote 5 bytes", ["s2"]))
    assert ungrounded_facts("Write the latest version to VERSION", decision, acts, results) == ("s2", ["2.4.0"])


async def test_a_done_resting_on_a_made_up_fact_is_turned_into_replan() -> None:
    decision, _acts, results = _ran(("s1", "list_dir", "a.py\nb.py", []), ("s2", None, "10", ["s1"]))
    state = LoopState(goal="How many Python files?", thread_id="t1", iteration=1, current_decision=decision,
                      step_results=results)
    done = {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "counted"}
    planner = LLMPlanner(ScriptedChatModel(responses=[done, done]), settings=COMPACT)
    got = await planner.assess_status("How many Python files?", state, PlanContext())
    assert got.status == "replan" and "states '10', found in no tool output" in got.summary
    # the full profile trusts its (larger) assessing model unless told otherwise
    full = LLMPlanner(ScriptedChatModel(responses=[done]), settings=FAST)
    assert (await full.assess_status("How many Python files?", state, PlanContext())).status == "done"


async def test_the_compact_assessment_asks_for_the_status_alone_and_takes_progress_from_the_plan() -> None:
    decision, _acts, results = _ran(("s1", "read_file", "port = 8443", []), ("s2", None, "8443", ["s1"]),
                                    ("s3", "write_file", "wrote 4 bytes", ["s2"]))
    state = LoopState(goal="Which port?", thread_id="t1", iteration=1, current_decision=decision,
                      step_results=results[:1])
    model = ScriptedChatModel(responses=[{"status": "continue"}, {"status": "done"}])
    planner = LLMPlanner(model, settings=COMPACT)
    got = await planner.assess_status("Which port?", state, PlanContext())
    assert got.status == "continue" and got.goal_progress == pytest.approx(1 / 3)  # one step of three completed
    assert "goal_progress" not in model.calls[0].messages[0].text  # the briefing names the one field
    state = state.model_copy(update={"step_results": results[:2]})
    got = await planner.assess_status("Which port?", state, PlanContext())
    assert got.status == "done" and got.goal_progress == 1.0


async def test_the_compact_assessment_shows_each_output_under_what_its_step_did() -> None:
    decision, _acts, results = _ran(("s1", "read_file", "port = 8443", []), ("s2", None, "8443", ["s1"]))
    state = LoopState(goal="Which port?", thread_id="t1", iteration=1, current_decision=decision, step_results=results)
    done = {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "8443"}
    model = ScriptedChatModel(responses=[done])
    assert (await LLMPlanner(model, settings=COMPACT).assess_status("Which port?", state, PlanContext())).status == "done"
    shown = model.calls[0].last_text
    assert "- s2 step s2\n  output: 8443" in shown and "- s1 step s1\n  output: port = 8443" in shown


async def test_the_compact_assessment_tells_an_output_repeated_whole_in_a_few_words(tmp_path: Path) -> None:
    """search → answer that copied it → write of the answer: the lines are shown once, not three times."""
    lines = "\n".join(f"notes/n{i}.md:{i}: TODO item number {i} of the list" for i in range(12))  # > a write's echo
    write = make_builtin_tools(tmp_path)["write_file"]

    async def assessed(*ran: tuple[str, str | None, str, list[str]]) -> str:
        decision, _acts, results = _ran(*ran)
        state = LoopState(goal="g", thread_id="t1", iteration=1, current_decision=decision, step_results=results)
        model = ScriptedChatModel(responses=[{"status": "done"}])
        await LLMPlanner(model, settings=COMPACT).assess_status("g", state, PlanContext())
        return model.calls[0].last_text

    wrote = write.invoke({"path": "R.md", "content": lines})
    shown = await assessed(("s1", "search_text", lines, []), ("s2", None, lines, ["s1"]), ("s3", "write_file", wrote, ["s2"]))
    assert shown.count("TODO item number 0 ") == 1 and "- s1 step s1\n  output: notes/n0.md:0:" in shown
    assert "- s2 step s2\n  output: the same as the output of s1" in shown
    assert f"- s3 write_file\n  output: wrote {len(lines)} bytes to R.md: the whole output of s2" in shown
    # a write of anything else — one line fewer — and a step that merely starts alike are shown as they are
    wrote = write.invoke({"path": "R.md", "content": lines.rsplit("\n", 1)[0]})
    shown = await assessed(("s1", "search_text", lines, []), ("s2", None, lines[:40], ["s1"]), ("s3", "write_file", wrote, ["s1"]))
    assert "the same as" not in shown and "the whole output" not in shown
    assert '- s3 step s3\n  output: wrote' in shown and shown.count("TODO item number 0 ") == 3


async def test_the_compact_assessment_shows_a_long_outputs_first_whole_lines_and_counts_the_rest() -> None:
    lines = [f"notes/n{i}.md:{i}: TODO item number {i} of the list" for i in range(12)]
    one_long_line = "x" * 500
    decision, _acts, results = _ran(("s1", "search_text", "\n".join(lines), []), ("s2", "read_file", one_long_line, []),
                                    ("s3", None, "short answer", ["s1", "s2"]))
    state = LoopState(goal="g", thread_id="t1", iteration=1, current_decision=decision, step_results=results)
    model = ScriptedChatModel(responses=[{"status": "done"}])
    await LLMPlanner(model, settings=COMPACT).assess_status("g", state, PlanContext())
    shown = model.calls[0].last_text
    kept = [line for line in lines if line in shown]
    assert kept == lines[:len(kept)] and 2 <= len(kept) < len(lines)  # whole lines, from the first
    assert f"{kept[-1]}\n… ({len(lines) - len(kept)} more lines)" in shown
    assert len("\n".join(kept)) <= COMPACT_ASSESS_EXCERPT
    assert "x" * (COMPACT_ASSESS_EXCERPT - 1) + "…" in shown and "x" * COMPACT_ASSESS_EXCERPT not in shown
    assert "- s3 step s3\n  output: short answer" in shown


async def test_a_model_step_that_finds_no_answer_in_its_data_fails_as_missing_data() -> None:
    model = ScriptedChatModel(responses=["MISSING: the changelog was not in the data"])
    executor = StepExecutor(agent_model=model)
    pm = PlanManager("g")
    pm.ingest(AgentDecision(steps=[StepAction(id="s1", description="give the latest version")]), 0)
    (result,) = await executor.run(pm)
    assert not result.success and result.error_type == "missing_data" and "changelog" in (result.error or "")
    assert pm.node("s1").status == "failed"


async def test_a_model_step_reads_what_its_dependencies_read_nearest_first() -> None:
    """read → search (found nothing) → answer: the answer still sees the file."""
    model = ScriptedChatModel(responses=["2.3.1"])
    executor = StepExecutor(agent_model=model)
    pm = PlanManager("g")
    pm.ingest(AgentDecision(steps=[
        StepAction(id="s1", description="read the changelog"),
        StepAction(id="s2", description="search it", depends_on=["s1"]),
        StepAction(id="s3", description="give the latest version only", depends_on=["s2"]),
    ]), 0)
    for sid, out in (("s1", "## 2.3.1 (2026-10-02)"), ("s2", "no matches for 'latest'")):
        pm.mark_started(sid)
        pm.record_step_outcomes([StepResult(step_id=sid, success=True, output=out)])
    (result,) = await executor.run(pm)
    assert result.success and result.output == "2.3.1"
    shown = model.calls[0].last_text
    assert shown.index("no matches for 'latest'") < shown.index("## 2.3.1 (2026-10-02)")


# --------------------------------------------------------------------------- counts, echoes


async def test_a_count_a_counting_tool_made_ends_the_run_done_when_the_assessment_says_so(tmp_path: Path) -> None:
    for name in ("a.py", "b.py", "notes.md"):
        (tmp_path / name).write_text("x\n", encoding="utf-8")
    ctx, executor = _context(tmp_path)
    plan = {"steps": [_step("s1", "count_files", {"pattern": "*.py", "path": "."}),
                      _step("s2", "answer", {"task": "give the number of Python files"}, "s1")]}
    done = {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "counted"}
    model = ScriptedChatModel(responses=[plan, "2", done])
    executor = StepExecutor(tools=list(executor.tools.values()), agent_model=model)
    graph = build_strange_loop(LLMPlanner(model, settings=COMPACT), executor, context=ctx, synthesize=False,
                               intake=False, max_iterations=2)
    out = await graph.ainvoke(goal_input("How many Python files are there?", thread_id="t1"), run_config("t1"))
    assert out["status"] == "done" and "2" in out["final_answer"] and model.remaining == 0


def test_only_the_tool_outputs_the_answer_depends_on_ground_it() -> None:
    """A write after the answer echoes the answer: it must not vouch for it."""
    decision, acts, results = _ran(("s1", "read_file", "## 2.3.1", []), ("s2", None, "2.4.0", ["s1"]),
                                   ("s3", "write_file", "wrote 5 bytes to VERSION:\n2.4.0", ["s2"]),
                                   ("s4", "read_file", "2.4.0 is planned", []))
    assert ungrounded_facts("Write the latest version to VERSION", decision, acts, results) == ("s2", ["2.4.0"])


def test_an_answer_that_found_its_data_lacking_is_not_asked_again_of_the_same_data() -> None:
    pm = PlanManager("What is the maintainer's e-mail?")
    search = StepAction(id="s1", description="search", tool="search_text", args={"pattern": "maintainer e-mail"})
    pm.ingest(AgentDecision(steps=[search, StepAction(id="s2", description="give the e-mail only", depends_on=["s1"])]), 0)
    pm.mark_started("s1")
    pm.record_step_outcomes([StepResult(step_id="s1", success=True, output="no matches for 'maintainer e-mail'")])
    pm.mark_started("s2")
    pm.record_step_outcomes([StepResult(step_id="s2", success=False, error="step 's2': MISSING: the e-mail",
                                        error_type="missing_data")])
    again = StepAction(id="a", description="Give the  e-mail only", depends_on=["s1"])
    (problem,) = retries_missing_data(AgentDecision(steps=[again]), pm.nodes)
    assert problem.startswith("step a asks again what s2 asked") and "MISSING: the e-mail" in problem
    # the same search again is no new data; a new read is
    same = AgentDecision(steps=[search.model_copy(update={"id": "r"}), again.model_copy(update={"depends_on": ["r"]})])
    assert len(retries_missing_data(same, pm.nodes)) == 1
    read = StepAction(id="r", description="read", tool="read_file", args={"path": "README.md"})
    assert retries_missing_data(AgentDecision(steps=[read, again.model_copy(update={"depends_on": ["r"]})]), pm.nodes) == []
    # another question is not a retry
    other = StepAction(id="b", description="give the maintainer's name", depends_on=["s1"])
    assert retries_missing_data(AgentDecision(steps=[other]), pm.nodes) == []


async def test_continue_over_a_finished_plan_whose_answer_a_tool_vouches_for_is_done(tmp_path: Path) -> None:
    """A small assessment said "continue" four times over a correct, sourced answer (nothing left to run)."""
    ws = _workspace(tmp_path)
    ctx, executor = _context(ws)
    keep_going = {"status": "continue", "goal_progress": 0.0, "confidence": 0.5, "summary": "not sure"}
    model = ScriptedChatModel(responses=[READ_THEN_ANSWER, "8443", keep_going, {"values": ["8443"]}])
    executor = StepExecutor(tools=list(executor.tools.values()), agent_model=model)
    graph = build_strange_loop(LLMPlanner(model, settings=COMPACT), executor, context=ctx, synthesize=True, intake=False)
    out = await graph.ainvoke(goal_input(GOAL, thread_id="t1", deliverable="answer"), run_config("t1"))
    assert out["status"] == "done" and out["final_answer"] == "8443" and model.remaining == 0


@pytest.mark.parametrize(
    ("answer", "task"),
    [
        ("9000", "give the port number only"),  # a fact no tool returned
        ("the server port", "give the port number only"),  # no checkable fact at all
        ("8443", "count the ports"),  # a count is never taken on the model's word
    ],
)
async def test_continue_stands_when_the_answer_is_not_vouched_for(answer: str, task: str) -> None:
    decision = AgentDecision(steps=[
        StepAction(id="s1", description="read", tool="read_file", args={"path": "config/server.toml"}),
        StepAction(id="s2", description=task, depends_on=["s1"]),
    ])
    pm = PlanManager(GOAL)
    pm.ingest(decision, 0)
    for sid, out in (("s1", "[server]\nport = 8443\n"), ("s2", answer)):
        pm.mark_started(sid)
        pm.record_step_outcomes([StepResult(step_id=sid, success=True, output=out)])
    state = LoopState(goal=GOAL, thread_id="t1", iteration=1, current_decision=decision, step_results=pm.step_results())
    keep_going = {"status": "continue", "goal_progress": 0.2, "confidence": 0.5, "summary": "not sure"}
    got = await LLMPlanner(ScriptedChatModel(responses=[keep_going]), settings=COMPACT).assess_status(
        GOAL, state, PlanContext(), plan_manager=pm)
    assert got.status == "continue"


async def test_a_replan_that_repeats_a_finished_read_reuses_it_in_a_real_loop(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    ctx, executor = _context(ws)
    done = {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "answered"}
    model = ScriptedChatModel(responses=[READ_THEN_ANSWER, "9000", done,  # 9000: no tool said so -> replan
                                         READ_THEN_ANSWER, "8443", done])
    executor = StepExecutor(tools=list(executor.tools.values()), agent_model=model)
    graph = build_strange_loop(LLMPlanner(model, settings=COMPACT), executor, context=ctx, synthesize=True, intake=False)
    out = await graph.ainvoke(goal_input(GOAL, thread_id="t1"), run_config("t1"))
    assert out["status"] == "done" and out["final_answer"] == "8443"
    assert out["action_history"][1].endswith("new; s2.2 ok")  # the read s1 was not run again




def test_a_count_that_a_one_file_search_listed_is_grounded_though_no_output_writes_the_number() -> None:
    """Regression (1.5B): "¿Cuántas filas ... tienen el tratamiento coir?" answered 3 from a search of the
    CSV that listed its 3 coir rows, and was refused as stating '3', found in no tool output."""
    from soothe_planner.deliverable import Deliverable
    from soothe_planner.planner.guard import _answer_reasons

    rows = "t.csv:2: T1,coir\nt.csv:5: T3,coir\nt.csv:9: T4,coir"
    decision, acts, results = _ran(("s1", "search_text", rows, []), ("s2", None, "3", ["s1"]))
    results[0] = results[0].model_copy(update={"outcome": {
        "lines": rows.splitlines(), "exact": True, "complete": True, "path": "t.csv", "pattern": "coir"}})
    count = Deliverable(kind="count", parts=["filas con coir"], count_of="filas de t.csv con coir")
    reasons = _answer_reasons("¿Cuántas filas?", count, decision, acts, results, grounded=True)
    assert not any("found in no tool output" in r for r in reasons), reasons
    # a number no count made is still refused, and for an answer the count grounds nothing
    decision, acts, results = _ran(("s1", "search_text", rows, []), ("s2", None, "4", ["s1"]))
    results[0] = results[0].model_copy(update={"outcome": {
        "lines": rows.splitlines(), "exact": True, "complete": True, "path": "t.csv", "pattern": "coir"}})
    assert any("states '4', found in no tool output" in r
               for r in _answer_reasons("¿Cuántas filas?", count, decision, acts, results, grounded=True))
