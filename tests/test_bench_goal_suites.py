"""The goal-suite benchmark's suites: read strictly (every malformed check or suite is an error
saying where), the visible suites parse, and the workspace rule sees every change but the allowed ones.

No model runs here; the tiny suite lives in ``bench_goals_support.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from bench_goals_support import suite_dir, write_suite

from bench import goals as goals_bench
from bench.goals_scripted import example_matching
from bench.goals_suite import SuiteError, load_suite, snapshot, violations

__all__ = ["suite_dir"]  # a fixture the tests take by name

# --------------------------------------------------------------------------- the workspace rule


def test_snapshots_see_created_changed_and_deleted_files_but_not_the_allowed_ones(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("a")
    (tmp_path / "gone.txt").write_text("b")
    (tmp_path / "same.txt").write_text("c")
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "h").write_text("d")
    before = snapshot(tmp_path)
    (tmp_path / "keep.txt").write_text("a2")
    (tmp_path / "gone.txt").unlink()
    (tmp_path / "same.txt").write_text("c")  # rewritten with the same bytes: no change
    (tmp_path / ".hidden" / "h").write_text("d2")
    (tmp_path / "OUT.md").write_text("allowed")
    (tmp_path / "link").symlink_to("keep.txt")
    found = violations(before, snapshot(tmp_path), frozenset({"OUT.md"}))
    assert [(v.path, v.change) for v in found] == [
        (".hidden/h", "changed"), ("gone.txt", "deleted"), ("keep.txt", "changed"), ("link", "created")
    ]


# --------------------------------------------------------------------------- reading suites


@pytest.mark.parametrize(
    ("checks", "message"),
    [
        ("      - answer_equals: ['x']", "goal 'g': checks[0]: unknown check key 'answer_equals'"),
        ("      - answer_contains: 'x'", "goal 'g': checks[0].answer_contains must be a non-empty list"),
        ("      - file: OUT.md\n        contains: 'x'", "goal 'g': checks[0].contains must be a non-empty list"),
        ("      - file: ../OUT.md", "goal 'g': checks[0].file must stay inside the workspace"),
        ("      - file: /etc/passwd", "goal 'g': checks[0].file must stay inside the workspace"),
        ("      - answer_matches: '(unclosed'", "goal 'g': checks[0].answer_matches: '(unclosed' is not a valid"),
        ("      - answer_contains: ['x']\n        contains: ['y']", "'contains' belongs to a 'file' check"),
        ("      - {answer_contains: ['x'], answer_matches: 'y'}", "must name exactly one check kind"),
        ("      - answer_not_contains: 'x'", "goal 'g': checks[0].answer_not_contains must be a non-empty list"),
        ("      - expect: failed_or_says", "goal 'g': checks[0]: 'expect' needs 'says: REGEX'"),
        ("      - expect: failed\n        says: 'no'", "goal 'g': checks[0].expect must be one of failed_or_says"),
        ("      - expect: failed_or_says\n        says: '(no'", "goal 'g': checks[0].says: '(no' is not a valid"),
        ("      - answer_matches: 'no'\n        says: 'no'", "'says' belongs to a 'expect' check, not to 'answer_matches'"),
        ("      - expect: failed_or_says\n        says: 'no'\n        contains: ['x']", "'contains' belongs to a 'file'"),
        ("      - expect: failed_or_says\n        says: 'no'\n      - file: OUT.md",
         "goal 'g': a goal with 'expect' may have no 'file' check"),
        ("      - expect: failed_or_says\n        says: 'no'\n      - expect: failed_or_says\n        says: 'not'",
         "goal 'g': more than one 'expect' check"),
        ("      - answer_contains: ['port 8443']\n      - answer_not_contains: ['8443']",
         "goal 'g': answer_not_contains ['8443'] is part of a string answer_contains requires"),
    ],
)
def test_a_malformed_check_is_an_error_naming_the_goal_and_the_key(tmp_path: Path, checks: str, message: str) -> None:
    suite = write_suite(tmp_path, f"workspace: ws\ngoals:\n  - id: g\n    goal: do it\n    checks:\n{checks}\n")
    with pytest.raises(SuiteError) as err:
        load_suite(suite)
    assert message in str(err.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("workspace: ws\ngoals:\n  - id: g\n    goal: do it\n", "goal 'g': missing key 'checks'"),
        ("workspace: ws\ngoals:\n  - id: g\n    goal: do it\n    check: []\n", "goal 'g': unknown key 'check'; a goal has id, goal, checks"),
        ("workspace: ws\ngoals:\n  - {id: g, goal: a, checks: []}\n  - {id: g, goal: b, checks: []}\n",
         "goal 'g': the id is used twice"),
        ("workspace: ws\ngoals:\n  - {id: g, checks: []}\n", "goal 'g': 'goal' must be the goal's text"),
        ("workspace: nowhere\ngoals:\n  - {id: g, goal: a, checks: []}\n", "workspace 'nowhere' is not a folder"),
        ("workspace: ws\nname: x\ngoals: []\n", "unknown top-level key 'name'"),
        ("workspace: ws\ngoals: []\n", "'goals' must be a non-empty list"),
        ("workspace: ws\nworkspace: ws\ngoals: []\n", "duplicate"),
    ],
)
def test_a_malformed_suite_is_an_error_saying_where(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(SuiteError) as err:
        load_suite(write_suite(tmp_path, text))
    assert message in str(err.value)


def test_an_unknown_check_key_is_refused_naming_the_key_the_goal_and_every_allowed_key(tmp_path: Path) -> None:
    text = "workspace: ws\ngoals:\n  - id: ok\n    goal: a\n    checks: []\n  - id: late\n    goal: b\n" \
           "    checks:\n      - answer_contains: ['x']\n      - answer_excludes: ['y']\n"
    with pytest.raises(SuiteError) as err:
        load_suite(write_suite(tmp_path, text))
    message = str(err.value)
    assert "goal 'late': checks[1]: unknown check key 'answer_excludes'" in message
    for key in ("answer_contains", "answer_not_contains", "answer_matches", "file", "expect", "'contains'", "'says'"):
        assert key in message


def test_an_unknown_goal_id_is_an_error_listing_the_known_ones(suite_dir: Path) -> None:
    with pytest.raises(SuiteError, match=r"'nope', not in suite 'suite' \(its goals: report, port, owner, conns, channel\)"):
        load_suite(suite_dir).select(["port", "nope"])
    assert [g.id for g in load_suite(suite_dir).select(["owner", "report"])] == ["report", "owner"]


def test_the_suite_of_files_named_with_in_parses_and_its_writing_goals_name_their_files() -> None:
    """Its writing goals name the files they write (a declaration of them is kept), its reading goals none."""
    from soothe_planner.planner.contract import mentions

    suite = load_suite(Path(__file__).parent / "data" / "goal_suites" / "named-with-in")
    written = {p for g in suite.goals for p in g.allowed_paths}
    assert written == {"TODO_SUMMARY.md", "DOCS_LIST.md"}
    for g in suite.goals:
        assert all(mentions(g.text, p) for p in g.allowed_paths), g.id


def test_the_visible_suite_parses() -> None:
    if not goals_bench.DEFAULT_SUITE.is_dir():
        pytest.skip(f"the visible goal suite is not next to this checkout ({goals_bench.DEFAULT_SUITE.name}/ absent)")
    suite = load_suite(goals_bench.DEFAULT_SUITE)
    assert suite.goals and suite.workspace.is_dir()
    assert len({g.id for g in suite.goals}) == len(suite.goals)


@pytest.mark.parametrize(("name", "count"), [("harbor-de", 8), ("ledgerline-es", 6)])
def test_the_probes_in_other_languages_parse_over_the_visible_suites_workspaces(name: str, count: int) -> None:
    if not goals_bench.DEFAULT_SUITE.is_dir():
        pytest.skip("the visible suites, whose workspaces these probes use, are not next to this checkout")
    suite = load_suite(Path(__file__).parent / "data" / "goal_suites" / name)
    assert len({g.id for g in suite.goals}) == len(suite.goals) == count and suite.workspace.is_dir()
    assert suite.workspace.resolve().parent.parent == goals_bench.DEFAULT_SUITE.resolve().parent


@pytest.mark.parametrize(("name", "count"), [("goals-harbor", 18), ("goals-fieldnotes", 18)])
def test_the_new_visible_suites_parse_with_their_new_check_kinds(name: str, count: int) -> None:
    folder = goals_bench.DEFAULT_SUITE.parent / name
    if not folder.is_dir():
        pytest.skip(f"the visible suite {name}/ is not next to this checkout")
    suite = load_suite(folder)
    assert len(suite.goals) == count
    expect = [g for g in suite.goals if g.expect]
    assert expect and all(g.allowed_paths == frozenset() for g in expect)
    kinds = {c.kind for g in suite.goals for c in g.checks}
    assert {"answer_not_contains", "expect"} <= kinds


@pytest.mark.parametrize("pattern", [r"\b4\b", r"v\d+\.\d+", r"(foo|bar)baz", r"[A-Z]{3}-\d{2}", r"^\s*ok$", r"x.y"])
def test_example_matching_finds_a_string_the_pattern_matches(pattern: str) -> None:
    import re

    example = example_matching(pattern)
    assert example is not None and re.search(pattern, example, re.IGNORECASE)
