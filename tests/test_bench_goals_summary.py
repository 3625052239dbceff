"""A goal-suite results file's summary: a total without one suite, and a summary rewritten from the file's own runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import goals_report


def _run(n: int, successes: dict[str, int], goals: int = 3) -> dict[str, Any]:
    suites = {}
    for name, ok in successes.items():
        records = [{"id": f"g{i}", "outcome": "success" if i < ok else "failure", "status": "done",
                    "llm_calls": 1, "prompt_tokens": 1, "completion_tokens": 1, "calls_without_usage": 0,
                    "wall_s": 1.0, "violations": []} for i in range(goals)]
        suites[name] = {"goals": records, "totals": goals_report.totals(records)}
    return {"run": n, "complete": True, "suites": suites}


RUNS = [_run(1, {"own": 3, "a": 1, "b": 2}), _run(2, {"own": 0, "a": 2, "b": 2}), _run(3, {"own": 1, "a": 3, "b": 0})]


def test_with_three_suites_or_more_each_total_without_one_suite_is_summarised() -> None:
    summary = goals_report.summarise(RUNS)
    assert summary["total"]["success"] == {"median": 4, "min": 4, "max": 6}  # 6, 4, 4
    without = summary["total_without"]["own"]
    assert without["goals"] == 6 and without["success"] == {"median": 3, "min": 3, "max": 4}  # 3, 4, 3
    assert summary["total_without"]["a"]["success"] == {"median": 2, "min": 1, "max": 5}  # 5, 2, 1
    assert "total_without" not in goals_report.summarise([_run(1, {"a": 1, "b": 2})])


def test_a_results_file_is_summarised_again_from_its_own_runs_only(tmp_path: Path) -> None:
    path = tmp_path / "goals.json"
    path.write_text(json.dumps({"benchmark": "goals", "provenance": {"commit": "abc"}, "runs": RUNS,
                                "summary": {"runs": 3, "stale": True}}))
    summary = goals_report.resummarise(path)
    data = json.loads(path.read_text())
    assert data["summary"] == summary and "stale" not in summary
    assert summary["total_without"]["own"]["success"]["median"] == 3
    assert data["provenance"] == {"commit": "abc"} and data["runs"] == RUNS
    assert data["summary_rewritten"]["from"] == "the file's own runs"
    assert goals_report._cli(["--resummarise"]) == 2
    (tmp_path / "scripted.json").write_text(json.dumps({"actors": {}}))
    with pytest.raises(ValueError, match="no 'runs'"):
        goals_report.resummarise(tmp_path / "scripted.json")
