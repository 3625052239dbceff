"""The built-in workspace tools: what they return, and that they never leave their folder."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, ToolException

from soothe_planner.tools import BUILTIN_TOOL_NAMES, make_builtin_tools, resolve_in_workspace
from soothe_planner.tools import builtins as tools_mod


def _refused(tool: BaseTool, args: dict[str, Any], pattern: str) -> None:
    """The tool answered a tool call with an error message (never raised, never succeeded)."""
    message = tool.invoke({"name": tool.name, "args": args, "id": "c1", "type": "tool_call"})
    assert isinstance(message, ToolMessage) and message.status == "error", message
    assert re.search(pattern, str(message.content)), message.content


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "notes.md").write_text("# Notes\nTODO: write the intro\n", encoding="utf-8")
    (ws / "src" / "app.py").write_text("def f():\n    pass  # todo: implement\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("outside the workspace\n", encoding="utf-8")
    return ws


def test_builtins_are_six_and_only_write_file_is_not_read_only(workspace: Path) -> None:
    tools = make_builtin_tools(workspace)
    assert tuple(tools) == BUILTIN_TOOL_NAMES
    read_only = {name for name, t in tools.items() if (t.metadata or {}).get("read_only")}
    assert read_only == {"list_dir", "read_file", "search_text", "count_files", "count_lines"}


def test_count_files_answers_with_the_number_first_then_what_it_counted(workspace: Path) -> None:
    (workspace / "src" / "lib").mkdir()
    (workspace / "src" / "lib" / "util.PY").write_text("x = 1\n", encoding="utf-8")
    (workspace / ".git").mkdir()
    (workspace / ".git" / "hook.py").write_text("", encoding="utf-8")  # a skipped folder is not counted
    count = make_builtin_tools(workspace)["count_files"]
    assert count.invoke({"pattern": "*.py"}).splitlines() == [
        "2 files below . match '*.py':", "src/app.py", "src/lib/util.PY"]
    assert count.invoke({"pattern": "src/lib/*", "path": "src"}).splitlines() == [
        "1 file below src match 'src/lib/*':", "src/lib/util.PY"]
    assert count.invoke({"pattern": "*.rs"}) == "0 files below . match '*.rs'"
    assert count.invoke({"pattern": "notes.md"}).startswith("1 file below . match 'notes.md'")
    # a bare word that names no file is a mistaken pattern, not a count of 0
    _refused(count, {"pattern": "python"}, r"named exactly 'python'.*'\*\.py'.*'\*python\*'")
    _refused(count, {"pattern": " "}, r"pattern is empty")
    _refused(count, {"pattern": "*", "path": "nowhere"}, r"nowhere")


def test_count_lines_counts_every_line_or_those_holding_a_pattern(workspace: Path) -> None:
    (workspace / "rows.csv").write_text("date,amount\n2026-03-01,3\n2026-03-04,1\n2026-03-09,2", encoding="utf-8")
    (workspace / "blob.bin").write_bytes(b"\x00\x01TODO\n")
    count = make_builtin_tools(workspace)["count_lines"]
    assert count.invoke({"path": "rows.csv"}) == "4 lines in rows.csv"  # the last line has no newline
    assert count.invoke({"path": "rows.csv", "pattern": "^2026", "regex": True}).splitlines() == [
        "3 lines in rows.csv contain '^2026':", "rows.csv:2: 2026-03-01,3", "rows.csv:3: 2026-03-04,1",
        "rows.csv:4: 2026-03-09,2"]  # the count, then what it counted
    assert count.invoke({"path": "notes.md", "pattern": "todo"}).startswith("1 line in notes.md contains 'todo':\n")
    # a folder: every text file below it (a binary file is not one)
    assert count.invoke({"path": ".", "pattern": "TODO"}).startswith("2 lines in 2 files below . contain 'TODO':\n")
    _refused(count, {"path": "blob.bin"}, r"'blob.bin' is a binary file")
    _refused(count, {"path": "rows.csv", "pattern": "(", "regex": True}, r"not a valid regular expression")


def test_count_lines_stopped_at_its_cap_says_at_least(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_mod, "MAX_COUNTED_LINES", 1)
    (workspace / "big.txt").write_text("a\nb\nc\n", encoding="utf-8")
    assert make_builtin_tools(workspace)["count_lines"].invoke({"path": "big.txt"}) == "at least 1 line in big.txt"


def test_list_dir_marks_folders_and_defaults_to_the_root(workspace: Path) -> None:
    out = make_builtin_tools(workspace)["list_dir"].invoke({})
    assert out.splitlines() == ["notes.md", "src/"]


def test_list_dir_of_a_file_lists_the_file_as_ls_does(workspace: Path) -> None:
    """Regression (1.5B): list_dir('src/ledgerline/sync.py') failed as "not a folder", and the failed
    step kept a plan whose answer was right from ending done."""
    list_dir = make_builtin_tools(workspace)["list_dir"]
    assert list_dir.invoke({"path": "src/app.py"}) == "src/app.py"
    assert list_dir.invoke({"path": "./notes.md", "recursive": True}) == "notes.md"
    _refused(list_dir, {"path": "src/gone.py"}, r"'src/gone.py' does not exist")
    _refused(list_dir, {"path": "../secret.txt"}, r"outside the workspace")
    # a count of the files below a file is no count: that stays an error, as before
    _refused(make_builtin_tools(workspace)["count_files"], {"pattern": "*", "path": "src/app.py"}, r"not a folder")


def test_read_file_returns_the_text(workspace: Path) -> None:
    assert "TODO: write the intro" in make_builtin_tools(workspace)["read_file"].invoke({"path": "notes.md"})


def test_search_text_is_case_insensitive_and_names_file_and_line(workspace: Path) -> None:
    out = make_builtin_tools(workspace)["search_text"].invoke({"pattern": "todo"})
    assert out.splitlines() == ["notes.md:2: TODO: write the intro", "src/app.py:2: pass  # todo: implement"]


def test_a_folder_search_passes_over_what_this_run_wrote_and_a_search_naming_it_reads_it(workspace: Path) -> None:
    """Regression (1.5B): a re-plan searched again after a first report and listed the report's own line."""
    tools = make_builtin_tools(workspace, small_model_aids=True)
    tools["write_file"].invoke({"path": "out/TODO_REPORT.md", "content": "notes.md:2: TODO: write the intro\n"})
    out = tools["search_text"].invoke({"pattern": "todo"})
    assert out.splitlines() == ["notes.md:2: TODO: write the intro", "src/app.py:2: pass  # todo: implement"]
    assert tools["count_lines"].invoke({"path": ".", "pattern": "todo"}).startswith("2 lines in 2 files")
    assert tools["search_text"].invoke({"pattern": "todo", "path": "out/TODO_REPORT.md"}).startswith(
        "out/TODO_REPORT.md:1: notes.md:2:")
    # the same file written by someone else (another run's tools) is the workspace's data
    other = make_builtin_tools(workspace)["search_text"].invoke({"pattern": "todo"})
    assert "out/TODO_REPORT.md:1:" in other


