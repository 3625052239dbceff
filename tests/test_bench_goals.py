"""The goal-suite benchmark's harness: suites read strictly, runs scored honestly, repeats summarised.

No model runs here. Runs are scripted (``ScriptedChatModel`` through the real ReAct strategy, or
the scripted actors of ``bench/goals_scripted.py`` through every strategy) on a tiny suite
written in each test — with every check kind, an ``expect`` goal among them — so each verdict
below is known in advance and the harness must reach it. The spread over repeats is tested on
synthetic records too, so its arithmetic is checked apart from any run.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from bench_goals_support import CONFIG, GOAL_IDS, config_path, run_one, suite_dir, write_call, write_suite
from langchain_core.messages import AIMessage

from bench import goals as goals_bench
from bench.goals_scripted import EXTRA_FILE
from bench.goals_strategies import STRATEGIES, unavailable
from bench.goals_suite import CheckResult, Violation, judge, load_suite
from soothe_planner.config import load_config
from soothe_planner.testing import FunctionChatModel, ScriptedChatModel

__all__ = ["config_path", "suite_dir"]  # fixtures the tests take by name

# --------------------------------------------------------------------------- verdicts


def test_a_run_that_writes_the_right_file_is_a_success(suite_dir: Path, config_path: Path) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[write_call("REPORT.md", "ALPHA and more")]), "Written."])
    record = run_one(suite_dir, config_path, "report", model)
    assert record["outcome"] == "success", record
    assert record["violations"] == []
    assert not (suite_dir / "ws" / "REPORT.md").exists()  # the run wrote into its copy only


def test_a_run_that_says_done_without_writing_the_file_is_a_false_success(suite_dir: Path, config_path: Path) -> None:
    record = run_one(suite_dir, config_path, "report", ScriptedChatModel(["Done: REPORT.md holds alpha."]))
    assert record["status"] == "done"
    assert record["outcome"] == "false_success"
    assert "REPORT.md" in record["reason"] and "does not exist" in record["reason"]


def test_a_file_without_the_required_text_is_a_false_success(suite_dir: Path, config_path: Path) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[write_call("REPORT.md", "beta")]), "Written."])
    record = run_one(suite_dir, config_path, "report", model)
    assert record["outcome"] == "false_success"
    assert "missing ['alpha']" in record["reason"]


def test_an_extra_file_is_a_workspace_violation_and_never_a_success(suite_dir: Path, config_path: Path) -> None:
    calls = [write_call("REPORT.md", "alpha"), write_call("notes.txt", "overwritten", 1),
             write_call("docs/new.md", "x", 2)]
    record = run_one(suite_dir, config_path, "report", ScriptedChatModel([AIMessage("", tool_calls=calls), "Done."]))
    assert record["outcome"] == "false_success"
    assert record["violations"] == [{"path": "docs/new.md", "change": "created"},
                                    {"path": "notes.txt", "change": "changed"}]
    assert (suite_dir / "ws" / "notes.txt").read_text().startswith("port 8443")


@pytest.mark.parametrize(
    ("goal_id", "answer", "outcome"),
    [
        ("port", "The server listens on 8443.", "success"),
        ("port", "The server listens on 84430.", "false_success"),
        ("owner", "It belongs to PRIYA RAMAN.", "success"),
        ("owner", "It belongs to Priya.", "false_success"),
    ],
)
def test_answer_checks_pass_and_fail_as_they_should(
    suite_dir: Path, config_path: Path, goal_id: str, answer: str, outcome: str
) -> None:
    record = run_one(suite_dir, config_path, goal_id, ScriptedChatModel([answer]))
    assert record["outcome"] == outcome, record
    assert record["answer"] == answer


@pytest.mark.parametrize(
    ("answer", "outcome", "reason"),
    [
        ("About 20 of them.", "success", ""),
        ("20 in production, 512 in the tests.", "false_success", "holds ['512']"),
        ("20, or 512", "false_success", "answer does not contain ['512']: holds ['512']"),
        ("Twelve.", "false_success", "no match in the answer"),
    ],
)
def test_answer_not_contains_fails_a_done_answer_holding_a_forbidden_string(
    suite_dir: Path, config_path: Path, answer: str, outcome: str, reason: str
) -> None:
    record = run_one(suite_dir, config_path, "conns", ScriptedChatModel([answer]))
    assert record["outcome"] == outcome, record
    assert reason in record["reason"]


def test_an_expect_goal_that_ends_failed_is_a_success(suite_dir: Path, config_path: Path) -> None:
    record = run_one(suite_dir, config_path, "channel", ScriptedChatModel([""]))  # the agent gives no answer
    assert (record["status"], record["raised"]) == ("failed", False)
    assert record["outcome"] == "success", record
    assert record["reason"].startswith("ended failed, as an expect goal may (the agent ended without a final answer")


@pytest.mark.parametrize(
    ("answer", "outcome", "reason"),
    [
        ("There is no channel named anywhere in the workspace.", "success", ""),
        ("The alerts channel isn't configured here.", "success", ""),
        ("The alerts go to #ops-alerts.", "false_success", "answer says"),  # an invented value
        ("#OPS-ALERTS, though it is not written anywhere.", "false_success", "holds ['#ops-alerts']"),
    ],
)
def test_an_expect_goal_that_ends_done_must_say_so_and_pass_its_other_answer_checks(
    suite_dir: Path, config_path: Path, answer: str, outcome: str, reason: str
) -> None:
    record = run_one(suite_dir, config_path, "channel", ScriptedChatModel([answer]))
    assert record["status"] == "done"
    assert record["outcome"] == outcome, record
    assert reason in record["reason"]


def test_an_expect_goal_that_ends_failed_after_writing_a_file_is_a_failure(suite_dir: Path, config_path: Path) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[write_call("CHANNEL.md", "none")]), ""])
    record = run_one(suite_dir, config_path, "channel", model)
    assert record["status"] == "failed"
    assert record["outcome"] == "failure"
    assert "workspace: CHANNEL.md created" in record["reason"]


def test_an_expect_goal_that_ends_done_after_writing_a_file_is_a_false_success(suite_dir: Path, config_path: Path) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[write_call("CHANNEL.md", "none")]), "There is none."])
    record = run_one(suite_dir, config_path, "channel", model)
    assert record["outcome"] == "false_success"
    assert record["violations"] == [{"path": "CHANNEL.md", "change": "created"}]


def test_an_expect_goal_whose_run_raised_or_timed_out_is_a_failure(suite_dir: Path, config_path: Path) -> None:
    def broken(call: Any) -> str:
        raise RuntimeError("the model server went away")

    async def slow(call: Any) -> str:
        await asyncio.sleep(30)
        return "There is none."

    raised = run_one(suite_dir, config_path, "channel", FunctionChatModel(broken))
    assert (raised["status"], raised["raised"], raised["outcome"]) == ("failed", True, "failure")
    assert "the model server went away" in raised["reason"]
    late = run_one(suite_dir, config_path, "channel", FunctionChatModel(slow), max_seconds=0.5)
    assert (late["status"], late["outcome"], late["reason"]) == ("timeout", "failure", "timeout")


@pytest.mark.parametrize(
    ("status", "expect", "raised", "passed", "broken", "outcome"),
    [
        ("done", False, False, True, False, "success"),
        ("done", False, False, False, False, "false_success"),
        ("done", False, False, True, True, "false_success"),
        ("failed", False, False, True, False, "failure"),
        ("failed", False, False, True, True, "failure"),
        ("done", True, False, True, False, "success"),
        ("done", True, False, False, False, "false_success"),
        ("done", True, False, True, True, "false_success"),
        ("failed", True, False, False, False, "success"),  # the correct failed, whatever the answer
        ("failed", True, False, False, True, "failure"),  # but not after touching the workspace
        ("failed", True, True, False, False, "failure"),  # a crash is no refusal
        ("timeout", True, False, False, False, "failure"),
    ],
)
def test_judge_follows_the_outcome_rules(status: str, expect: bool, raised: bool, passed: bool, broken: bool,
                                          outcome: str) -> None:
    checks = [CheckResult("answer says /no/i", passed, "" if passed else "no match in the answer")]
    changed = [Violation("x.md", "created")] if broken else []
    verdict = judge(status, "stopped" if status != "done" else None, checks, changed, expect=expect, raised=raised)
    assert verdict.outcome == outcome


def test_a_goal_over_max_seconds_is_a_failure_with_reason_timeout(suite_dir: Path, config_path: Path) -> None:
    async def slow(call: Any) -> str:
        await asyncio.sleep(30)
        return "The server listens on 8443."

    record = run_one(suite_dir, config_path, "port", FunctionChatModel(slow), max_seconds=0.5)
    assert record["outcome"] == "failure"
    assert record["reason"] == "timeout"
    assert record["wall_s"] < 10


def test_a_run_that_fails_is_a_failure_and_its_checks_are_still_recorded(suite_dir: Path, config_path: Path) -> None:
    record = run_one(suite_dir, config_path, "port", ScriptedChatModel([""]))
    assert record["outcome"] == "failure"
    assert "without a final answer" in record["reason"]
    assert record["checks"] and record["checks"][0]["passed"] is False


def test_the_shared_call_budget_binds_the_baselines_too(suite_dir: Path, config_path: Path) -> None:
    config_path.write_text(CONFIG.replace("max_total_llm_calls: 20", "max_total_llm_calls: 1"))
    model = ScriptedChatModel([AIMessage("", tool_calls=[write_call("REPORT.md", "alpha")]), "Written."])
    record = run_one(suite_dir, config_path, "report", model)
    assert record["outcome"] == "failure"
    assert "LLMBudgetExceeded" in record["reason"]
    assert record["llm_calls"] == 1  # the refused call never reached the model


def test_calls_and_tokens_come_from_the_replies_usage(suite_dir: Path, config_path: Path) -> None:
    model = ScriptedChatModel([AIMessage("", tool_calls=[write_call("REPORT.md", "alpha")]), "Written."])
    record = run_one(suite_dir, config_path, "report", model)
    assert record["llm_calls"] == record["limiter_llm_calls"] == len(model.calls) == 2
    assert record["calls_without_usage"] == 0
    assert record["prompt_tokens"] > 0 and record["completion_tokens"] > 0


def test_every_goal_gets_a_fresh_copy_of_the_workspace(suite_dir: Path, config_path: Path) -> None:
    suite = load_suite(suite_dir)
    config = load_config(config_path)
    writer = ScriptedChatModel([AIMessage("", tool_calls=[write_call("REPORT.md", "alpha")]), "Written.",
                                "Done: REPORT.md holds alpha."])

    async def both() -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        report = suite.select(["report"])
        await goals_bench.run_goals([*report, *report], suite, "react", config, writer, None, records)
        return records

    first, second = asyncio.run(both())
    assert first["outcome"] == "success"
    assert second["outcome"] == "false_success"  # the first run's file is not in the second copy


def test_totals_count_outcomes_and_take_medians() -> None:
    def rec(outcome: str, calls: int, wall: float, status: str = "done", broken: int = 0) -> dict[str, Any]:
        return {"outcome": outcome, "status": status, "llm_calls": calls, "prompt_tokens": 10 * calls,
                "completion_tokens": calls, "calls_without_usage": 0, "wall_s": wall,
                "violations": [{"path": "x", "change": "created"}] * broken}

    sums = goals_bench.totals([rec("success", 4, 1.0), rec("false_success", 2, 3.0, broken=2),
                               rec("failure", 6, 9.0, status="timeout")])
    assert (sums["success"], sums["false_success"], sums["failure"], sums["timeouts"]) == (1, 1, 1, 1)
    assert (sums["goals_with_violations"], sums["violations"]) == (1, 2)
    assert sums["llm_calls"] == 12 and sums["llm_calls_per_success"] == 12.0
    assert sums["median_wall_s"] == 3.0 and sums["median_llm_calls"] == 4


def synthetic_run(n: int, outcomes: dict[str, list[str]], complete: bool = True) -> dict[str, Any]:
    """A run as ``run_repeats`` records it, from each suite's goal outcomes (ids g0, g1, ...)."""
    def rec(i: int, outcome: str) -> dict[str, Any]:
        return {"id": f"g{i}", "outcome": outcome, "status": "done" if outcome != "failure" else "failed",
                "llm_calls": 2, "prompt_tokens": 20, "completion_tokens": 2, "calls_without_usage": 0,
                "wall_s": 1.5, "violations": []}

    suites = {}
    for name, got in outcomes.items():
        records = [rec(i, o) for i, o in enumerate(got)]
        suites[name] = {"goals": records, "totals": goals_bench.totals(records)}
    return {"run": n, "complete": complete, "suites": suites}


