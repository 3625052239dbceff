"""A run killed with SIGKILL mid-execution resumes from its checkpoint; no completed step runs twice.

The child (``kill_resume_child.py``) runs a four-step DAG on SQLite; its tool appends a line per
start and per completion to a side-effect file. The parent polls that file (no fixed sleeps) and
kills the child once s3 has started — s1 and s2 completed inside the same ``execute`` node, which
never returned, so no checkpoint holds their results; only the step journal does. The resumed
process must finish the goal with every step completed exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

CHILD = Path(__file__).with_name("kill_resume_child.py")
POLL_S = 0.05
DEADLINE_S = 90.0  # a hang guard only; nothing asserts on time


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["LANGGRAPH_STRICT_MSGPACK"] = "true"
    env["PYTHONPATH"] = os.pathsep.join([str(CHILD.parent.parent), env.get("PYTHONPATH", "")])
    return env


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@pytest.mark.subprocess
def test_sigkill_mid_execution_then_resume_runs_every_completed_step_exactly_once(tmp_path: Path) -> None:
    db, side, thread = tmp_path / "loop.sqlite", tmp_path / "side_effects.txt", "crash-1"
    args = [sys.executable, str(CHILD), str(db), str(side), thread]
    child = subprocess.Popen([*args, "first"], env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while "start do s3" not in _lines(side):
            if child.poll() is not None:
                out, err = child.communicate()
                pytest.fail(f"the child exited early ({child.returncode}):\n{out.decode()}\n{err.decode()}")
            if time.monotonic() > deadline:
                pytest.fail("the child never reached step s3")
            time.sleep(POLL_S)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    before = _lines(side)
    assert before[-1] == "start do s3"
    assert sorted(before[:-1]) == ["done do s1", "done do s2", "start do s1", "start do s2"]

    resumed = subprocess.run([*args, "resume"], env=_env(), capture_output=True, timeout=DEADLINE_S)
    assert resumed.returncode == 0, resumed.stderr.decode()
    reports = [json.loads(line) for line in resumed.stdout.decode().splitlines() if line.startswith("{")]
    assert reports[0] == {"resuming_at": ["execute"]}
    assert reports[-1]["status"] == "done", reports

    lines = _lines(side)
    done = Counter(line.removeprefix("done ") for line in lines if line.startswith("done "))
    starts = Counter(line.removeprefix("start ") for line in lines if line.startswith("start "))
    print(f"completed-step run counts: {dict(done)}; starts: {dict(starts)}")
    assert done == {"do s1": 1, "do s2": 1, "do s3": 1, "do s4": 1}
    # s1 and s2 were replayed from the journal, not started again; s3 started twice (killed mid-run)
    assert starts == {"do s1": 1, "do s2": 1, "do s3": 2, "do s4": 1}