def test_search_text_rejects_an_invalid_regex_with_the_pattern_named(workspace: Path) -> None:
    _refused(make_builtin_tools(workspace)["search_text"], {"pattern": "(", "regex": True}, r"'\(' is not a valid regular expression")


def test_write_file_creates_folders_and_stays_inside(workspace: Path) -> None:
    out = make_builtin_tools(workspace)["write_file"].invoke({"path": "out/report.md", "content": "hi"})
    assert out == "wrote 2 bytes to out/report.md:\nhi"
    assert (workspace / "out" / "report.md").read_text() == "hi"


@pytest.mark.parametrize("tool", ["read_file", "list_dir", "write_file", "search_text"])
def test_dotdot_escape_is_refused_by_every_tool(workspace: Path, tool: str) -> None:
    args = {"read_file": {"path": "../secret.txt"}, "list_dir": {"path": ".."},
            "write_file": {"path": "../evil.txt", "content": "x"},
            "search_text": {"pattern": "outside", "path": ".."}}[tool]
    _refused(make_builtin_tools(workspace)[tool], args, "outside the workspace")
    assert not (workspace.parent / "evil.txt").exists()


def test_absolute_path_outside_is_refused_but_inside_is_allowed(workspace: Path) -> None:
    tools = make_builtin_tools(workspace)
    _refused(tools["read_file"], {"path": str(workspace.parent / "secret.txt")}, "outside the workspace")
    _refused(tools["read_file"], {"path": "/etc/passwd"}, "outside the workspace")
    assert "Notes" in tools["read_file"].invoke({"path": str(workspace / "notes.md")})


