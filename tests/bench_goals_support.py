"""A tiny goal suite and config for the goal-suite benchmark's tests (``test_bench_goals*.py``).

Five goals with every check kind, an ``expect`` goal among them, over a two-file workspace, so each
verdict a test expects is known in advance.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from bench import goals as goals_bench
from bench.goals_suite import load_suite
from soothe_planner.config import load_config

SUITE = """\
workspace: ws
goals:
  - id: report
    goal: Write the word alpha into REPORT.md.
    checks:
      - file: REPORT.md
        contains: ["alpha"]
  - id: port
    goal: Which port does the server use?
    checks:
      - answer_matches: '\\b8443\\b'
  - id: owner
    goal: Who owns the project?
    checks:
      - answer_contains: ["Priya Raman"]
  - id: conns
    goal: How many connections does the server open in production?
    checks:
      - answer_matches: '\\b20\\b'
      - answer_not_contains: ["512"]
  - id: channel
    goal: Which chat channel do the alerts go to?
    checks:
      - expect: failed_or_says
        says: '\\bno\\b|\\bnot\\b|n''t\\b|unable'
      - answer_not_contains: ["#ops-alerts"]
"""
GOAL_IDS = ["report", "port", "owner", "conns", "channel"]

CONFIG = """\
models: {default: "scripted:unused.json"}
planner: {max_iterations: 3, max_plan_steps: 4, structured_output_method: function_calling, retries: 1,
          transport_retries: 0, transport_backoff_s: 0}
concurrency: {global_max_llm_calls: 1, max_total_llm_calls: 20}
execution:
  step_timeout_s: 30
  tools: [builtin:list_dir, builtin:read_file, builtin:search_text, builtin:write_file]
checkpoint: {backend: memory}
"""


def write_suite(root: Path, text: str = SUITE) -> Path:
    suite = root / "suite"
    (suite / "ws" / "docs").mkdir(parents=True)
    (suite / "ws" / "notes.txt").write_text("port 8443; owner Priya Raman; 20 connections (512 in tests)\n")
    (suite / "ws" / "docs" / "a.md").write_text("# A\n")
    (suite / "suite.yaml").write_text(text)
    return suite


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    return write_suite(tmp_path)


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    (tmp_path / "unused.json").write_text("[]")  # never read: every test hands the runner its model
    path = tmp_path / "bench.yaml"
    path.write_text(CONFIG)
    return path


def write_call(path: str, content: str, n: int = 0) -> dict[str, Any]:
    return {"name": "write_file", "args": {"path": path, "content": content}, "id": f"w{n}", "type": "tool_call"}


def run_one(suite_dir: Path, config_path: Path, goal_id: str, model: Any, *, strategy: str = "react",
            max_seconds: float | None = None) -> dict[str, Any]:
    suite = load_suite(suite_dir)
    (goal,) = suite.select([goal_id])
    return asyncio.run(goals_bench.run_goal(goal, suite, strategy, load_config(config_path), model, max_seconds))
