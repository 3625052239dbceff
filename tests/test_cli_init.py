"""``soothe-planner init`` and the config a command reads without ``--config`` (never the embedded model here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from soothe_planner.cli import EXIT_DONE, EXIT_USAGE, main
from soothe_planner.config import CONFIG_FILE_NAME, find_config, packaged_config_text

ROOT = Path(__file__).resolve().parents[1]
PLAN = {"plan_action": "new", "execution_mode": "sequential", "next_action": "list",
        "steps": [{"id": "files", "description": "List the files", "tool": "list_dir", "args": {"path": "."}}]}
SCRIPT = {  # a typed tool step runs with no model call; the text reply would be a synthesised final answer
    "RouteIntake": [{"route": "complex", "answer": ""}],
    "GeneratePlan": [PLAN],
    "AssessStatus": [{"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "listed"}],
    "text": ["The folder holds two files."],
}


@pytest.fixture(autouse=True)
def _scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The shipped config names the embedded model: every model of these runs is the script instead.
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    monkeypatch.setenv("SOOTHE_SCRIPTED_MODEL", str(tmp_path / "script.json"))


def test_init_writes_the_packaged_config_and_refuses_to_overwrite_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "proj" / CONFIG_FILE_NAME
    assert main(["init", str(tmp_path / "proj")]) == EXIT_DONE
    assert target.read_text() == packaged_config_text()
    assert str(target) in capsys.readouterr().out
    target.write_text("models: {default: local}\n")
    assert main(["init", str(tmp_path / "proj")]) == EXIT_USAGE
    assert "already exists" in capsys.readouterr().err and target.read_text() == "models: {default: local}\n"
    assert main(["init", str(tmp_path / "proj"), "--force", "--json"]) == EXIT_DONE
    assert json.loads(capsys.readouterr().out) == {"written": str(target)}
    assert target.read_text() == packaged_config_text()


def test_init_then_run_without_config_reads_the_written_file_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    (project / "a.txt").write_text("one\n")
    monkeypatch.chdir(project)
    assert main(["init"]) == EXIT_DONE
    assert main(["run", "--thread", "t1", "List the files"]) == EXIT_DONE
    out = capsys.readouterr().out
    assert "status done" in out and "a.txt" in out
    # the shipped config makes no final-answer call: the answer is the steps' own outputs
    assert "The folder holds two files." not in out and "Completed steps" in out
    assert (project / ".soothe" / "checkpoints.sqlite").is_file()  # the written file's own paths
    assert main(["show", "--thread", "t1", "--json"]) == EXIT_DONE  # show finds the same checkpoint
    assert json.loads(capsys.readouterr().out)["status"] == "done"


def test_without_a_config_file_the_shipped_one_is_read_with_paths_in_the_current_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    config = find_config(None)
    assert config.execution.workspace == tmp_path.resolve()
    assert config.checkpoint.path == (tmp_path / ".soothe" / "checkpoints.sqlite").resolve()
    assert config.models.default == "local:1.5b"


def _without_paths(data: dict[str, Any]) -> dict[str, Any]:
    data["execution"].pop("workspace")
    data["checkpoint"].pop("path")
    return data


def test_the_shipped_config_and_the_repositorys_default_differ_only_in_their_paths() -> None:
    shipped = yaml.safe_load(packaged_config_text())
    repo = yaml.safe_load((ROOT / "config" / "default.yaml").read_text())
    assert _without_paths(shipped) == _without_paths(repo)
