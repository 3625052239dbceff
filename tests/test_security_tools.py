"""The built-in tools against a hostile workspace and hostile arguments.

- ``write_file`` never writes the run's own control files — ``.git/``, the ``.soothe`` state
  folder, the config and the checkpoint database — however the path is spelled (case, ``..``,
  absolute, through a symlink, through a hard link).
- A catastrophic regular expression cannot freeze the process: the search stops itself with an
  error naming the pattern, and a step running it fails ``timeout`` within its budget.
- Caps never give a false answer: any line range of a file of any size can be read, and a search
  names the files it did not search.
- Every ``OSError`` reaches the caller as a tool error naming the path and the reason.
- A symlink swapped in while a tool works cannot lead it outside the workspace.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool

from soothe_planner.tools import builtins as tools_mod
from soothe_planner.tools import make_builtin_tools


def _call(tool: BaseTool, args: dict[str, Any]) -> ToolMessage:
    message = tool.invoke({"name": tool.name, "args": args, "id": "c1", "type": "tool_call"})
    assert isinstance(message, ToolMessage)
    return message


def _refused(tool: BaseTool, args: dict[str, Any], pattern: str) -> str:
    """The tool answered with an error message (never raised, never succeeded) matching ``pattern``."""
    message = _call(tool, args)
    assert message.status == "error", message
    assert re.search(pattern, str(message.content)), message.content
    return str(message.content)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / ".git" / "config").write_text("[core]\n")
    (ws / ".soothe").mkdir()
    (ws / "notes.md").write_text("# Notes\nTODO: write the intro\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside the workspace\n", encoding="utf-8")
    return ws


# --------------------------------------------------------------------------- item 4: control files


@pytest.mark.parametrize(
    "path",
    [
        ".git/config",
        ".GIT/config",
        "./src/../.git/hooks/pre-commit",
        ".git",
        "src/.git",
        "sub/.git/config",
        ".soothe/checkpoints.sqlite",
        ".Soothe/x",
        "gitlink/config",
    ],
)
def test_write_file_refuses_version_control_and_state_folders_however_spelled(workspace: Path, path: str) -> None:
    (workspace / "gitlink").symlink_to(workspace / ".git")
    before = (workspace / ".git" / "config").read_text()
    _refused(make_builtin_tools(workspace)["write_file"], {"path": path, "content": "[core]\nfsmonitor = evil"},
             "never write")
    assert (workspace / ".git" / "config").read_text() == before
    assert not (workspace / ".git" / "hooks" / "pre-commit").exists()
    assert list((workspace / ".soothe").iterdir()) == []
    assert not (workspace / "sub").exists() and not (workspace / "src" / ".git").exists()


def test_write_file_refuses_an_absolute_path_into_git(workspace: Path) -> None:
    _refused(make_builtin_tools(workspace)["write_file"],
             {"path": str(workspace / ".git" / "config"), "content": "x"}, "never write")


def test_write_file_refuses_the_config_and_the_checkpoint_however_reached(workspace: Path) -> None:
    config = workspace / "soothe.yaml"
    config.write_text("models: {default: 'os:system'}\n")
    checkpoint = workspace / "state" / "run.sqlite"
    checkpoint.parent.mkdir()
    checkpoint.write_bytes(b"SQLite format 3\x00")
    os.link(config, workspace / "hardlink.yaml")
    (workspace / "symlink.yaml").symlink_to("soothe.yaml")
    write = make_builtin_tools(workspace, protected_files=[config, checkpoint])["write_file"]
    for path in ["soothe.yaml", "SOOTHE.yaml", "./state/../soothe.yaml", "hardlink.yaml", "symlink.yaml",
                 "state/run.sqlite", "state/run.sqlite-wal", str(checkpoint)]:
        _refused(write, {"path": path, "content": "pwned"}, "never writes? it|never write")
    assert config.read_text() == "models: {default: 'os:system'}\n"
    assert checkpoint.read_bytes() == b"SQLite format 3\x00"
    assert not (workspace / "state" / "run.sqlite-wal").exists()
    # an ordinary file beside them is still writable
    assert _call(write, {"path": "state/notes.txt", "content": "ok"}).status == "success"


def test_configured_tools_protect_the_config_file_and_the_default_checkpoint(tmp_path: Path) -> None:
    from soothe_planner.config import load_config, resolve_tools

    cfg = tmp_path / "soothe.yaml"
    cfg.write_text("execution:\n  tools: [builtin:write_file]\ncheckpoint:\n  path: db/ck.sqlite\n")
    (write,) = resolve_tools(load_config(cfg))
    _refused(write, {"path": "soothe.yaml", "content": "execution: {tools: ['os:system']}"}, "never write")
    _refused(write, {"path": "db/ck.sqlite", "content": "x"}, "never write")
    _refused(write, {"path": "db/seal.key", "content": "a key the writer knows"}, "never write")  # the seal's key
    assert "os:system" not in cfg.read_text()


# --------------------------------------------------------------------------- item 6: catastrophic regex

CATASTROPHIC = "(a|aa)+$"
# With ``re`` this line takes tens of seconds holding the GIL (the work grows ~1.6x per character).
BACKTRACKING_LINE = "a" * 36 + "!"


def test_a_catastrophic_pattern_stops_the_search_with_an_error_naming_it(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools_mod, "SEARCH_TIME_LIMIT_S", 0.5)
    (workspace / "log.txt").write_text(BACKTRACKING_LINE + "\n")
    message = _refused(make_builtin_tools(workspace)["search_text"],
                       {"pattern": CATASTROPHIC, "regex": True}, r"took longer than 0\.5s")
    assert CATASTROPHIC in message and "log.txt:1" in message


async def test_a_step_running_a_catastrophic_search_fails_timeout_within_its_budget(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_core.tools import StructuredTool

    from soothe_planner.dag.plan_manager import PlanManager
    from soothe_planner.execution import StepExecutor
    from soothe_planner.models import AgentDecision, StepAction

    # the search's own limit is well past the step's budget: only the step timeout can end it in time
    monkeypatch.setattr(tools_mod, "SEARCH_TIME_LIMIT_S", 8.0)
    (workspace / "log.txt").write_text(BACKTRACKING_LINE + "\n")
    tools = make_builtin_tools(workspace)
    real_search = tools["search_text"].func  # type: ignore[attr-defined]
    started = threading.Event()

    def search_text(pattern: str, path: str = ".", regex: bool = False) -> str:
        started.set()
        return str(real_search(pattern=pattern, path=path, regex=regex))

    tools["search_text"] = StructuredTool.from_function(
        search_text, name="search_text", description="search", handle_tool_error=True
    )
    executor = StepExecutor(tools=list(tools.values()), step_timeout_s=2.0)
    pm = PlanManager("g")
    # a typed tool step: the search runs with these args and no model call
    pm.ingest(AgentDecision(steps=[StepAction(id="s1", description="search the log", tool="search_text",
                                              args={"pattern": CATASTROPHIC, "regex": True})]))
    begun = time.monotonic()
    (result,) = await executor.run(pm)
    elapsed = time.monotonic() - begun
    assert started.is_set(), "the search never ran: the step ended for another reason"
    assert result.error_type == "timeout", result
    # it ended on its own timer, not when the search gave up (8 s) or finished (a minute with `re`)
    assert elapsed < 8.0, elapsed


# --------------------------------------------------------------------------- item 7: size caps


def test_read_file_reads_any_line_range_of_a_file_past_a_megabyte(workspace: Path) -> None:
    lines = [f"line {i:06d} " + "x" * 40 for i in range(1, 60_001)]  # about 3 MB
    (workspace / "big.log").write_text("\n".join(lines) + "\n")
    read = make_builtin_tools(workspace)["read_file"]
    out = read.invoke({"path": "big.log", "start_line": 59_999})
    assert out.splitlines() == lines[59_998:]
    out = read.invoke({"path": "big.log", "start_line": 30_000, "end_line": 30_002})
    assert out.splitlines() == lines[29_999:30_002]
    _refused(read, {"path": "big.log", "start_line": 60_001}, r"has 60000 line\(s\); start_line 60001 is past the end")


def test_a_cut_read_says_where_to_read_on_and_reading_on_continues(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tools_mod, "MAX_READ_CHARS", 25)
    (workspace / "f.txt").write_text("".join(f"row {i}\n" for i in range(1, 11)))
    read = make_builtin_tools(workspace)["read_file"]
    first = read.invoke({"path": "f.txt"})
    assert first.startswith("row 1\nrow 2\nrow 3\nrow 4\nr") and "read on with start_line=5" in first
    assert read.invoke({"path": "f.txt", "start_line": 5}).startswith("row 5\n")


def test_search_names_the_files_it_did_not_search(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_mod, "MAX_SEARCH_FILE_BYTES", 1000)
    (workspace / "big.log").write_text("needle\n" + "x" * 2000)
    out = make_builtin_tools(workspace)["search_text"].invoke({"pattern": "needle"})
    assert out.splitlines()[0] == "no matches for 'needle'"
    assert "not searched: big.log" in out and "read it by line range" in out


def test_search_of_a_file_past_a_megabyte_is_not_a_silent_no_match(workspace: Path) -> None:
    (workspace / "big.log").write_text("x" * 1_100_000 + "\nneedle\n")
    out = make_builtin_tools(workspace)["search_text"].invoke({"pattern": "needle"})
    assert "big.log" in out


# --------------------------------------------------------------------------- item 8: OSError


@pytest.mark.parametrize(
    ("tool", "args", "reason"),
    [
        ("read_file", {"path": "a" * 300}, "File name too long"),
        ("write_file", {"path": "a" * 300, "content": "x"}, "File name too long"),
        ("list_dir", {"path": "a" * 300}, "File name too long"),
        ("search_text", {"pattern": "x", "path": "a" * 300}, "File name too long"),
        ("write_file", {"path": "notes.md/child.txt", "content": "x"}, "is a file, not a folder"),
        ("write_file", {"path": "src", "content": "x"}, "is a folder"),
        ("read_file", {"path": "src"}, "is a folder"),
    ],
)
def test_os_errors_reach_the_model_as_tool_errors_naming_the_path(
    workspace: Path, tool: str, args: dict[str, Any], reason: str
) -> None:
    message = _refused(make_builtin_tools(workspace)[tool], args, reason)
    assert repr(args["path"])[:40].rstrip("'") in message


def test_a_fifo_is_refused_instead_of_blocking_the_read(workspace: Path) -> None:
    os.mkfifo(workspace / "pipe")
    _refused(make_builtin_tools(workspace)["read_file"], {"path": "pipe"}, "not a regular file")
    out = make_builtin_tools(workspace)["search_text"].invoke({"pattern": "x"})
    assert out == "no matches for 'x'"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_an_unreadable_file_is_a_tool_error_and_is_named_by_search(workspace: Path) -> None:
    locked = workspace / "locked.txt"
    locked.write_text("needle\n")
    locked.chmod(0)
    try:
        _refused(make_builtin_tools(workspace)["read_file"], {"path": "locked.txt"}, "Permission denied")
        out = make_builtin_tools(workspace)["search_text"].invoke({"pattern": "needle"})
        assert "not searched: locked.txt (Permission denied)" in out
    finally:
        locked.chmod(0o644)


# --------------------------------------------------------------------------- item 9: the symlink race


def _flip(target: Path, outside: Path, stop: threading.Event) -> None:
    """Turn ``target`` into a symlink to ``outside`` and back, atomically each time, until stopped."""
    link, plain = target.with_name("flip.link"), target.with_name("flip.plain")
    while not stop.is_set():
        os.symlink(outside, link)
        os.replace(link, target)
        plain.write_text("inside\n")
        os.replace(plain, target)


@pytest.mark.parametrize("tool", ["write_file", "read_file"])
def test_a_symlink_swapped_in_during_the_call_never_leads_outside(workspace: Path, tool: str) -> None:
    secret = workspace.parent / "secret.txt"
    target = workspace / "flip.txt"
    target.write_text("inside\n")
    tools = make_builtin_tools(workspace)
    stop = threading.Event()
    flipper = threading.Thread(target=_flip, args=(target, secret, stop))
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible: the race gets every chance
    flipper.start()
    leaked = []
    try:
        for _ in range(400):
            if tool == "write_file":
                _call(tools["write_file"], {"path": "flip.txt", "content": "pwned\n"})
                if secret.read_text() != "outside the workspace\n":
                    leaked.append("wrote outside")
                    break
            else:
                message = _call(tools["read_file"], {"path": "flip.txt"})
                if message.content == "outside the workspace\n":
                    leaked.append("read outside")
                    break
    finally:
        stop.set()
        flipper.join()
        sys.setswitchinterval(interval)
    assert leaked == []


def test_a_folder_swapped_for_a_symlink_after_the_walk_entered_it_keeps_the_write_inside(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Deterministic: the swap lands exactly between the walk through ``src`` and the open of the file."""
    outside = workspace.parent / "elsewhere"
    outside.mkdir()
    real_open = os.open

    def swapping_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        # the write goes to a temporary file beside out.txt, renamed over it
        if isinstance(path, str) and path.startswith(".out.txt.") and flags & os.O_CREAT:
            os.rename(workspace / "src", workspace / "src.moved")
            os.symlink(outside, workspace / "src")
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swapping_open)
    out = make_builtin_tools(workspace)["write_file"].invoke({"path": "src/out.txt", "content": "data"})
    assert out.startswith("wrote 4 bytes to src/out.txt:")
    assert list(outside.iterdir()) == []
    assert (workspace / "src.moved" / "out.txt").read_text() == "data"