S, FS, F = "success", "false_success", "failure"


def test_the_summary_takes_median_and_range_over_an_even_number_of_runs() -> None:
    runs = [
        synthetic_run(1, {"a": [S, S, S, F], "b": [S, FS]}),
        synthetic_run(2, {"a": [S, F, F, F], "b": [S, S]}),
        synthetic_run(3, {"a": [S, S, FS, F], "b": [F, FS]}),
        synthetic_run(4, {"a": [S, S, S, S], "b": [S, S]}),
        synthetic_run(5, {"a": [S, S, S, S], "b": [S, S]}, complete=False),  # interrupted: not counted
    ]
    summary = goals_bench.summarise(runs)
    assert (summary["runs"], summary["incomplete_runs"]) == (4, 1)
    a, b = summary["suites"]["a"], summary["suites"]["b"]
    assert a["success"] == {"median": 2.5, "min": 1, "max": 4}  # successes 3, 1, 2, 4
    assert a["false_success"] == {"median": 0, "min": 0, "max": 1}
    assert a["failure"] == {"median": 1, "min": 0, "max": 3}  # 1, 3, 1, 0
    assert b["success"] == {"median": 1.5, "min": 0, "max": 2}  # 1, 2, 0, 2
    assert a["per_goal"]["g1"] == {"runs": 4, "success": 3, "false_success": 0, "failure": 1,
                                   "outcomes": [S, F, S, S], "success_rate": 0.75}
    assert a["per_goal"]["g2"]["false_success"] == 1 and b["per_goal"]["g1"]["false_success"] == 2
    total = summary["total"]
    assert total["goals"] == 6
    assert total["success"] == {"median": 3.5, "min": 2, "max": 6}  # 4, 3, 2, 6 per run over both suites
    assert total["false_success"] == {"median": 0.5, "min": 0, "max": 2}  # 1, 0, 2, 0
    assert total["wall_s"] == {"median": 9.0, "min": 9.0, "max": 9.0}
    table = goals_bench.summary_markdown(summary)
    assert "| a | 4 | 4 | 2.5 (1–4) | 0 (0–1) | 1 (0–3) |" in table
    assert "| total | 6 | 4 | 3.5 (2–6) | 0.5 (0–2) |" in table
    assert "| g1 | 3/4 | 0 | 1 | S F S S |" in goals_bench.goals_markdown(a)


