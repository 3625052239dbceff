"""The session guard of ``tests/conftest.py``: a test run that leaves a process behind fails, naming it.

Each case runs a small pytest session in a child process, with a copy of the real conftest, so
the guard is exercised exactly as the suite uses it: a direct child never waited for, and a
grandchild orphaned by its parent (the case a plain ``ppid`` check would miss, since the orphan
is re-parented away from the test process unless that process is a subreaper).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

CONFTEST = Path(__file__).with_name("conftest.py")

LEAKY = textwrap.dedent(
    """
    import subprocess

    def test_forgets_its_child():
        subprocess.Popen(["sleep", "600"])

    def test_orphans_a_grandchild():
        subprocess.run(["sh", "-c", "sleep 601 &"], check=True)

    def test_cleans_up():
        p = subprocess.Popen(["sleep", "602"])
        p.kill()
        p.wait()
    """
)

TIDY = textwrap.dedent(
    """
    import subprocess

    def test_waits_for_its_child():
        subprocess.run(["true"], check=True)
    """
)


def _session(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_inner.py").write_text(body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"  # the inner session needs no plugin, and loading them is slow
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )


def _is_running(pid: int, marker: str) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return marker in fh.read().decode(errors="replace")
    except OSError:
        return False


@pytest.mark.subprocess
@pytest.mark.skipif(sys.platform != "linux", reason="the guard reads /proc")
def test_a_session_that_leaves_processes_behind_fails_and_names_each_with_its_test(tmp_path: Path) -> None:
    out = _session(tmp_path, LEAKY)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "3 passed" in out.stdout
    left = re.findall(r"pid (\d+) \((.*?)\) left behind by (\S+)", out.stdout)
    by_test = {test.split("::")[-1]: (int(pid), cmd) for pid, cmd, test in left}
    assert set(by_test) == {"test_forgets_its_child", "test_orphans_a_grandchild"}, out.stdout
    assert by_test["test_forgets_its_child"][1] == "sleep 600"
    assert by_test["test_orphans_a_grandchild"][1] == "sleep 601"
    # the guard killed what it reported
    assert not any(_is_running(pid, cmd) for pid, cmd in by_test.values())


@pytest.mark.subprocess
@pytest.mark.skipif(sys.platform != "linux", reason="the guard reads /proc")
def test_a_session_that_cleans_up_passes(tmp_path: Path) -> None:
    out = _session(tmp_path, TIDY)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "left behind" not in out.stdout
