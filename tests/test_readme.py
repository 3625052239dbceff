"""The README's commands cannot rot: CI runs the test command exactly as the README prints it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _commands() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## The two commands", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.+?)\n```", section, flags=re.S)


def test_readme_has_exactly_two_commands() -> None:
    commands = _commands()
    assert len(commands) == 2, commands
    assert all("\n" not in c for c in commands)


def test_ci_runs_the_readme_test_command_verbatim() -> None:
    test_command = _commands()[1]
    assert "pytest" in test_command
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert test_command in ci_lines


def test_main_command_runs_the_default_config_on_the_embedded_model() -> None:
    main_command = _commands()[0]
    assert "'.[local]'" in main_command
    assert "soothe-planner run --config config/default.yaml" in main_command
    assert (ROOT / "config" / "default.yaml").is_file()