def test_symlink_pointing_outside_is_refused_for_read_and_write(workspace: Path) -> None:
    (workspace / "link.txt").symlink_to(workspace.parent / "secret.txt")
    (workspace / "linkdir").symlink_to(workspace.parent)
    tools = make_builtin_tools(workspace)
    _refused(tools["read_file"], {"path": "link.txt"}, "outside the workspace")
    _refused(tools["write_file"], {"path": "link.txt", "content": "pwned"}, "outside the workspace")
    _refused(tools["write_file"], {"path": "linkdir/new.txt", "content": "pwned"}, "outside the workspace")
    assert (workspace.parent / "secret.txt").read_text() == "outside the workspace\n"
    assert not (workspace.parent / "new.txt").exists()


def test_search_skips_symlinked_files_that_point_outside(workspace: Path) -> None:
    (workspace / "link.txt").symlink_to(workspace.parent / "secret.txt")
    out = make_builtin_tools(workspace)["search_text"].invoke({"pattern": "outside the workspace"})
    assert out == "no matches for 'outside the workspace'"


def test_symlink_inside_the_workspace_is_allowed(workspace: Path) -> None:
    (workspace / "alias.md").symlink_to(workspace / "notes.md")
    assert "Notes" in make_builtin_tools(workspace)["read_file"].invoke({"path": "alias.md"})


def test_read_is_capped_and_says_it_was_truncated(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_mod, "MAX_READ_CHARS", 10)
    (workspace / "big.txt").write_text("x" * 100)
    out = make_builtin_tools(workspace)["read_file"].invoke({"path": "big.txt"})
    assert out.startswith("x" * 10 + "\n... [truncated: file is 100 bytes")


def test_search_hits_are_capped(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_mod, "MAX_SEARCH_HITS", 3)
    (workspace / "many.txt").write_text("hit\n" * 10)
    lines = make_builtin_tools(workspace)["search_text"].invoke({"pattern": "hit"}).splitlines()
    assert len(lines) == 4 and lines[-1] == "... (stopped at 3 matches)"


def test_listing_is_capped(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_mod, "MAX_LIST_ENTRIES", 2)
    for i in range(5):
        (workspace / f"f{i}.txt").write_text("")
    lines = make_builtin_tools(workspace)["list_dir"].invoke({}).splitlines()
    assert lines[-1] == "... (5 more entries not shown)" and len(lines) == 3


def test_oversized_write_is_refused(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tools_mod, "MAX_WRITE_CHARS", 5)
    _refused(make_builtin_tools(workspace)["write_file"], {"path": "a.txt", "content": "123456"}, "over the 5-char write limit")


def test_binary_file_read_is_refused(workspace: Path) -> None:
    (workspace / "blob.bin").write_bytes(b"\x00\x01\x02")
    _refused(make_builtin_tools(workspace)["read_file"], {"path": "blob.bin"}, "binary file")


def test_missing_file_is_a_tool_error_not_a_crash(workspace: Path) -> None:
    _refused(make_builtin_tools(workspace)["read_file"], {"path": "nope.md"}, r"'nope\.md' is not a file in the workspace")


def test_missing_workspace_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ToolException, match="is not an existing folder"):
        make_builtin_tools(tmp_path / "missing")


def test_resolve_in_workspace_rejects_nul_bytes(workspace: Path) -> None:
    with pytest.raises(ToolException, match="not a valid path"):
        resolve_in_workspace(workspace, "a\x00b")


