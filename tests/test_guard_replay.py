"""``bench goals --keep-state`` and ``bench.guard_replay``: the checks before ``done`` replayed over
recorded run ends, set against the goals' own checks.

No model runs here: the scripted actors of ``bench/goals_scripted.py`` run the tiny suite of
``bench_goals_support.py`` through ours, once, and the tests read what they kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_goals_support import CONFIG, GOAL_IDS, write_suite

from bench import goals as goals_bench
from bench import guard_replay
from soothe_planner.deliverable import Deliverable


@pytest.fixture(scope="module")
def kept(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The kept run ends of one scripted run of every actor over the tiny suite, through ours."""
    root = tmp_path_factory.mktemp("replay")
    suite = write_suite(root)
    (root / "unused.json").write_text("[]")
    (root / "bench.yaml").write_text(CONFIG)
    code = goals_bench.main(["--suite", str(suite), "--config", str(root / "bench.yaml"), "--scripted",
                             "--keep-state", str(root / "kept"), "--results-dir", str(root / "results")])
    assert code == 0
    return root


def test_every_goal_of_every_run_leaves_its_end_and_the_results_do_not_carry_it(kept: Path) -> None:
    for actor in ("honest", "liar", "refuser", "inventor", "vandal"):
        names = sorted(p.name for p in (kept / "kept" / actor).iterdir())
        assert names == sorted(f"r1-suite-{g}.json" for g in GOAL_IDS), actor
    end = json.loads((kept / "kept" / "honest" / "r1-suite-report.json").read_text())
    assert end["goal_id"] == "report" and end["outcome"] == "success" and end["status"] == "done"
    assert end["files"] == {"REPORT.md": "alpha"}  # the file the goal's check reads, as the run left it
    assert end["plan_manager"]["dag"] and end["capabilities"]
    liar = json.loads((kept / "kept" / "liar" / "r1-suite-report.json").read_text())
    assert liar["files"] == {"REPORT.md": None}  # said done, never wrote it
    results = (kept / "results" / "goals-ours-suite.scripted.json").read_text()
    assert '"plan_manager"' not in results


def test_each_end_is_set_against_the_goals_own_checks(kept: Path) -> None:
    rows = {r.name: r for r in guard_replay.replay([kept / "kept"])}
    assert len(rows) == 5 * len(GOAL_IDS)
    for goal in GOAL_IDS:
        honest, liar = rows[f"honest/r1-suite-{goal}.json"], rows[f"liar/r1-suite-{goal}.json"]
        assert (honest.recorded, honest.truth) == ("success", "right"), goal
        assert (liar.recorded, liar.truth) == ("false_success", "wrong"), goal
    # the scripted config has no small-model rules and declares no deliverable: nothing refuses the
    # liar's done, and the replay says so rather than hiding it
    assert rows["liar/r1-suite-report.json"].done_stands


def test_a_declared_file_the_run_never_wrote_is_refused_and_one_it_wrote_stands(kept: Path, tmp_path: Path) -> None:
    declared = Deliverable(kind="file", files=["REPORT.md"]).model_dump(mode="json")
    for actor in ("liar", "honest"):
        end = json.loads((kept / "kept" / actor / "r1-suite-report.json").read_text())
        end["plan_manager"]["deliverable"] = declared
        (tmp_path / f"{actor}.json").write_text(json.dumps(end))
    rows = {r.name: r for r in guard_replay.replay([tmp_path])}
    liar, honest = rows["liar.json"], rows["honest.json"]
    assert not liar.done_stands and "REPORT.md" in liar.why_refused and liar.truth == "wrong"
    assert honest.done_stands and honest.why_refused == "" and honest.truth == "right"


def test_a_kept_file_outside_the_workspace_is_an_error_naming_it(kept: Path, tmp_path: Path) -> None:
    end = json.loads((kept / "kept" / "honest" / "r1-suite-report.json").read_text())
    end["files"] = {"../escape.md": "x"}
    with pytest.raises(ValueError, match=r"'\.\./escape\.md' is outside the workspace"):
        guard_replay.replay_one(end, "bad.json")


def test_the_command_prints_the_table_and_refuses_a_missing_folder(
    kept: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert guard_replay.main([str(kept / "kept" / "liar"), "--list", "2"]) == 0
    out = capsys.readouterr().out
    assert f"{len(GOAL_IDS)} run ends replayed" in out
    assert "| wrong | 5 | 5 | 0 | 0 |" in out  # every liar end is wrong, and nothing here refuses it
    assert out.count("(recorded false_success)") == 2  # --list 2
    with pytest.raises(SystemExit) as exc:
        guard_replay.main([str(tmp_path / "nowhere")])
    assert exc.value.code == 2
    assert "not a folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        guard_replay.main([str(kept / "kept"), "--write", "../out"])
    assert "--write must be" in capsys.readouterr().err


def test_written_results_carry_the_counts_rows_and_provenance_but_no_path(kept: Path, tmp_path: Path) -> None:
    assert guard_replay.main([str(kept / "kept" / "honest"), "--write", "replay-honest",
                              "--results-dir", str(tmp_path)]) == 0
    data = json.loads((tmp_path / "replay-honest.json").read_text())
    assert data["counts"]["right"]["ends"] == len(GOAL_IDS) and data["counts"]["wrong"]["ends"] == 0
    assert len(data["rows"]) == len(GOAL_IDS) and data["kept"] == ["honest"]
    assert data["provenance"]["commit"]
    assert str(kept) not in json.dumps(data)  # the kept folders are named, never located
