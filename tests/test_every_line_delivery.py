"""What an "every line" goal delivered: each line its search found must reach the write or the answer.

The guard's delivery check (``planner/grounding.py``, ``unrelayed_lines``) on hand-built runs, then
through the real loop on the real tools with a scripted model: a report missing lines never ends
the run done; a report that holds them all does.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from planner_support import run_compact, tool_context, typed_step

from soothe_planner.models import AgentDecision, StatusAssessment, StepAction, StepResult
from soothe_planner.planner.grounding import (
    guard_assessment,
    guard_reasons,
    relayed_every_line,
    unrelayed_lines,
)
from soothe_planner.testing import ScriptedChatModel

EVERY = "Find every line containing TODO in the workspace and write those lines to TODO_REPORT.md"
FOUND = ("src/notes.py:11: # TODO: reject empty notes\n"
         "src/notes.py:16: # TODO: make the search case-insensitive\n"
         "README.md:8: TODO: explain how to run the tests.")


def _relay(answer: str, *, search_output: str = FOUND, content: str = "{{s2.output}}"
           ) -> tuple[AgentDecision, list[StepAction], list[StepResult]]:
    acts = [StepAction(id="s1", description="search", tool="search_text", args={"pattern": "TODO", "path": "."}),
            StepAction(id="s2", description="give the TODO lines", depends_on=["s1"]),
            StepAction(id="s3", description="write", tool="write_file", depends_on=["s2"],
                       args={"path": "TODO_REPORT.md", "content": content})]
    results = [StepResult(step_id="s1", success=True, output=search_output),
               StepResult(step_id="s2", success=True, output=answer),
               StepResult(step_id="s3", success=True, output="wrote 20 bytes to TODO_REPORT.md")]
    return AgentDecision(steps=acts), acts, results


def test_an_every_line_goal_is_checked_for_each_line_the_search_found_reaching_the_write() -> None:
    """Regression (README's goal, 1.5B): search → answer → write passed on one of the lines; 'done'."""
    dropped = unrelayed_lines(EVERY, *_relay("src/notes.py: TODO: reject empty notes"))
    assert dropped is not None and (dropped.delivered_by, dropped.found) == ("s3", 3)
    assert dropped.missing == ["src/notes.py:16: # TODO: make the search case-insensitive",
                               "README.md:8: TODO: explain how to run the tests."]
    assert "delivered 1 of the 3 lines s1 found" in dropped.why()
    # every line delivered, reformatted (grouped by file, comment marks and case aside): nothing dropped
    grouped = ("## src/notes.py\n- Reject empty notes\n- make the search  case-insensitive\n"
               "## README.md\n- explain how to run the tests.")
    assert unrelayed_lines(EVERY, *_relay(grouped)) is None
    # the search's own output written straight away holds every line
    decision, acts, results = _relay("", content="{{s1.output}}")
    assert unrelayed_lines(EVERY, decision, acts, results) is None
    # a reworded line is not the line
    assert unrelayed_lines(EVERY, *_relay(grouped.replace("Reject empty notes", "Disallow empty notes"))) is not None


@pytest.mark.parametrize("goal", ["Summarise the TODO lines by file in TODO_REPORT.md",
                                  "Which file has the most TODO lines? Write it to TODO_REPORT.md",
                                  "Count all files whose lines contain TODO"])
def test_a_goal_that_does_not_ask_for_every_line_may_deliver_some(goal: str) -> None:
    assert unrelayed_lines(goal, *_relay("src/notes.py: reject empty notes")) is None


def test_what_cannot_be_checked_is_not_called_dropped() -> None:
    # a search with no exact match lists candidate lines, which the answer may rightly leave out
    fuzzy = FOUND + "\n(no line contains 'TODO' exactly; these lines hold the most of its words: todo)"
    assert unrelayed_lines(EVERY, *_relay("none", search_output=fuzzy)) is None
    # a field of a structured output cannot be resolved here
    decision, acts, results = _relay("x", content="{{s2.output.text}}")
    assert unrelayed_lines(EVERY, decision, acts, results) is None
    # a dependency the steps given do not hold (a partial view of the goal's DAG) is passed over
    lone = [StepAction(id="s2", description="answer", depends_on=["gone"])]
    assert unrelayed_lines(EVERY, AgentDecision(steps=lone), lone,
                           [StepResult(step_id="s2", success=True, output="x")]) is None
    # a final answer (no write) is the delivery when the plan ends in a model step
    decision, acts, results = _relay("reject empty notes")
    decision = AgentDecision(steps=decision.steps[:2])
    dropped = unrelayed_lines(EVERY, decision, acts[:2], results[:2])
    assert dropped is not None and dropped.delivered_by == "s2" and len(dropped.missing) == 2


def test_a_done_over_a_delivery_missing_lines_becomes_replan_and_a_continue_is_not_vouched_for() -> None:
    done = StatusAssessment(status="done", goal_progress=1.0, confidence=0.9, summary="written")
    decision, acts, results = _relay("src/notes.py: TODO: reject empty notes")
    got, why = guard_assessment(EVERY, done, decision, acts, results, plan_finished=True)
    assert got.status == "replan" and "delivered 1 of the 3 lines" in why and "delivered 1 of the 3" in got.summary
    cont = done.model_copy(update={"status": "continue"})
    assert guard_assessment(EVERY, cont, decision, acts, results, plan_finished=True)[0].status == "continue"
    # the same plan delivering every line: the done stands, and a continue over it is read as done
    decision, acts, results = _relay("src/notes.py: reject empty notes\nsrc/notes.py: make the search "
                                     "case-insensitive\nREADME.md: explain how to run the tests.")
    assert guard_assessment(EVERY, done, decision, acts, results, plan_finished=True) == (done, "")
    assert guard_assessment(EVERY, cont, decision, acts, results, plan_finished=True)[0].status == "done"


async def test_a_report_missing_lines_never_ends_an_every_line_run_done(tmp_path: Path) -> None:
    """The README's goal end to end on the real tools: one line of three written is not done."""
    (tmp_path / "notes.py").write_text("x = 1  # TODO: reject empty notes\n# TODO: case-insensitive search\n")
    (tmp_path / "README.md").write_text("TODO: explain the tests\n")
    ctx, executor = tool_context(tmp_path)
    plan = {"steps": [typed_step("s1", "search_text", {"pattern": "TODO", "path": "."}),
                      typed_step("s2", "answer", {"task": "give the TODO lines"}, "s1"),
                      typed_step("s3", "write_file", {"path": "TODO_REPORT.md", "content": "{{s2.output}}"}, "s2")]}
    done = {"status": "done"}
    model = ScriptedChatModel(responses=[plan, "TODO: reject empty notes", done] * 2)
    out = await run_compact(model, executor, ctx, EVERY, thread_id="t1", max_iterations=2)
    assert out["status"] == "failed" and "max_iterations" in (out.get("error") or "")
    # the same run whose answer passes every line on ends done
    whole = "notes.py: reject empty notes; case-insensitive search\nREADME.md: explain the tests"
    model = ScriptedChatModel(responses=[plan, whole, done])
    out = await run_compact(model, executor, ctx, EVERY, thread_id="t2", max_iterations=2)
    assert out["status"] == "done" and model.remaining == 0
    assert (tmp_path / "TODO_REPORT.md").read_text() == whole


def test_a_search_for_the_goals_word_counts_even_when_the_write_was_fed_something_else() -> None:
    """Regression (README's goal, 1.5B, plans in calls): the re-plan searched TODO, listed the
    folder, and wrote the listing to the report; the search was not upstream of the write."""
    acts = [StepAction(id="s1", description="search", tool="search_text", args={"pattern": "TODO", "path": "."}),
            StepAction(id="s2", description="list", tool="list_dir", args={"path": "."}),
            StepAction(id="s3", description="write", tool="write_file", depends_on=["s2"],
                       args={"path": "TODO_REPORT.md", "content": "{{s2.output}}"})]
    results = [StepResult(step_id="s1", success=True, output=FOUND),
               StepResult(step_id="s2", success=True, output="README.md\nsrc/notes.py"),
               StepResult(step_id="s3", success=True, output="wrote 22 bytes to TODO_REPORT.md")]
    dropped = unrelayed_lines(EVERY, AgentDecision(steps=acts), acts, results, writers={"write_file"})
    assert dropped is not None and (dropped.delivered_by, dropped.search_ids, dropped.found) == ("s3", ["s1"], 3)
    # the guard passes the writers: its 'done' becomes 'replan'
    done = StatusAssessment(status="done", goal_progress=1.0, confidence=0.9, summary="")
    a, _ = guard_assessment(EVERY, done, AgentDecision(steps=acts), acts, results, plan_finished=True,
                            writers={"write_file"})
    assert a.status == "replan"
    # not knowing which tools write, only the searches upstream count (as before)
    assert unrelayed_lines(EVERY, AgentDecision(steps=acts), acts, results) is None
    # a search for a word the goal does not name, beside the delivery, is not the goal's search
    other = [a.model_copy(update={"args": {"pattern": "FIXME", "path": "."}}) if a.id == "s1" else a for a in acts]
    assert unrelayed_lines(EVERY, AgentDecision(steps=other), other, results, writers={"write_file"}) is None


def test_a_dropped_delivery_names_the_write_that_keeps_every_line_in_the_plans_syntax() -> None:
    """Regression (README's goal, 1.5B, plans in calls): told only that s1's output held every line,
    the model re-planned the lossy answer step or wrote a listing; shown the write, it wrote s1."""
    dropped = unrelayed_lines(EVERY, *_relay("src/notes.py: TODO: reject empty notes"), writers={"write_file"})
    assert dropped is not None and (dropped.holders, dropped.path) == (("s1",), "TODO_REPORT.md")
    assert dropped.remedy(calls=True) == 'write_file(path="TODO_REPORT.md", content=s1)'
    assert json.loads(dropped.remedy(calls=False)) == {
        "tool": "write_file", "args": {"path": "TODO_REPORT.md", "content": "{{s1.output}}"}}
    assert "s1's output itself holds them" in dropped.why()
    # an answer that dropped lines is no write: nothing to name
    decision, acts, results = _relay("reject empty notes")
    answer_only = unrelayed_lines(EVERY, AgentDecision(steps=decision.steps[:2]), acts[:2], results[:2])
    assert answer_only is not None and answer_only.remedy(calls=True) == ""


def test_a_search_run_again_is_counted_once_and_two_searches_are_both_named() -> None:
    acts = [StepAction(id="s1", description="search", tool="search_text", args={"pattern": "TODO", "path": "."}),
            StepAction(id="s1.2", description="search", tool="search_text", args={"pattern": "TODO", "path": "."}),
            StepAction(id="s4", description="search", tool="search_text", args={"pattern": "FIXME", "path": "."}),
            StepAction(id="s5", description="write", tool="write_file", depends_on=["s1.2", "s4"],
                       args={"path": "R.md", "content": "nothing"})]
    results = [StepResult(step_id="s1", success=True, output=FOUND),
               StepResult(step_id="s1.2", success=True, output=FOUND),
               StepResult(step_id="s4", success=True, output="a.py:1: # FIXME: the date"),
               StepResult(step_id="s5", success=True, output="wrote 7 bytes to R.md")]
    goal = "Write every line containing TODO or FIXME to R.md"
    dropped = unrelayed_lines(goal, AgentDecision(steps=acts[1:]), acts, results, writers={"write_file"})
    assert dropped is not None and (dropped.found, len(dropped.missing)) == (4, 4)  # 3 TODO lines once, 1 FIXME
    assert dropped.holders == ("s1.2", "s4")
    assert dropped.remedy(calls=True) == 'write_file(path="R.md", content=f"{s1.2}\\n{s4}")'
    assert json.loads(dropped.remedy(calls=False))["args"]["content"] == "{{s1.2.output}}\n{{s4.output}}"


@pytest.mark.parametrize(("summary", "reasons"), [
    ("[guard: the answer in s2 states '2001', found in no tool output] ", ["the answer in s2 states '2001', found in no tool output"]),
    ("[guard: left out: '- [ ] TODO publish'; s1 holds them] the model's words", ["left out: '- [ ] TODO publish'; s1 holds them"]),
    ("[guard: a] [guard: b]", ["a", "b"]),
    ("nothing to assess yet (no evidence and no plan)", []),  # the loop's own note is no check's reason
    ("[guard: an unclosed [ note", []),
])
def test_the_checks_reasons_are_read_back_from_an_assessment(summary: str, reasons: list[str]) -> None:
    a = StatusAssessment(status="replan", goal_progress=0.5, confidence=0.5, summary=summary)
    assert guard_reasons(a) == reasons
    assert guard_reasons(a.model_copy(update={"status": "done"})) == []


async def test_a_replan_after_lines_were_dropped_is_told_why_and_shown_the_write(tmp_path: Path) -> None:
    """Through the loop with a compact planner: the re-plan's prompt carries the check's reason and
    the write that keeps every line; the first plan's prompt carries neither."""
    (tmp_path / "notes.py").write_text("x = 1  # TODO: reject empty notes\n# TODO: case-insensitive search\n")
    ctx, executor = tool_context(tmp_path)
    plan = {"steps": [typed_step("s1", "search_text", {"pattern": "TODO", "path": "."}),
                      typed_step("s2", "answer", {"task": "give the TODO lines"}, "s1"),
                      typed_step("s3", "write_file", {"path": "TODO_REPORT.md", "content": "{{s2.output}}"}, "s2")]}
    direct = {"steps": [typed_step("s4", "write_file", {"path": "TODO_REPORT.md", "content": "{{s1.output}}"}, "s1")]}
    # "continue" over the report missing a line: no check overrides it, and the re-plan is told all the same
    model = ScriptedChatModel(responses=[plan, "TODO: reject empty notes", {"status": "continue"}, direct,
                                         {"status": "done"}])
    out = await run_compact(model, executor, ctx, EVERY, thread_id="t1", max_iterations=3)
    assert out["status"] == "done" and model.remaining == 0
    plans = [c.prompt_text for c in model.calls if "Write the plan" in c.prompt_text]
    assert len(plans) == 2 and "Not done yet" not in plans[0]
    assert "Not done yet: the goal asks for every line, and s3 delivered 1 of the 2 lines" in plans[1]
    assert '"content": "{{s1.output}}"' in plans[1].split("Not done yet")[1]
    assert (tmp_path / "TODO_REPORT.md").read_text().count("TODO") == 2


def _written(search: dict[str, object], *, path: str = "TODO_REPORT.md", output: str = FOUND
             ) -> tuple[AgentDecision, list[StepAction], list[StepResult]]:
    acts = [StepAction(id="s1", description="search", tool="search_text", args=search),
            StepAction(id="s2", description="write", tool="write_file", depends_on=["s1"],
                       args={"path": path, "content": "{{s1.output}}"})]
    results = [StepResult(step_id="s1", success=True, output=output),
               StepResult(step_id="s2", success=True, output=f"wrote 90 bytes to {path}")]
    return AgentDecision(steps=acts), acts, results


def test_a_write_of_every_line_its_search_found_is_vouched_for_only_where_the_check_saw_the_whole_goal() -> None:
    """Regression (README's goal, 1.5B, plans in calls): a re-plan wrote s1's output, every line, and
    the model said 'continue' over it (a near-tie: renaming the write s4 → s2 in its evidence gave 'done')."""
    everywhere = {"pattern": "TODO", "path": "."}
    assert relayed_every_line(EVERY, *_written(everywhere), writers={"write_file"}) == ("s2", 3)
    cont = StatusAssessment(status="continue", goal_progress=0.5, confidence=0.5, summary="")
    a, why = guard_assessment(EVERY, cont, *_written(everywhere), plan_finished=True, writers={"write_file"})
    assert a.status == "done" and "s2 wrote every one of the 3 lines" in why and guard_reasons(a) == []
    # not finished, or not knowing which tools write: no vouching
    assert guard_assessment(EVERY, cont, *_written(everywhere), plan_finished=False, writers={"write_file"})[0] == cont
    assert relayed_every_line(EVERY, *_written(everywhere), writers=None) is None
    for search, kwargs in [
        ({"pattern": "TODO", "path": "src"}, {}),  # a part of the workspace the goal does not name
        ({"pattern": "TODO", "path": "k"}, {}),  # a folder whose name is only letters of the goal
        ({"pattern": "TODO", "path": "."}, {"output": FOUND + "\n... (stopped at 50 matches)"}),  # cut at its limit
        ({"pattern": "TODO|FIXME", "path": ".", "regex": True}, {}),  # a regular expression
        ({"pattern": "FIXME", "path": "."}, {}),  # a word the goal does not name
        ({"pattern": "TODO", "path": "."}, {"path": "NOTES.md"}),  # a file the goal does not name
        ({"pattern": "TODO", "path": "."}, {"output": "no matches for 'TODO'"}),  # no line found
    ]:
        got = relayed_every_line(EVERY, *_written(search, **kwargs), writers={"write_file"})  # type: ignore[arg-type]
        assert got is None, (search, kwargs)
    # a folder the goal names counts as the whole of what it asks
    goal = "Find every line containing TODO in src and write those lines to TODO_REPORT.md"
    assert relayed_every_line(goal, *_written({"pattern": "TODO", "path": "src/"}), writers={"write_file"}) == ("s2", 3)
    # a delivery missing lines is never vouched for
    assert relayed_every_line(EVERY, *_relay("reject empty notes"), writers={"write_file"}) is None


async def test_a_replan_the_model_keeps_failing_gets_the_write_the_check_prescribes(tmp_path: Path) -> None:
    """Regression (README's goal, 1.5B, plans in calls): shown the write of s1's output, the model
    wrote its lossy plan again on every re-ask and the run failed with every line in hand."""
    (tmp_path / "notes.py").write_text("x = 1  # TODO: reject empty notes\n# TODO: case-insensitive search\n")
    ctx, executor = tool_context(tmp_path)
    plan = {"steps": [typed_step("s1", "search_text", {"pattern": "TODO", "path": "."}),
                      typed_step("s2", "answer", {"task": "give the TODO lines"}, "s1"),
                      typed_step("s3", "write_file", {"path": "TODO_REPORT.md", "content": "{{s2.output}}"}, "s2")]}
    refused = {"steps": [typed_step("s9", "write_file", {"path": "OTHER.md", "content": "x"})]}  # a file not asked for
    model = ScriptedChatModel(responses=[plan, "TODO: reject empty notes", {"status": "continue"},
                                         refused, refused, refused, {"status": "continue"}])
    out = await run_compact(model, executor, ctx, EVERY, thread_id="t1", max_iterations=3)
    assert out["status"] == "done" and model.remaining == 0
    report = (tmp_path / "TODO_REPORT.md").read_text()  # the search's own lines, as it found them
    assert report.splitlines() == ["notes.py:1: x = 1  # TODO: reject empty notes", "notes.py:2: # TODO: case-insensitive search"]
    assert not (tmp_path / "OTHER.md").exists()
    # the last assessment saw the search the planned write copied, not the write alone
    last = model.calls[-1].prompt_text
    assert "- s1 search_text" in last
    assert "- s4 write_file\n  output: wrote 89 bytes to TODO_REPORT.md: the whole output of s1" in last
    # a re-plan the model was never heard on (the wire failed) is no refusal: the run fails, nothing planned for it
    (tmp_path / "TODO_REPORT.md").unlink()
    model = ScriptedChatModel(responses=[plan, "TODO: reject empty notes", {"status": "continue"},
                                         *[httpx.ConnectError("refused")] * 8])
    out = await run_compact(model, executor, ctx, EVERY, thread_id="t3", max_iterations=3)
    assert out["status"] == "failed" and "ConnectError" in (out.get("error") or "")
    assert (tmp_path / "TODO_REPORT.md").read_text() == "TODO: reject empty notes"
    # the same run whose re-plans the model gets right never needs it
    direct = {"steps": [typed_step("s4", "write_file", {"path": "TODO_REPORT.md", "content": "{{s1.output}}"}, "s1")]}
    model = ScriptedChatModel(responses=[plan, "TODO: reject empty notes", {"status": "continue"}, direct,
                                         {"status": "done"}])
    out = await run_compact(model, executor, ctx, EVERY, thread_id="t2", max_iterations=3)
    assert out["status"] == "done" and model.remaining == 0