def test_list_dir_recursive_lists_every_file_below(workspace: Path) -> None:
    out = make_builtin_tools(workspace)["list_dir"].invoke({"recursive": True})
    assert out.splitlines() == ["notes.md", "src/app.py"]


def test_a_phrase_no_line_holds_answers_with_the_lines_holding_most_of_its_words(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text("# Tool\n\nMaintainer: Ada Byron <ada@example.org>\nLicense: MIT\n")
    (tmp_path / "sync.py").write_text('"""Upload ledgers."""\nUPLOAD_URL = "https://x.example/api/ledgers"\nimport os\n')
    search = make_builtin_tools(tmp_path, small_model_aids=True)["search_text"]
    out = search.invoke({"pattern": "maintainer's email address"}).splitlines()
    assert out == ["README.md:3: Maintainer: Ada Byron <ada@example.org>",
                   "(no line contains \"maintainer's email address\" exactly; these lines hold the most of its "
                   "words: maintainer, email, address)"]
    ranked = search.invoke({"pattern": "URL the sync module uploads ledgers to", "path": "sync.py"}).splitlines()
    assert ranked[0] == 'sync.py:2: UPLOAD_URL = "https://x.example/api/ledgers"'  # url + upload + ledger
    assert ranked[1] == 'sync.py:1: """Upload ledgers."""'


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ({"pattern": "requests", "path": "README.md"}, "no matches for 'requests' in README.md"),  # one word
        ({"pattern": "zebra quagga"}, "no matches for 'zebra quagga'"),  # no word anywhere
        ({"pattern": "maintainer.*email", "regex": True}, "no matches for 'maintainer.*email'"),  # a regex is exact
        ({"pattern": "what is the"}, "no matches for 'what is the'"),  # only glue words
    ],
)
def test_an_exact_search_that_finds_nothing_says_so_and_where(tmp_path: Path, args: dict[str, Any], expected: str) -> None:
    (tmp_path / "README.md").write_text("Maintainer: Ada\nThe email is ada@example.org\n")
    assert make_builtin_tools(tmp_path)["search_text"].invoke(args) == expected


def test_read_file_from_a_start_line(workspace: Path) -> None:
    assert make_builtin_tools(workspace)["read_file"].invoke({"path": "notes.md", "start_line": 2}) == (
        "TODO: write the intro\n"
    )


def test_no_builtin_takes_a_single_string_so_prose_is_never_used_as_a_path(workspace: Path) -> None:
    from soothe_planner.execution.runners import single_string_field

    assert [n for n, t in make_builtin_tools(workspace).items() if single_string_field(t)] == []


def test_an_agent_reads_the_refusal_and_can_correct_itself(workspace: Path) -> None:
    import warnings

    from langgraph.prebuilt import create_react_agent

    from soothe_planner.testing import ScriptedChatModel

    model = ScriptedChatModel([
        {"name": "read_file", "args": {"path": "/workspace/notes.md"}},  # a small model's typical first guess
        {"name": "read_file", "args": {"path": "notes.md"}},
        "The note says to write the intro.",
    ])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, list(make_builtin_tools(workspace).values()))
    out = agent.invoke({"messages": [("user", "What does notes.md say?")]})
    tool_messages = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert [m.status for m in tool_messages] == ["error", "success"]
    assert "outside the workspace" in str(tool_messages[0].content)
    assert out["messages"][-1].content == "The note says to write the intro."


def test_a_write_answers_with_the_start_of_what_it_wrote(workspace: Path) -> None:
    write = make_builtin_tools(workspace)["write_file"]
    long = "x" * (tools_mod.WRITE_ECHO_CHARS + 7)
    assert write.invoke({"path": "a.txt", "content": long}) == (
        f"wrote {len(long)} bytes to a.txt:\n{'x' * tools_mod.WRITE_ECHO_CHARS}… (7 more characters)")
    assert write.invoke({"path": "b.txt", "content": " \n"}) == "wrote 2 bytes to b.txt (nothing but whitespace)"
    assert (workspace / "a.txt").read_text() == long