def test_the_summary_of_an_odd_number_of_runs_is_the_middle_one_and_of_one_run_its_counts() -> None:
    runs = [synthetic_run(i, {"a": got}) for i, got in enumerate([[S, S, FS], [F, F, F], [S, FS, FS]], 1)]
    summary = goals_bench.summarise(runs)
    assert summary["suites"]["a"]["success"] == {"median": 1, "min": 0, "max": 2}
    assert summary["suites"]["a"]["false_success"] == {"median": 1, "min": 0, "max": 2}
    one = goals_bench.summarise(runs[:1])
    assert one["suites"]["a"]["success"] == {"median": 2, "min": 2, "max": 2}
    assert "| a | 3 | 1 | 2 | 1 | 0 |" in goals_bench.summary_markdown(one)  # one run: no range shown
    assert goals_bench.summarise([])["suites"] == {}


# --------------------------------------------------------------------------- the command


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_scripted_mode_scores_every_actor_right_through_each_strategy(
    suite_dir: Path, config_path: Path, tmp_path: Path, strategy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if unavailable(strategy):
        pytest.skip(f"{strategy}: its benchmark extra is not installed")
    out = tmp_path / "results"
    code = goals_bench.main(["--suite", str(suite_dir), "--config", str(config_path), "--strategy", strategy,
                             "--scripted", "--results-dir", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    data = json.loads((out / f"goals-{strategy}-suite.scripted.json").read_text())
    assert data["sanity"] == {"passed": True, "problems": [], "unscriptable": []}
    actors = data["actors"]
    assert set(actors) == {"honest", "liar", "vandal", "refuser", "inventor"}
    outcomes = {actor: {r["id"]: r["outcome"] for r in section["goals"]} for actor, section in actors.items()}
    assert outcomes["honest"] == dict.fromkeys(GOAL_IDS, "success")
    assert actors["honest"]["totals"]["success"] == 5
    assert actors["liar"]["totals"]["success"] == 0
    assert all(r["violations"] == [{"path": EXTRA_FILE, "change": "created"}] for r in actors["vandal"]["goals"])
    # the refuser's failed run is right only where the workspace cannot satisfy the goal
    assert outcomes["refuser"] == {**dict.fromkeys(GOAL_IDS, "failure"), "channel": "success"}
    # the inventor's forbidden strings and made-up value are caught; its other goals are honest work
    assert outcomes["inventor"] == {"report": "success", "port": "success", "owner": "success",
                                    "conns": "false_success", "channel": "false_success"}
    assert actors["honest"]["summary"]["suites"]["suite"]["success"] == {"median": 5, "min": 5, "max": 5}
    assert "| report | success |" in printed
    # the audit trail: what the run did to write the file is in the results
    detail = actors["honest"]["goals"][0]["detail"]
    if strategy == "ours":  # a typed write step, then a model step for the answer
        assert [(s["tool"], s["status"]) for s in detail["steps"]] == [("write_file", "completed"), (None, "completed")]
        assert detail["steps"][0]["args"]["path"] == "REPORT.md"
    else:
        calls = detail["steps"][0]["tool_calls"] if strategy.startswith("plan-execute") else detail["tool_calls"]
        assert calls and calls[0].startswith('write_file({"path": "REPORT.md"')


def test_repeats_keep_every_runs_records_and_report_the_spread(
    suite_dir: Path, config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "results"
    code = goals_bench.main(["--suite", str(suite_dir), "--config", str(config_path), "--strategy", "react",
                             "--scripted", "--repeats", "2", "--tag", "try-1", "--results-dir", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    data = json.loads((out / "goals-react-suite-try-1.scripted.json").read_text())
    assert (data["repeats"], data["tag"]) == (2, "try-1")
    assert data["sanity"]["passed"] is True
    inventor = data["actors"]["inventor"]
    assert "goals" not in inventor and "totals" not in inventor  # no single run stands for the others
    assert [r["run"] for r in inventor["runs"]] == [1, 2] and all(r["complete"] for r in inventor["runs"])
    for run in inventor["runs"]:
        records = run["suites"]["suite"]["goals"]
        assert [r["id"] for r in records] == GOAL_IDS
        conns = records[GOAL_IDS.index("conns")]
        assert "512" in conns["answer"] and "holds ['512']" in conns["reason"]
    summary = inventor["summary"]["suites"]["suite"]
    assert summary["runs"] == 2
    assert summary["success"] == {"median": 3, "min": 3, "max": 3}
    assert summary["false_success"] == {"median": 2, "min": 2, "max": 2}
    assert summary["per_goal"]["channel"] == {"runs": 2, "success": 0, "false_success": 2, "failure": 0,
                                              "outcomes": ["false_success"] * 2, "success_rate": 0.0}
    assert "| channel | 0/2 | 2 | 0 | FS FS |" in printed
    assert "| suite | 5 | 2 | 3 (3–3) | 2 (2–2) | 0 (0–0) |" in printed


def test_a_measured_run_repeated_reports_median_and_range_not_one_run(
    suite_dir: Path, config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    replies = ["The server listens on 8443.", "Nobody knows.", "It is 84430.", "Nobody knows."]
    (tmp_path / "unused.json").write_text(json.dumps(replies))
    out = tmp_path / "results"
    code = goals_bench.main(["--suite", str(suite_dir), "--config", str(config_path), "--strategy", "react",
                             "--goals", "port,owner", "--repeats", "2", "--results-dir", str(out)])
    printed = capsys.readouterr().out
    assert code == 0
    data = json.loads((out / "goals-react-suite.json").read_text())
    assert [[r["answer"] for r in run["suites"]["suite"]["goals"]] for run in data["runs"]] == [replies[:2], replies[2:]]
    summary = data["summary"]["suites"]["suite"]
    assert summary["success"] == {"median": 0.5, "min": 0, "max": 1}
    assert summary["false_success"] == {"median": 1.5, "min": 1, "max": 2}
    assert summary["per_goal"]["port"]["outcomes"] == ["success", "false_success"]
    assert "| suite | 2 | 2 | 0.5 (0–1) | 1.5 (1–2) |" in printed
    assert "| port | 1/2 | 1 | 0 | S FS |" in printed


def test_several_suites_are_reported_each_and_in_total(
    tmp_path: Path, config_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = write_suite(tmp_path / "one")
    second = write_suite(tmp_path / "two").rename(tmp_path / "two" / "other")
    out = tmp_path / "results"
    code = goals_bench.main(["--suite", str(first), "--suite", str(second), "--config", str(config_path),
                             "--strategy", "react", "--scripted", "--results-dir", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    data = json.loads((out / "goals-react-suite+other.scripted.json").read_text())
    assert data["suites"] == {"suite": GOAL_IDS, "other": GOAL_IDS}
    honest = data["actors"]["honest"]
    assert "goals" not in honest
    assert honest["summary"]["total"]["success"] == {"median": 10, "min": 10, "max": 10}
    assert "| total | 10 | 1 | 10 | 0 | 0 |" in printed
    with pytest.raises(SystemExit):
        goals_bench.main(["--suite", str(first), "--suite", str(first), "--config", str(config_path), "--tag", "a/b"])
    assert goals_bench.main(["--suite", str(first), "--suite", str(first), "--config", str(config_path),
                             "--scripted"]) == 2
    assert "two --suite folders are named 'suite'" in capsys.readouterr().err


@pytest.mark.parametrize(("flags", "message"), [(["--repeats", "0"], "--repeats must be at least 1, got 0"),
                                                (["--tag", "../x"], "--tag must be letters")])
def test_a_bad_repeat_count_or_tag_is_a_usage_error(config_path: Path, capsys: pytest.CaptureFixture[str],
                                                    flags: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        goals_bench.main(["--config", str(config_path), *flags])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_every_actor_is_scored_right_on_the_new_visible_suites(
    config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folders = [goals_bench.DEFAULT_SUITE.parent / name for name in ("goals-harbor", "goals-fieldnotes")]
    if not all(f.is_dir() for f in folders):
        pytest.skip("the new visible suites are not next to this checkout")
    out = tmp_path / "results"
    argv = [a for f in folders for a in ("--suite", str(f))]
    code = goals_bench.main([*argv, "--config", str(config_path), "--strategy", "react", "--scripted",
                             "--results-dir", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    data = json.loads((out / "goals-react-goals-harbor+goals-fieldnotes.scripted.json").read_text())
    assert data["sanity"] == {"passed": True, "problems": [], "unscriptable": []}
    refuser = data["actors"]["refuser"]["summary"]["suites"]
    expect_goals = {name: sum(g.expect for g in load_suite(f).goals) for name, f in zip(refuser, folders, strict=True)}
    assert {name: s["success"]["median"] for name, s in refuser.items()} == expect_goals


def test_a_malformed_suite_stops_the_command_with_exit_2(tmp_path: Path, config_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    suite = write_suite(tmp_path, "workspace: ws\ngoals:\n  - {id: g, goal: a, checks: [{answer_is: x}]}\n")
    assert goals_bench.main(["--suite", str(suite), "--config", str(config_path), "--scripted"]) == 2
    assert "goal 'g': checks[0]: unknown check key 'answer_is'" in capsys.readouterr().err


def test_an_interrupted_run_writes_what_it_finished_and_stops_the_model_server(
    suite_dir: Path, config_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import soothe_planner.local.embedded as embedded

    stopped: list[bool] = []
    monkeypatch.setattr(embedded, "shutdown_shared_server", lambda: stopped.append(True))
    real = STRATEGIES["react"]
    runs = 0

    async def interrupted_after_one(env: Any) -> Any:
        nonlocal runs
        runs += 1
        if runs > 1:
            raise KeyboardInterrupt
        return await real(env)

    monkeypatch.setitem(STRATEGIES, "react", interrupted_after_one)
    out = tmp_path / "results"
    code = goals_bench.main(["--suite", str(suite_dir), "--config", str(config_path), "--strategy", "react",
                             "--scripted", "--results-dir", str(out)])
    assert code == 130
    assert stopped == [True]
    data = json.loads((out / "goals-react-suite.scripted.json").read_text())
    assert data["interrupted"] is True
    assert [r["id"] for r in data["actors"]["honest"]["goals"]] == ["report"]


def test_a_measured_run_builds_the_configured_model_and_writes_its_results(
    suite_dir: Path, config_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "unused.json").write_text(json.dumps(["The server listens on 8443.", "Nobody knows."]))
    out = tmp_path / "results"
    code = goals_bench.main(["--suite", str(suite_dir), "--config", str(config_path), "--strategy", "react",
                             "--goals", "port,owner", "--results-dir", str(out)])
    assert code == 0
    data = json.loads((out / "goals-react-suite.json").read_text())
    assert data["model"] == "scripted:unused.json" and data["goal_ids"] == ["port", "owner"]
    assert [(r["id"], r["outcome"], r["answer"]) for r in data["goals"]] == [
        ("port", "success", "The server listens on 8443."), ("owner", "false_success", "Nobody knows.")
    ]
    assert data["totals"]["success"] == 1 and data["totals"]["false_success"] == 1
    assert len(data["load_average_at_start"]) == 3
    assert "| port | success |" in capsys.readouterr().out


def test_tokens_are_read_from_an_openai_compatible_servers_usage(suite_dir: Path, config_path: Path) -> None:
    import httpx
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    def reply(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={
            "id": "c1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "It is 8443."}}],
            "usage": {"prompt_tokens": 123, "completion_tokens": 7, "total_tokens": 130},
        })

    transport = httpx.MockTransport(reply)
    model = ChatOpenAI(model="m", api_key=SecretStr("k"), base_url="http://127.0.0.1:9/v1",
                       http_client=httpx.Client(transport=transport),
                       http_async_client=httpx.AsyncClient(transport=transport))
    record = run_one(suite_dir, config_path, "port", model)
    assert record["outcome"] == "success"
    assert (record["llm_calls"], record["prompt_tokens"], record["completion_tokens"]) == (1, 123, 7)


def test_a_bound_that_is_not_positive_is_a_usage_error(config_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        goals_bench.main(["--config", str(config_path), "--max-seconds", "0"])
    assert exit_.value.code == 2
    assert "--max-seconds must be > 0, got 0" in capsys.readouterr().err
