"""A goal that names a file of the workspace is not done until a step looked in that file.

Regression (the 1.5B, "List the second-level headings in README.md"): the plan listed docs/ and
answered "docs/design.md"; the answer's one fact came from the listing, so the guard took the
model's "done", with README.md never read.
"""

from __future__ import annotations

from pathlib import Path

from soothe_planner.models import AgentDecision, StatusAssessment, StepAction, StepResult
from soothe_planner.planner.grounding import guard_assessment, unread_files

GOAL = "List the second-level headings in README.md."
WRITERS = {"write_file"}
DONE = StatusAssessment(status="done", goal_progress=1.0, confidence=0.9, summary="")


def _workspace(tmp_path: Path) -> str:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "design.md").write_text("# Design\n")
    (tmp_path / "README.md").write_text("# Tally\n\n## Installation\n\n## Usage\n")
    return str(tmp_path)


def _run(tool: str, args: dict[str, object], answer: str) -> tuple[AgentDecision, list[StepAction], list[StepResult]]:
    acts = [StepAction(id="s1", description="look", tool=tool, args=args),
            StepAction(id="s2", description="give the headings", depends_on=["s1"])]
    results = [StepResult(step_id="s1", success=True, output="docs/design.md"),
               StepResult(step_id="s2", success=True, output=answer)]
    return AgentDecision(steps=acts), acts, results


def test_a_done_whose_steps_never_looked_in_the_named_file_is_turned_into_replan(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    decision, acts, results = _run("list_dir", {"path": "docs"}, "docs/design.md")
    assert unread_files(GOAL, acts, results, WRITERS, ws) == ["README.md"]
    a, why = guard_assessment(GOAL, DONE, decision, acts, results, plan_finished=True, writers=WRITERS, workspace=ws)
    assert a.status == "replan"
    assert why == "'done' turned into 'replan': the goal names README.md, and no completed step looked in it"
    # without the workspace to look in, nothing is known of which names are files: as before
    assert guard_assessment(GOAL, DONE, decision, acts, results, plan_finished=True, writers=WRITERS)[0] == DONE


def test_a_step_on_the_file_or_a_folder_above_it_looked_in_it(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    for tool, args in [("read_file", {"path": "README.md"}), ("search_text", {"pattern": "##", "path": "./README.md"}),
                       ("search_text", {"pattern": "##", "path": "."}), ("search_text", {"pattern": "##"})]:
        _, acts, results = _run(tool, args, "Installation, Usage")
        assert unread_files(GOAL, acts, results, WRITERS, ws) == [], (tool, args)
    # a step that failed did not look
    _, acts, results = _run("read_file", {"path": "README.md"}, "Installation, Usage")
    results[0] = StepResult(step_id="s1", success=False, error="boom")
    assert unread_files(GOAL, acts, results, WRITERS, ws) == ["README.md"]
    # an agent with tools of its own looked where it liked: nothing to check
    _, acts, results = _run("list_dir", {"path": "docs"}, "Installation, Usage")
    acts[1] = acts[1].model_copy(update={"tools": ["read_file"]})
    assert unread_files(GOAL, acts, results, WRITERS, ws) == []
    # a folder is not a file in it, nor one file another with the same prefix
    _, acts, results = _run("read_file", {"path": "docs"}, "x")
    assert unread_files("Summarise docs/design.md", acts, results, WRITERS, ws) == []
    _, acts, results = _run("read_file", {"path": "docs/design.md.bak"}, "x")
    assert unread_files("Summarise docs/design.md", acts, results, WRITERS, ws) == ["docs/design.md"]


def test_names_that_are_no_file_of_the_workspace_or_are_the_goals_output_are_not_to_read(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    _, acts, results = _run("list_dir", {"path": "docs"}, "docs/design.md")
    assert unread_files("Which version, e.g. 2.3.1, is in notes.md?", acts, results, WRITERS, ws) == []
    # the file the goal asks to write exists once the run wrote it; it is the output, not an input
    write = StepAction(id="s3", description="write", tool="write_file", args={"path": "README.md", "content": "x"})
    assert unread_files("Write the docs' names to README.md", [*acts, write], results, WRITERS, ws) == []
    assert unread_files("Write the docs' names to OUT.md", acts, results, WRITERS, ws) == []
