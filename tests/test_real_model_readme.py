"""The README's first command on the embedded model, on a server of its own (slow; ``real_model``).

Its own module, so its own server: on a server that had just answered other prompts (the module
``test_real_model.py`` shares one), the same goal once planned differently — llama.cpp's prompt
cache reuses a prefix's state, and a reused state can change a small model's greedy answer — and
wrote one of the five lines. A fresh server gives the run a user gets from the README.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_real_model import README_GOAL, ROOT, TODO_LINES, embedded_server, point_at

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def own_server() -> Iterator[str]:
    yield from embedded_server()


@pytest.fixture
def use_server(own_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    return point_at(own_server, monkeypatch)


def test_the_readmes_first_command_ends_done_with_the_report_written(
    use_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's first command, on a copy of the sample workspace: done, exit 0, the file checked."""
    import shutil

    import yaml

    from soothe_planner.cli import main

    workspace = tmp_path / "workspace"
    shutil.copytree(ROOT / "examples" / "workspace", workspace)
    config = yaml.safe_load((ROOT / "config" / "default.yaml").read_text(encoding="utf-8"))
    config["execution"]["workspace"] = str(workspace)
    config["checkpoint"] = {"backend": "memory"}
    path = tmp_path / "soothe.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    code = main(["run", "--json", "--config", str(path), README_GOAL])
    captured = capsys.readouterr()
    report = json.loads(captured.out)
    assert (code, report["status"]) == (0, "done"), captured.err[-3000:]
    text = (workspace / "TODO_REPORT.md").read_text(encoding="utf-8")
    missing = [line for line in TODO_LINES if line not in text]
    steps = [(s["id"], s["description"], (s.get("output") or s.get("error") or "")[:200]) for s in report["steps"]]
    assert not missing, f"{text!r}; steps: {steps}"
