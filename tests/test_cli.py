"""The ``soothe-planner`` command end to end, on a scripted model: run, plan, resume, show and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import PLAN, WORKSPACE, scripted_config

from soothe_planner.cli import EXIT_DONE, EXIT_FAILED, EXIT_PAUSED, EXIT_USAGE, main

ROOT = Path(__file__).resolve().parents[1]

# Each step names one tool with structured arguments: one call fills them in, then the tool runs.
TOOL_TEXT: list[Any] = [{"pattern": "TODO"}, {"recursive": True}]


def _assess(status: str, progress: float) -> dict[str, Any]:
    return {"status": status, "goal_progress": progress, "confidence": 0.8, "summary": "evidence"}


DONE_SCRIPT = {
    "RouteIntake": [{"route": "complex", "answer": ""}],
    "AssessStatus": [_assess("done", 1.0)],  # iteration 0 has nothing to assess
    "GeneratePlan": [PLAN],
    "text": [*TOOL_TEXT, "There are 5 TODO lines."],
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOOTHE_SCRIPTED_MODEL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)


_setup = scripted_config


def _json(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    out = capsys.readouterr().out
    return json.loads(out)  # type: ignore[no-any-return]


def test_run_done_exits_0_and_reports_steps_and_answer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _setup(tmp_path, DONE_SCRIPT)
    assert main(["run", "--config", str(cfg), "--thread", "t1", "List the TODO lines"]) == EXIT_DONE
    out = capsys.readouterr().out
    assert "thread t1" in out and "status done" in out
    assert "find" in out and "files" in out and "There are 5 TODO lines." in out
    assert "step find completed" in out  # one line per event when not on a terminal


def test_run_json_prints_one_document(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _setup(tmp_path, DONE_SCRIPT)
    assert main(["run", "--json", "--config", str(cfg), "List the TODO lines"]) == EXIT_DONE
    report = _json(capsys)
    assert report["status"] == "done" and report["final_answer"] == "There are 5 TODO lines."
    assert [(s["id"], s["status"]) for s in report["steps"]] == [("find", "completed"), ("files", "completed")]
    assert "TODO" in report["steps"][0]["result"] and ".py:" in report["steps"][0]["result"]  # the tool's own output
    assert len(report["thread_id"]) == 12  # a new thread id when none is given


def test_json_flag_before_the_command_works_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _setup(tmp_path, DONE_SCRIPT)
    assert main(["--json", "run", "--config", str(cfg), "goal"]) == EXIT_DONE
    assert _json(capsys)["status"] == "done"


def test_run_that_never_finishes_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = {
        "RouteIntake": [{"route": "complex", "answer": ""}],
        "AssessStatus": [_assess("continue", 0.0), _assess("continue", 0.5)],
        "GeneratePlan": [PLAN],
        "text": TOOL_TEXT,
    }
    cfg = _setup(tmp_path, script, planner={"max_iterations": 1})
    assert main(["run", "--json", "--config", str(cfg), "goal"]) == EXIT_FAILED
    report = _json(capsys)
    assert report["status"] == "failed" and report["error"]


def test_run_with_a_failing_step_blocks_its_dependent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # no "text" replies: the step's argument call fails, so the step fails and its dependent is skipped
    script = {
        "RouteIntake": [{"route": "complex", "answer": ""}],
        "AssessStatus": [_assess("continue", 0.0), _assess("continue", 0.2)],
        "GeneratePlan": [PLAN],
    }
    cfg = _setup(tmp_path, script, planner={"max_iterations": 1}, run={"synthesize": False})
    assert main(["run", "--json", "--config", str(cfg), "goal"]) == EXIT_FAILED
    report = _json(capsys)
    assert {s["id"]: s["status"] for s in report["steps"]} == {"find": "failed", "files": "skipped"}
    # one line says why: the loop's error and the step that failed, with its kind
    assert report["why"].startswith("max_iterations (1) reached; 1 step(s) failed, the last find: model_error:")
    assert main(["show", "--config", str(cfg), "--thread", report["thread_id"]]) == EXIT_FAILED
    assert "failed: max_iterations (1) reached; 1 step(s) failed" in capsys.readouterr().out


def test_config_errors_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--config", str(ROOT / "config" / "openai.yaml"), "goal"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.strip() == ("soothe-planner: error: model 'openai:gpt-4o-mini' needs an API key: "
                           "set the environment variable OPENAI_API_KEY")
    assert main(["run", "--config", str(tmp_path / "missing.yaml"), "goal"]) == EXIT_USAGE
    assert "no such config file" in capsys.readouterr().err


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run"]) == EXIT_USAGE  # GOAL is required (--config is not: see test_cli_init.py)
    assert main(["frobnicate"]) == EXIT_USAGE
    assert main(["--version"]) == 0
    assert "soothe-planner 0.1.0" in capsys.readouterr().out


@pytest.mark.parametrize("fmt", ["table", "json", "mermaid"])
def test_plan_in_every_format(tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str) -> None:
    cfg = _setup(tmp_path, {"GeneratePlan": [PLAN]})
    assert main(["plan", "--config", str(cfg), "--format", fmt, "List the TODO lines"]) == EXIT_DONE
    out = capsys.readouterr().out
    if fmt == "json":
        plan = json.loads(out)
        assert [s["id"] for s in plan["steps"]] == ["find", "files"]
        assert plan["steps"][1]["depends_on"] == ["find"]
    elif fmt == "mermaid":
        assert out.startswith("flowchart TD") and "-->" in out
    else:
        assert "Search the workspace for TODO lines" in out and "find" in out


def test_plan_accepts_a_typed_write_step_the_configuration_lists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write = {"id": "w", "description": "save the greeting", "tool": "write_file",
             "args": {"path": "hello.txt", "content": "hi"}, "depends_on": []}
    cfg = _setup(tmp_path, {"GeneratePlan": [{**PLAN, "steps": [write]}]},
                 execution={"tools": ["builtin:read_file", "builtin:write_file"]})
    assert main(["plan", "--config", str(cfg), "--format", "json", "goal"]) == EXIT_DONE
    (step,) = json.loads(capsys.readouterr().out)["steps"]
    assert (step["tool"], step["args"]) == ("write_file", {"path": "hello.txt", "content": "hi"})
    assert not (WORKSPACE / "hello.txt").exists()  # planning runs nothing


def test_plan_rejects_a_tool_the_configuration_does_not_list(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = {**PLAN, "steps": [{"id": "w", "description": "write it", "tools": ["write_file"], "depends_on": []}]}
    cfg = _setup(tmp_path, {"GeneratePlan": [bad, bad, bad]}, execution={"tools": ["builtin:read_file"]})
    assert main(["plan", "--config", str(cfg), "goal"]) == EXIT_FAILED
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and captured.err.startswith("soothe-planner: error: plan-generate")
    assert "step 'w': tool 'write_file' not a known capability (known: read_file)" in captured.err


def test_show_a_past_run_in_every_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _setup(tmp_path, DONE_SCRIPT)
    assert main(["run", "--json", "--config", str(cfg), "--thread", "past", "goal"]) == EXIT_DONE
    capsys.readouterr()
    # show reads the checkpointer only: an empty script proves no model is called
    (tmp_path / "script.json").write_text("[]")
    assert main(["show", "--json", "--config", str(cfg), "--thread", "past"]) == EXIT_DONE
    assert _json(capsys)["final_answer"] == "There are 5 TODO lines."
    assert main(["show", "--config", str(cfg), "--thread", "past", "--format", "mermaid"]) == EXIT_DONE
    assert capsys.readouterr().out.startswith("flowchart TD")
    assert main(["show", "--config", str(cfg), "--thread", "past"]) == EXIT_DONE
    assert "status done" in capsys.readouterr().out
    assert main(["show", "--config", str(cfg), "--thread", "nope"]) == EXIT_USAGE
    assert "no run with thread id 'nope'" in capsys.readouterr().err


def test_approval_pauses_then_resume_approves_and_finishes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = {"RouteIntake": [{"route": "complex", "answer": ""}], "AssessStatus": [_assess("continue", 0.0)],
             "GeneratePlan": [PLAN]}
    cfg = _setup(tmp_path, first, run={"approval": True})
    assert main(["run", "--config", str(cfg), "--thread", "gate", "goal"]) == EXIT_PAUSED
    out = capsys.readouterr().out
    assert "paused for approval" in out and "--thread gate --approve" in out
    # a new process reloads the script: give it the replies the rest of the run needs
    (tmp_path / "script.json").write_text(json.dumps(
        {"AssessStatus": [_assess("done", 1.0)], "text": [*TOOL_TEXT, "There are 5 TODO lines."]}
    ))
    assert main(["resume", "--config", str(cfg), "--thread", "gate"]) == EXIT_USAGE
    assert "pass --approve or --reject" in capsys.readouterr().err
    assert main(["resume", "--json", "--config", str(cfg), "--thread", "gate", "--approve"]) == EXIT_DONE
    report = _json(capsys)
    assert report["status"] == "done" and {s["status"] for s in report["steps"]} == {"completed"}
    # resuming a finished run reports it again and exits by its status
    assert main(["resume", "--json", "--config", str(cfg), "--thread", "gate"]) == EXIT_DONE
    assert _json(capsys)["status"] == "done"
    assert main(["resume", "--config", str(cfg), "--thread", "unknown"]) == EXIT_USAGE


def test_intake_off_skips_the_routing_call(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = {k: v for k, v in DONE_SCRIPT.items() if k != "RouteIntake"}
    cfg = _setup(tmp_path, script, run={"intake": False})
    assert main(["run", "--json", "--config", str(cfg), "goal"]) == EXIT_DONE


def test_internal_errors_are_one_line_and_debug_adds_the_traceback(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import soothe_planner.config as config_module

    def boom(path: Any) -> Any:
        raise RuntimeError("kaput")

    monkeypatch.setattr(config_module, "load_config", boom)
    args = ["validate", str(ROOT / "config" / "default.yaml")]
    assert main(args) == EXIT_FAILED
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "internal error: RuntimeError: kaput" in err and "Traceback" not in err
    assert main(["--debug", *args]) == EXIT_FAILED
    assert "Traceback" in capsys.readouterr().err


@pytest.mark.subprocess
def test_console_script_runs_a_scripted_goal_from_the_environment(tmp_path: Path) -> None:
    (tmp_path / "script.json").write_text(json.dumps(DONE_SCRIPT))
    cfg = _setup(tmp_path, DONE_SCRIPT)
    env = {**os.environ, "SOOTHE_SCRIPTED_MODEL": str(tmp_path / "script.json")}
    exe = Path(sys.executable).parent / "soothe-planner"
    done = subprocess.run([str(exe), "run", "--json", "--config", str(cfg), "goal"], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "done"


def test_tracing_enabled_without_keys_is_a_quiet_no_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _setup(tmp_path, DONE_SCRIPT, tracing={"langfuse": {"enabled": True, "tags": ["t"]}})
    assert main(["run", "--json", "--config", str(cfg), "goal"]) == EXIT_DONE
    assert _json(capsys)["status"] == "done"


def test_resume_decides_by_status_not_only_by_what_is_scheduled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from soothe_planner.graph.loop import run_config

    cfg = _setup(tmp_path, DONE_SCRIPT)
    assert main(["run", "--config", str(cfg), "--thread", "t1", "List the TODO lines"]) == EXIT_DONE
    capsys.readouterr()

    async def mark_running() -> None:
        # a checkpoint that says "running" with nothing scheduled: not finished, and not resumable
        from soothe_planner.cli.running import graph_for as _graph
        from soothe_planner.config import load_config, resolve_persistence, resolve_run

        config = load_config(str(cfg))
        async with resolve_persistence(config) as persistence:
            graph = _graph(config, resolve_run(config), persistence)
            cfg_ = run_config("t1", 3)
            await graph.aupdate_state(cfg_, {"status": "running"}, as_node="finish")
            snap = await graph.aget_state(cfg_)
            assert snap.values["status"] == "running" and not snap.next

    asyncio.run(mark_running())
    assert main(["resume", "--config", str(cfg), "--thread", "t1"]) == EXIT_FAILED
    err = capsys.readouterr().err
    assert "has status 'running' but its last checkpoint schedules nothing to run" in err


# -- the parser, through click's own runner ---------------------------------------------------------


def test_click_runner_help_lists_the_commands_in_order_and_the_exit_codes() -> None:
    from click.testing import CliRunner

    from soothe_planner.cli import cli

    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == EXIT_DONE
    listed = [line.split()[0] for line in result.stdout.split("Commands:")[1].splitlines() if line.strip()][:6]
    assert listed == ["init", "run", "plan", "validate", "resume", "show"]
    assert "130 interrupted" in " ".join(result.stdout.split())
    assert CliRunner().invoke(cli, ["--version"]).stdout.strip() == "soothe-planner 0.1.0"


@pytest.mark.parametrize("argv", [["--json", "validate", "CFG"], ["validate", "CFG", "--json"]])
def test_click_runner_takes_the_output_flags_before_or_after_the_command(argv: list[str]) -> None:
    from click.testing import CliRunner

    from soothe_planner.cli import cli

    cfg = str(ROOT / "config" / "default.yaml")
    result = CliRunner().invoke(cli, [cfg if a == "CFG" else a for a in argv])
    assert result.exit_code == EXIT_DONE, result.stderr
    assert json.loads(result.stdout)["valid"] is True


@pytest.mark.parametrize("argv, message", [
    (["run"], "Missing argument 'GOAL'"),
    (["frobnicate"], "No such command 'frobnicate'"),
    (["plan", "--config", "c.yaml", "--format", "pdf", "goal"], "'pdf' is not one of"),
    (["resume", "--config", "c.yaml"], "Missing option '--thread'"),
])
def test_click_runner_usage_mistakes_exit_2_naming_the_mistake(argv: list[str], message: str) -> None:
    from click.testing import CliRunner

    from soothe_planner.cli import cli

    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == EXIT_USAGE
    assert message in result.stderr and result.stdout == ""


def test_an_interrupt_exits_130_with_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    import soothe_planner.config as config_module
    from soothe_planner.cli import EXIT_INTERRUPTED, cli

    def interrupted(path: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(config_module, "load_config", interrupted)
    args = ["validate", str(ROOT / "config" / "default.yaml")]
    assert main(args) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "soothe-planner: error: interrupted\n"
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == EXIT_INTERRUPTED and result.stderr == "soothe-planner: error: interrupted\n"


def test_help_and_usage_mistakes_do_not_load_the_library() -> None:
    # the console script imports soothe_planner.cli: its terminal renderings come at first use
    code = ("import sys; from soothe_planner.cli import main; main(['--help']); main(['run']); "
            "print(sorted(m for m in ('langchain_core', 'langgraph', 'pydantic') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
    from soothe_planner.cli import RunView, plan_table  # named by the front door all the same

    assert callable(plan_table) and RunView.__name__ == "RunView"
