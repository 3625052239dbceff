"""Which tools does a run get out of the box, and how are they kept inside their workspace?

Four built-ins over one workspace folder: ``list_dir``, ``read_file`` and ``search_text`` are
read-only (``metadata={"read_only": True}``, so plan mode may offer them); ``write_file`` is not
(plan mode withholds it). They exist so a configured run can do something useful on a folder of
files with no code written; anything richer is a user's tool named by ``pkg.module:attr``.

What was weighed:

- Confinement is checked on the *resolved* path: ``(workspace / path).resolve()`` must stay under
  the resolved workspace. That one rule rejects ``..`` escapes, absolute paths outside and symlinks
  that point outside, and it still allows an absolute path that happens to lie inside. A race
  with someone swapping a symlink between the check and the open is out of scope: the threat is a
  model that wanders, not a hostile local user.
- Failures raise ``ToolException`` with a message naming the path and the rule, and the tools are
  built with ``handle_tool_error=True``: a tool *call* gets that message back as an error
  ``ToolMessage`` (``status="error"``), so an agent — which is how steps use these tools — can
  read it and correct itself (a small model's first guess at a path is often ``/workspace/x``),
  instead of the whole step dying on the first slip. The step's outcome is then the agent's.
- Sizes are capped (a read, a listing, the search hits, a write) so one call cannot flood a prompt
  or fill a disk; a truncated answer says so.
- Each tool takes more than one argument (``recursive``, ``start_line``, ...), so a plan names
  them in a typed tool step (``tool`` and ``args``), checked at ingest against the schema
  ``tool_args_schema`` reads from the tool, rather than passing the step's prose as a path.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool, ToolException

__all__ = [
    "BUILTIN_TOOL_NAMES",
    "MAX_LIST_ENTRIES",
    "MAX_READ_CHARS",
    "MAX_SEARCH_HITS",
    "MAX_WRITE_CHARS",
    "make_builtin_tools",
    "resolve_in_workspace",
    "tool_args_schema",
]

MAX_READ_CHARS = 20_000
MAX_LIST_ENTRIES = 200
MAX_SEARCH_HITS = 50
MAX_SEARCH_FILE_BYTES = 1_000_000
MAX_WRITE_CHARS = 1_000_000
_SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "node_modules", ".soothe"})

BUILTIN_TOOL_NAMES: tuple[str, ...] = ("list_dir", "read_file", "search_text", "write_file")


def tool_args_schema(tool: BaseTool) -> dict[str, Any] | None:
    """The JSON schema of the arguments a plan may give ``tool`` (None when it cannot be read).

    ``tool_call_schema`` is what a model is shown: arguments the runtime injects (a
    ``RunnableConfig``, an ``InjectedToolArg``) are left out. Titles are dropped: they repeat the
    names and would ride in every checkpoint of the plan.
    """
    raw: dict[str, Any]
    try:
        schema: Any = tool.tool_call_schema
        raw = dict(schema) if isinstance(schema, dict) else dict(schema.model_json_schema())
    except Exception:  # a tool with an unusual schema: its argument listing is the best left
        try:
            raw = {"type": "object", "properties": dict(tool.args)}
        except Exception:
            return None
    raw.pop("title", None)
    raw.pop("description", None)
    props = raw.get("properties")
    if isinstance(props, dict):
        raw["properties"] = {
            k: {kk: vv for kk, vv in v.items() if kk != "title"} if isinstance(v, dict) else v for k, v in props.items()
        }
    return raw


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """``path`` (relative to ``workspace``, or absolute) resolved, or ``ToolException`` if it escapes."""
    root = workspace.resolve()
    if not isinstance(path, str) or "\x00" in path:
        raise ToolException(f"path {path!r} is not a valid path")
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = candidate.resolve()
    if not resolved.is_relative_to(root):
        raise ToolException(
            f"path {path!r} is outside the workspace (it resolves to a location outside it); "
            "use a path relative to the workspace root"
        )
    return resolved


def _relative(root: Path, path: Path) -> str:
    rel = path.relative_to(root).as_posix()
    return rel or "."


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head


def _walk_files(root: Path, start: Path) -> Iterator[Path]:
    if start.is_file():
        yield start
        return
    for dirpath, dirnames, filenames in os.walk(start):
        # sorted, so results are stable; hidden tool folders are noise for a model
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIPPED_DIRS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            # a symlinked file may point outside: only files that resolve inside are searched
            if path.resolve().is_relative_to(root):
                yield path


def make_builtin_tools(workspace: str | Path) -> dict[str, BaseTool]:
    """The built-in tools bound to ``workspace``, by name. The folder must exist."""
    root = Path(workspace).expanduser().resolve()
    if not root.is_dir():
        raise ToolException(f"workspace {str(workspace)!r} is not an existing folder")

    def list_dir(path: str = ".", recursive: bool = False) -> str:
        target = resolve_in_workspace(root, path)
        if not target.is_dir():
            raise ToolException(f"{path!r} is not a folder in the workspace")
        if recursive:
            entries = [p for p in _walk_files(root, target)]
            names = [_relative(root, p) for p in entries]
        else:
            entries = sorted(target.iterdir(), key=lambda p: p.name)
            names = [p.name + ("/" if p.is_dir() else "") for p in entries]
        lines = names[:MAX_LIST_ENTRIES]
        if len(names) > MAX_LIST_ENTRIES:
            lines.append(f"... ({len(names) - MAX_LIST_ENTRIES} more entries not shown)")
        return "\n".join(lines) if lines else f"{_relative(root, target)} is empty"

    def read_file(path: str, start_line: int = 1) -> str:
        target = resolve_in_workspace(root, path)
        if not target.is_file():
            raise ToolException(f"{path!r} is not a file in the workspace")
        with target.open("rb") as fh:
            data = fh.read(MAX_SEARCH_FILE_BYTES + 1)
        if _is_binary(data[:8192]):
            raise ToolException(f"{path!r} is a binary file; only text files can be read")
        text = data.decode("utf-8", errors="replace")
        if start_line > 1:
            text = "".join(text.splitlines(keepends=True)[start_line - 1 :])
        size = target.stat().st_size
        if len(text) > MAX_READ_CHARS or size > len(data):
            return text[:MAX_READ_CHARS] + (
                f"\n... [truncated: file is {size} bytes, shown {MAX_READ_CHARS} chars; "
                "read on with start_line]"
            )
        return text

    def search_text(pattern: str, path: str = ".", regex: bool = False) -> str:
        if not pattern:
            raise ToolException("search pattern is empty")
        try:
            matcher = re.compile(pattern if regex else re.escape(pattern), re.IGNORECASE)
        except re.error as exc:
            raise ToolException(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None
        start = resolve_in_workspace(root, path)
        if not start.exists():
            raise ToolException(f"{path!r} does not exist in the workspace")
        hits: list[str] = []
        more = False
        for file in _walk_files(root, start):
            try:
                if file.stat().st_size > MAX_SEARCH_FILE_BYTES:
                    continue
                data = file.read_bytes()
            except OSError:
                continue
            if _is_binary(data[:8192]):
                continue
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if matcher.search(line):
                    if len(hits) >= MAX_SEARCH_HITS:
                        more = True
                        break
                    hits.append(f"{_relative(root, file)}:{number}: {line.strip()[:200]}")
            if more:
                break
        if not hits:
            return f"no matches for {pattern!r}"
        if more:
            hits.append(f"... (stopped at {MAX_SEARCH_HITS} matches)")
        return "\n".join(hits)

    def write_file(path: str, content: str) -> str:
        if len(content) > MAX_WRITE_CHARS:
            raise ToolException(f"content is {len(content)} chars, over the {MAX_WRITE_CHARS}-char write limit")
        target = resolve_in_workspace(root, path)
        if target == root or target.is_dir():
            raise ToolException(f"{path!r} is a folder; give a file path")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode('utf-8'))} bytes to {_relative(root, target)}"

    specs: list[tuple[Callable[..., str], str, bool]] = [
        (
            list_dir,
            "List the files and folders in a workspace folder (default: the workspace root); "
            "recursive=true lists every file below it.",
            True,
        ),
        (
            read_file,
            f"Read a text file from the workspace (at most {MAX_READ_CHARS} characters, from start_line).",
            True,
        ),
        (
            search_text,
            "Search the workspace's text files for a pattern (case-insensitive; regex=true for a regular "
            f"expression). Returns 'file:line: text' lines, at most {MAX_SEARCH_HITS}.",
            True,
        ),
        (write_file, "Write a text file in the workspace, creating folders as needed (overwrites).", False),
    ]
    tools: dict[str, BaseTool] = {}
    for func, description, read_only in specs:
        metadata: dict[str, Any] = {"read_only": read_only, "builtin": True}
        tools[func.__name__] = StructuredTool.from_function(
            func=func, name=func.__name__, description=description, metadata=metadata, handle_tool_error=True
        )
    return tools
