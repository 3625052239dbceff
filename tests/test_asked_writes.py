"""A goal that asks for a named file is not done until a step that changes things wrote it.

Regression (the README's goal, the 1.5B, plans in calls): the plan searched and answered with the
TODO lines but never wrote TODO_REPORT.md; the answer's facts all came from the search, so the
guard read the assessment's "continue" as "done", with no report on disk.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from planner_support import run_compact, tool_context, typed_step

from soothe_planner.models import (
    AgentDecision,
    Capability,
    PlanStep,
    StatusAssessment,
    StepAction,
    StepResult,
)
from soothe_planner.planner.grounding import guard_assessment
from soothe_planner.planner.plan_rules import (
    answers_meant_as_writes,
    files_to_write,
    never_writes_asked_file,
    unwritten_files,
)
from soothe_planner.testing import ScriptedChatModel

GOAL = "Collect the lines mentioning FIXME and write them to FIXES.md"
CAPS = {"search_text": Capability(name="search_text", kind="tool", read_only=True),
        "write_file": Capability(name="write_file", kind="tool", read_only=False)}
FOUND = "src/a.py:3: # FIXME: close the file\nsrc/b.py:9: # FIXME: handle None"


@pytest.mark.parametrize(("goal", "files"), [
    (GOAL, ["FIXES.md"]),
    ("Put the release date from CHANGES.txt into a file named RELEASE", ["RELEASE"]),
    ("Save a summary of docs/intro.md as notes/summary.md.", ["notes/summary.md"]),
    ("Copy the licence line from README.md into `LICENSE_LINE.txt`", ["LICENSE_LINE.txt"]),
    ("Which setting in config/app.toml sets the timeout?", []),  # a question names files to read
    ("Summarise the FIXME lines in FIXES.md", []),  # "in" names a file to write only with a workspace to look in
    ("Write a short poem about the sea", []),  # nothing named
    ("Search in src/app.py, compare it to lib/app.py and write the result to OUT.md", ["OUT.md"]),
    ("Compare a.py to b.py and save the differences into DIFF.md", ["DIFF.md"]),
])
def test_the_files_a_goal_asks_to_write_are_the_file_names_after_to_into_or_named(goal: str, files: list[str]) -> None:
    assert files_to_write(goal) == files


def test_a_new_file_named_after_in_is_asked_for_only_where_the_workspace_says_it_is_new(tmp_path: Path) -> None:
    """The 1.5B planned "Summarise the TODO lines ... by file in TODO_SUMMARY.md" as a search and an
    answer: nothing read "in" as naming the file to write, so nothing held the plan to the write."""
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "app.py").write_text("# TODO: x\n")
    (tmp_path / "README.md").write_text("# app\n")
    ws = str(tmp_path)
    summary = "Summarise the TODO lines of the workspace by file in TODO_SUMMARY.md"
    assert files_to_write(summary, ws) == ["TODO_SUMMARY.md"]
    assert files_to_write(summary) == []  # no workspace to look in: not read
    # a file the workspace has is read, not written, wherever it sits
    assert files_to_write("Summarise the TODO lines in src/app.py", ws) == []
    assert files_to_write("Summarise the TODO lines in app.py", ws) == []
    assert files_to_write("List the headings in README.md", ws) == []
    # not a file's name, no verb that makes something, or a target named the usual way
    assert files_to_write("List the changes in v2.3.1", ws) == []
    assert files_to_write("List the rows in CSV", ws) == []
    assert files_to_write("Which function in helpers.py parses dates?", ws) == []
    assert files_to_write("Write a hello world in Node.js to hello.js", ws) == ["hello.js"]
    # once the run wrote it, it exists, and it stays asked for as long as a step of the run writes it
    (tmp_path / "TODO_SUMMARY.md").write_text("src/app.py: x\n")
    assert files_to_write(summary, ws) == []
    assert files_to_write(summary, ws, written=["./TODO_SUMMARY.md"]) == ["TODO_SUMMARY.md"]
    # a workspace that cannot be listed: not read
    assert files_to_write(summary, str(tmp_path / "missing")) == []


def test_the_guard_and_the_plan_rules_hold_a_goal_to_the_file_it_names_with_in(tmp_path: Path) -> None:
    goal = "Summarise the FIXME lines by file in FIXES.md"
    decision, acts, results = _plan(write=False)
    ws = str(tmp_path)
    done = StatusAssessment(status="done", goal_progress=1.0, confidence=0.9, summary="")
    a, why = guard_assessment(goal, done, decision, acts, results, plan_finished=True, writers={"write_file"},
                              workspace=ws)
    assert a.status == "replan" and "the goal asks to write FIXES.md, and no completed step wrote it" in why
    assert guard_assessment(goal, done, decision, acts, results, plan_finished=True,
                            writers={"write_file"})[0].status == "done"  # without the workspace, as before
    assert never_writes_asked_file(goal, decision, [], CAPS, ws) != []
    decision, acts, results = _plan(write=True)
    (tmp_path / "FIXES.md").write_text(FOUND)  # what s3 wrote: the file exists now, and is the run's own
    assert never_writes_asked_file(goal, decision, [], CAPS, ws) == []
    assert guard_assessment(goal, done, decision, acts, results, plan_finished=True, writers={"write_file"},
                            workspace=ws) == (done, "")
    failed = PlanStep(id="w1", description="write", tool="write_file", args={"path": "FIXES.md"}, status="failed")
    assert unwritten_files(goal, [], {"write_file"}, workspace=ws, run=[failed]) == ["FIXES.md"]


def _plan(*, write: bool) -> tuple[AgentDecision, list[StepAction], list[StepResult]]:
    acts = [StepAction(id="s1", description="search", tool="search_text", args={"pattern": "FIXME", "path": "."}),
            StepAction(id="s2", description="give the FIXME lines", depends_on=["s1"])]
    results = [StepResult(step_id="s1", success=True, output=FOUND),
               StepResult(step_id="s2", success=True, output=FOUND)]
    if write:
        acts.append(StepAction(id="s3", description="write", tool="write_file", depends_on=["s2"],
                               args={"path": "./FIXES.md", "content": "{{s2.output}}"}))
        results.append(StepResult(step_id="s3", success=True, output="wrote 60 bytes to FIXES.md"))
    return AgentDecision(steps=acts), acts, results


def test_a_plan_that_never_writes_the_asked_file_is_refused_unless_an_earlier_step_wrote_it() -> None:
    decision, _, _ = _plan(write=False)
    problems = never_writes_asked_file(GOAL, decision, [], CAPS)
    assert problems == ['the goal asks to write FIXES.md, and no step writes it: end the plan with the write, '
                        'for example write_file(path="FIXES.md", content=...)']
    assert never_writes_asked_file(GOAL, _plan(write=True)[0], [], CAPS) == []
    # written by a finished step of an earlier plan: a follow-up plan need not write it again
    earlier = PlanStep(id="w1", description="write", tool="write_file", args={"path": "FIXES.md"}, status="completed")
    assert never_writes_asked_file(GOAL, decision, [earlier], CAPS) == []
    # nor by one whose write was blank: the file holds nothing asked for, so the write is still owed
    blank = earlier.model_copy(update={"result": StepResult(step_id="w1", success=True,
                                                            output="wrote 3 bytes to FIXES.md (nothing but whitespace)")})
    assert never_writes_asked_file(GOAL, decision, [blank], CAPS) != []
    # a read of the file is not a write of it
    read = StepAction(id="s3", description="read", tool="search_text", args={"pattern": "x", "path": "FIXES.md"})
    assert never_writes_asked_file(GOAL, AgentDecision(steps=[*decision.steps, read]), [], CAPS) != []


def test_unwritten_files_counts_only_the_writes_that_completed() -> None:
    _, acts, _ = _plan(write=True)
    assert unwritten_files(GOAL, acts, {"write_file"}, done={"s1", "s2", "s3"}) == []
    assert unwritten_files(GOAL, acts, {"write_file"}, done={"s1", "s2"}) == ["FIXES.md"]


def test_the_guard_neither_accepts_nor_vouches_for_done_before_the_asked_file_is_written() -> None:
    decision, acts, results = _plan(write=False)
    done = StatusAssessment(status="done", goal_progress=1.0, confidence=0.9, summary="")
    a, why = guard_assessment(GOAL, done, decision, acts, results, plan_finished=True, writers={"write_file"})
    assert a.status == "replan" and why == "'done' turned into 'replan': the goal asks to write FIXES.md, and no completed step wrote it"
    # the answer's facts all come from the search: without the write check it would be vouched done
    cont = done.model_copy(update={"status": "continue"})
    assert guard_assessment(GOAL, cont, decision, acts, results, plan_finished=True)[0].status == "done"
    assert guard_assessment(GOAL, cont, decision, acts, results, plan_finished=True,
                            writers={"write_file"})[0].status == "continue"
    # written: the same rules as before
    decision, acts, results = _plan(write=True)
    assert guard_assessment(GOAL, done, decision, acts, results, plan_finished=True,
                            writers={"write_file"}) == (done, "")


def test_a_write_of_blank_text_does_not_count_as_writing_the_asked_file(tmp_path: Path) -> None:
    """A 1.5B wrote 400 newlines to DOCS_INDEX.md; the file existed and held none of the names."""
    from soothe_planner.tools import make_builtin_tools

    decision, acts, results = _plan(write=True)
    blank = make_builtin_tools(tmp_path)["write_file"].invoke({"path": "FIXES.md", "content": "\n" * 40})
    results[2] = StepResult(step_id="s3", success=True, output=blank)
    done = StatusAssessment(status="done", goal_progress=1.0, confidence=0.9, summary="")
    a, why = guard_assessment(GOAL, done, decision, acts, results, plan_finished=True, writers={"write_file"})
    assert a.status == "replan" and "the goal asks to write FIXES.md, and no completed step wrote it" in why
    written = make_builtin_tools(tmp_path)["write_file"].invoke({"path": "FIXES.md", "content": FOUND})
    results[2] = StepResult(step_id="s3", success=True, output=written)
    assert guard_assessment(GOAL, done, decision, acts, results, plan_finished=True, writers={"write_file"})[0].status == "done"


async def test_through_the_loop_the_plan_without_the_write_is_re_asked_and_the_file_written(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n# FIXME: close the file\n")
    ctx, executor = tool_context(tmp_path)
    no_write = {"steps": [typed_step("s1", "search_text", {"pattern": "FIXME", "path": "."}),
                          typed_step("s2", "answer", {"task": "give the FIXME lines"}, "s1")]}
    with_write = {"steps": [*no_write["steps"],
                            typed_step("s3", "write_file", {"path": "FIXES.md", "content": "{{s2.output}}"}, "s2")]}
    model = ScriptedChatModel(responses=[no_write, with_write, "src/a.py:2: # FIXME: close the file",
                                         {"status": "done"}])
    final = await run_compact(model, executor, ctx, GOAL, thread_id="t1", max_iterations=2)
    assert final["status"] == "done" and model.remaining == 0
    assert "FIXME: close the file" in (tmp_path / "FIXES.md").read_text()
    reask = model.calls[1].messages[-1].content
    assert "the goal asks to write FIXES.md, and no step writes it" in reask


async def test_through_the_loop_a_goal_naming_its_file_with_in_gets_the_file_written(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n# FIXME: close the file\n")
    ctx, executor = tool_context(tmp_path)
    no_write = {"steps": [typed_step("s1", "search_text", {"pattern": "FIXME", "path": "."}),
                          typed_step("s2", "answer", {"task": "summarise the FIXME lines by file"}, "s1")]}
    with_write = {"steps": [*no_write["steps"],
                            typed_step("s3", "write_file", {"path": "FIXES.md", "content": "{{s2.output}}"}, "s2")]}
    model = ScriptedChatModel(responses=[no_write, with_write, "src/a.py: close the file", {"status": "done"}])
    final = await run_compact(model, executor, ctx, "Summarise the FIXME lines by file in FIXES.md",
                              thread_id="t1", max_iterations=2)
    assert final["status"] == "done" and model.remaining == 0
    assert (tmp_path / "FIXES.md").read_text() == "src/a.py: close the file"
    assert "the goal asks to write FIXES.md, and no step writes it" in model.calls[1].messages[-1].content


def test_a_final_answer_step_that_names_the_asked_file_is_refused_unless_a_write_takes_its_output() -> None:
    """An answer writes no file: "copy the lines ... into FIXES.md" as an answer step leaves FIXES.md as it was."""
    search = StepAction(id="s1", description="search", tool="search_text", args={"pattern": "FIXME", "path": "."})
    meant = StepAction(id="s2", description="copy the FIXME lines into FIXES.md", depends_on=["s1"])
    problems = answers_meant_as_writes(GOAL, AgentDecision(steps=[search, meant]), CAPS)
    assert len(problems) == 1 and problems[0].startswith("s2 is an answer step, and an answer writes no file")
    assert 'write_file(path="FIXES.md", content=...) of s2\'s output' in problems[0]
    # even after an earlier write of the file in the same plan: the answer's text reaches no file
    write = StepAction(id="s3", description="write", tool="write_file", args={"path": "FIXES.md", "content": "{{s1.output}}"},
                       depends_on=["s1"])
    meant_last = meant.model_copy(update={"id": "s4"})
    assert answers_meant_as_writes(GOAL, AgentDecision(steps=[search, write, meant_last]), CAPS) != []
    # written out by a later step, or naming no asked file, or nothing can write: not this rule's business
    write_it = StepAction(id="s3", description="write", tool="write_file", depends_on=["s2"],
                          args={"path": "FIXES.md", "content": "{{s2.output}}"})
    assert answers_meant_as_writes(GOAL, AgentDecision(steps=[search, meant, write_it]), CAPS) == []
    other = meant.model_copy(update={"description": "give the FIXME lines"})
    assert answers_meant_as_writes(GOAL, AgentDecision(steps=[search, other]), CAPS) == []
    assert answers_meant_as_writes(GOAL, AgentDecision(steps=[search, meant]), {"search_text": CAPS["search_text"]}) == []
    assert answers_meant_as_writes("Which lines mention FIXME?", AgentDecision(steps=[search, meant]), CAPS) == []


async def test_through_the_loop_an_answer_meant_as_the_write_is_re_asked_and_its_output_written(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "a.py").write_text("x = 1\n# FIXME: close the file\n")
    ctx, executor = tool_context(tmp_path)
    meant = {"steps": [typed_step("s1", "search_text", {"pattern": "FIXME", "path": "."}),
                       typed_step("s2", "write_file", {"path": "FIXES.md", "content": "{{s1.output}}"}, "s1"),
                       typed_step("s3", "answer", {"task": "copy the FIXME lines into FIXES.md"}, "s2")]}
    written = {"steps": [meant["steps"][0],
                         typed_step("s3", "answer", {"task": "copy the FIXME lines into FIXES.md"}, "s1"),
                         typed_step("s4", "write_file", {"path": "FIXES.md", "content": "{{s3.output}}"}, "s3")]}
    model = ScriptedChatModel(responses=[meant, written, "# FIXME: close the file", {"status": "done"}])
    final = await run_compact(model, executor, ctx, GOAL, thread_id="t1", max_iterations=2)
    assert final["status"] == "done" and model.remaining == 0
    assert (tmp_path / "FIXES.md").read_text() == "# FIXME: close the file"
    assert "s3 is an answer step, and an answer writes no file" in model.calls[1].messages[-1].content


def test_a_plans_writes_of_one_file_run_in_the_plans_order() -> None:
    """A 1.5B re-plan wrote DOCS_LIST.md from a listing and, with no order between them, from a
    search; which write the file kept was chance. Now the later write waits for the earlier one."""
    from soothe_planner.planner.plan_rules import order_writes

    listing = StepAction(id="s1", description="list", tool="list_dir", args={"path": "docs"})
    search = StepAction(id="s3", description="search", tool="search_text", args={"pattern": "architecture"})
    caps = {**CAPS, "list_dir": Capability(name="list_dir", kind="tool", read_only=True)}
    one = StepAction(id="s2", description="write", tool="write_file", args={"path": "DOCS_LIST.md",
                                                                            "content": "{{s1.output}}"}, depends_on=["s1"])
    other = StepAction(id="s4", description="write", tool="write_file", args={"path": "./DOCS_LIST.md",
                                                                              "content": "{{s3.output}}"}, depends_on=["s3"])
    ordered = order_writes(AgentDecision(steps=[listing, one, search, other]), caps)
    assert [s.depends_on for s in ordered.steps] == [[], ["s1"], [], ["s3", "s2"]]
    # a third write waits for the second; one already in order, a read, or another file: unchanged
    third = other.model_copy(update={"id": "s5", "depends_on": []})
    assert order_writes(AgentDecision(steps=[listing, one, search, other, third]), caps).steps[4].depends_on == ["s4"]
    after = other.model_copy(update={"depends_on": ["s3", "s2"]})
    plain = AgentDecision(steps=[listing, one, search, after])
    assert order_writes(plain, caps) == plain
    read = StepAction(id="s5", description="read", tool="search_text", args={"pattern": "x", "path": "DOCS_LIST.md"})
    elsewhere = other.model_copy(update={"args": {"path": "NOTES.md", "content": "{{s3.output}}"}})
    for steps in ([listing, one, read], [listing, one, search, elsewhere]):
        assert order_writes(AgentDecision(steps=steps), caps) == AgentDecision(steps=steps)
    assert order_writes(AgentDecision(steps=[listing, one, search, other]), None).steps[3].depends_on == ["s3"]
    # a JSON plan may list a write before one that depends on it: no cycle is made
    first = one.model_copy(update={"depends_on": ["s4"]})
    backwards = AgentDecision(steps=[first, other.model_copy(update={"depends_on": []})])
    assert order_writes(backwards, caps) == backwards


async def test_through_the_loop_the_later_write_stays_and_the_replaced_one_is_not_shown(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "faq.md").write_text("# FAQ\n")
    ctx, executor = tool_context(tmp_path)
    # the search's write comes first in the plan's text here, so without the order it would finish
    # first: both are tool steps on ready inputs
    plan = {"steps": [typed_step("s1", "list_dir", {"path": "docs"}),
                      typed_step("s2", "search_text", {"pattern": "FAQ", "path": "."}),
                      typed_step("s3", "write_file", {"path": "DOCS_LIST.md", "content": "{{s2.output}}"}, "s2"),
                      typed_step("s4", "write_file", {"path": "DOCS_LIST.md", "content": "{{s1.output}}"}, "s1")]}
    model = ScriptedChatModel(responses=[plan, {"status": "done"}])
    final = await run_compact(model, executor, ctx, "Write the names of the files in docs to DOCS_LIST.md",
                              thread_id="t1", max_iterations=2)
    assert final["status"] == "done"
    assert (tmp_path / "DOCS_LIST.md").read_text() == "faq.md"  # the listing, written last
    evidence = model.calls[1].messages[-1].content
    assert "- s4 write_file" in evidence and "- s3 " not in evidence
