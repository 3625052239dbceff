"""The README cannot rot: CI runs its test command exactly as printed, and its code blocks as scripts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    assert "'.[local-1-5b]'" in main_command
    assert "soothe-planner run --config config/default.yaml" in main_command
    assert (ROOT / "config" / "default.yaml").is_file()


def test_the_main_commands_goal_is_the_one_the_real_model_test_checks() -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        from test_real_model import README_GOAL
    finally:
        sys.path.pop(0)
    assert _commands()[0].endswith(f'"{README_GOAL}"')


def _python_blocks(section: str) -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    body = text.split(f"## {section}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.+?)\n```", body, flags=re.S)


@pytest.mark.subprocess
def test_the_using_it_from_code_blocks_run_verbatim_as_scripts(tmp_path: Path) -> None:
    blocks = _python_blocks("Using it from code")
    assert len(blocks) == 2, "the section shows a script and an event renderer"
    outputs = []
    for i, block in enumerate(blocks):
        script = tmp_path / f"block{i}.py"
        script.write_text(block + "\n", encoding="utf-8")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, f"README block {i} failed:\n{done.stderr[-3000:]}"
        outputs.append(done.stdout)
    assert "flowchart TD" in outputs[0] and "done - Completed steps:" in outputs[0]
    assert outputs[1].splitlines() == [
        "assessment: continue (0%)", "plan (new): hello", "step_started", "  hello: ok", "assessment: done (100%)",
        "done: Hello!",  # the plan ended in its one model step: that output is the answer
    ]  # fmt: skip


README_MAX_CHARS = 12_000


def test_the_readme_is_a_front_page_not_a_lab_notebook() -> None:
    """What the package does, the commands, an example, the latest figures; the rest lives in docs/ and RESULTS.md."""
    size = len((ROOT / "README.md").read_text(encoding="utf-8"))
    assert size <= README_MAX_CHARS, (
        f"README.md is {size} characters, over {README_MAX_CHARS}: move history to bench/RESULTS.md "
        "and how-to text to docs/"
    )


def test_every_benchmark_link_of_the_readme_names_an_anchor_of_results_md() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    anchors = set(re.findall(r'<a id="([\w-]+)"></a>', (ROOT / "bench" / "RESULTS.md").read_text(encoding="utf-8")))
    linked = re.findall(r"\(bench/RESULTS\.md#([\w-]+)\)", text)
    assert linked, "the README's benchmark table links no section of bench/RESULTS.md"
    assert set(linked) <= anchors, sorted(set(linked) - anchors)