def test_many_tool_calls_leave_no_descriptor_open(workspace: Path) -> None:
    tools = make_builtin_tools(workspace)
    before = len(os.listdir("/proc/self/fd")) if Path("/proc/self/fd").exists() else None
    if before is None:
        pytest.skip("needs /proc to count descriptors")
    for i in range(50):
        tools["write_file"].invoke({"path": f"src/f{i}.txt", "content": "x"})
        tools["read_file"].invoke({"path": f"src/f{i}.txt"})
        tools["list_dir"].invoke({"path": "src", "recursive": True})
        tools["search_text"].invoke({"pattern": "x"})
        _call(tools["read_file"], {"path": "../secret.txt"})
        _call(tools["write_file"], {"path": ".git/x", "content": "x"})
    assert len(os.listdir("/proc/self/fd")) <= before + 1


async def test_search_does_not_block_the_event_loop_while_matching(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine releases the GIL while matching, so the loop keeps ticking during a slow search."""
    monkeypatch.setattr(tools_mod, "SEARCH_TIME_LIMIT_S", 1.0)
    (workspace / "log.txt").write_text(BACKTRACKING_LINE + "\n")
    search = make_builtin_tools(workspace)["search_text"]
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.01)

    task = asyncio.create_task(ticker())
    message = await search.ainvoke({"name": "search_text", "args": {"pattern": CATASTROPHIC, "regex": True},
                                    "id": "c1", "type": "tool_call"})
    task.cancel()
    assert message.status == "error"
    assert ticks > 5
