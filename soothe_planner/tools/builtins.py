"""Which tools does a run get out of the box, and what does each promise to answer truthfully?

Six built-ins over one ``Workspace`` (see ``workspace.py`` for how a path is kept inside it, and
``files.py`` for the walk and the reads they share):
``list_dir``, ``read_file``, ``search_text``, ``count_files`` and ``count_lines`` are read-only
(``metadata={"read_only": True}``, so plan mode may offer them); ``write_file`` is not (plan mode
withholds it). They exist so a
configured run can do something useful on a folder of files with no code written; anything richer
is a user's tool named by ``pkg.module:attr``.

What was weighed:

- **Errors reach the model.** Every failure — a rule broken, and every ``OSError`` the file
  system raises (``ENAMETOOLONG``, ``EEXIST``, ``EACCES``, ...) — becomes a ``ToolException``
  naming the path and the reason, and the tools are built with ``handle_tool_error=True``: an agent
  gets the message back as an error ``ToolMessage`` and can correct itself (a small model's first
  guess at a path is often ``/workspace/x``), instead of the whole step dying on the first slip.
  A typed tool step reads the same error status and fails as ``tool_error`` with that message.
- **Caps never give a false answer.** A read is capped in characters, not in file size: any line
  range of a file of any size can be read (``start_line``/``end_line``), and a cut answer says
  where to read on. A search skips files over ``MAX_SEARCH_FILE_BYTES`` (to bound its time), and
  names every file it skipped or could not read, so "no matches" is never said about a file that
  was not searched. Listings and hits are capped and say so. A listing marks folders with ``/`` and
  symlinks with ``@`` (a symlink is not followed to say what it points at: it may point outside).
- **A pattern cannot freeze the process.** ``re`` holds the GIL for the whole match, so a
  catastrophic pattern (``(a|aa)+$`` on a long line) stops every thread, the step's timeout
  included. Patterns run on the ``regex`` engine instead, with ``concurrent=True`` (it releases the
  GIL while matching, so the step's timeout fires on time) and a ``timeout`` per call drawn from
  one deadline for the whole search (so the abandoned worker thread stops too, and the model gets
  an error naming the pattern). ``regex`` was already installed with ``tiktoken`` (a dependency of
  ``langchain-openai``) and accepts ``re``'s syntax. A subprocess per search would cost a process
  start per call and a second copy of the walk; a restricted pattern language would refuse
  patterns models write every day.
- **Answers a small model can use.** A literal phrase that no line holds exactly ("maintainer's
  email address") is answered with the lines holding most of its words, labelled as such
  (``search_words.py``), instead of a bare "no matches" that a small model re-plans unchanged; a
  "no matches" names the path it searched. A write answers with the start of what it wrote, so
  whoever judges the goal sees the content, not only a byte count.
- **Counts by code, not by a model.** A small model miscounts a listing it is shown (11 files,
  four of them Python: "11"; four CSV rows: "3"), so a count's number is trusted only when a tool
  counted it (``planner/grounding.py``). ``count_files`` (a glob over names, or over paths when the
  pattern holds a ``/``) and ``count_lines`` (every line, or those holding a pattern, of a file or
  of every text file below a folder) answer with the number first — "4 files below . match
  '*.py'" — and then what they counted. A count stopped at its cap says "at least N", which
  grounds nothing; files a count skipped are named, as a search names them. A pattern with no
  wildcard that names no file ("python" for Python files) is refused with the patterns that were
  probably meant, rather than answered "0 files".
- Each tool takes more than one argument (``recursive``, ``start_line``, ...), so a plan names
  them in a typed tool step (``tool`` and ``args``), checked at ingest against the schema
  ``tool_args_schema`` reads from the tool, or one model call fills them in for a step that lists
  the tool without args; the step's prose is never passed as a path.
"""

from __future__ import annotations

import codecs
import fnmatch
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, Any

import regex
from langchain_core.tools import BaseTool, StructuredTool, ToolException

from soothe_planner.tools.files import (
    compile_pattern,
    is_binary,
    is_folder,
    listing,
    open_text,
    os_errors,
    resolve_in_workspace,
    searchable,
    skipped_note,
    workspace_files,
)
from soothe_planner.tools.schema import COUNTS_KEY, WRITES_PATH_ARG_KEY
from soothe_planner.tools.search_words import MAX_WORD_CANDIDATES, phrase_words, rank_by_words, words_matcher
from soothe_planner.tools.workspace import Workspace

__all__ = [
    "BLANK_WRITE_MARK",
    "BUILTIN_TOOL_NAMES",
    "COUNTING_TOOL_NAMES",
    "MAX_COUNTED_LINES",
    "MAX_LIST_ENTRIES",
    "MAX_READ_CHARS",
    "MAX_SEARCH_FILE_BYTES",
    "MAX_SEARCH_HITS",
    "MAX_WRITE_CHARS",
    "NEAREST_LINES_MARK",
    "SEARCH_STOPPED_MARK",
    "SEARCH_TIME_LIMIT_S",
    "SEARCH_TOOL_NAME",
    "WRITE_ECHO_CHARS",
    "WRITE_TOOL_NAME",
    "make_builtin_tools",
    "resolve_in_workspace",
    "workspace_files",
    "write_echo",
    "wrote_blank",
]

Answer = tuple[str, dict[str, Any]]
"""What a built-in returns: its text for the model, and its data (the tool's artifact)."""
MAX_READ_CHARS = 20_000
MAX_LIST_ENTRIES = 200
MAX_SEARCH_HITS = 50
MAX_COUNTED_LINES = 100_000
MAX_COUNTED_SHOWN = 20
"""A line count with a pattern lists the first lines it counted (the rest are only counted)."""
MAX_SEARCH_FILE_BYTES = 1_000_000
MAX_WRITE_CHARS = 1_000_000
SEARCH_TIME_LIMIT_S = 10.0
WRITE_ECHO_CHARS = 300
"""A write answers with the start of what it wrote: "wrote 29 bytes" cannot tell whoever judges the
goal (a small assessing model kept saying "continue" over a correct file it could not see) that
the file holds what was asked."""
_LINE_CHUNK = 64 * 1024  # a line longer than this is read in pieces, so memory stays bounded
_EVERY_LINE = regex.compile("")

BUILTIN_TOOL_NAMES: tuple[str, ...] = ("list_dir", "read_file", "search_text", "count_files", "count_lines", "write_file")
SEARCH_TOOL_NAME = "search_text"
"""The built-in whose answer lists each matching line as ``path:line: text``: what an "every line"
goal's delivery is checked against (``planner/grounding.py``). Trust goes by name, as for counts."""
WRITE_TOOL_NAME = "write_file"


def write_echo(content: str) -> str:
    """What a write's answer shows of the text it wrote, after its first line: all of it, or its
    first ``WRITE_ECHO_CHARS`` characters and how many more there are."""
    if len(content) <= WRITE_ECHO_CHARS:
        return content
    return f"{content[:WRITE_ECHO_CHARS]}… ({len(content) - WRITE_ECHO_CHARS} more characters)"
"""The built-in that writes a file (``path``, ``content``): the write an "every line" goal's check
prescribes is made with it (``planner/grounding.py``)."""
NEAREST_LINES_MARK = "(no line contains "
"""How a search's answer starts its note when no line held the pattern and the lines listed are the
nearest candidates, not matches (``planner/grounding.py`` checks no delivery against those)."""
SEARCH_STOPPED_MARK = "... (stopped at "
"""How a search cut at its limit says so: the lines it returned are not all there are (no check
vouches for a delivery of them as every line)."""
BLANK_WRITE_MARK = "(nothing but whitespace)"
"""Ends a write's answer when the text it wrote was blank: the file exists but holds nothing asked for."""


def wrote_blank(output: str) -> bool:
    """Whether a step's output is a write's answer for blank text (``BLANK_WRITE_MARK``)."""
    return output.rstrip().endswith(BLANK_WRITE_MARK)


COUNTING_TOOL_NAMES: frozenset[str] = frozenset({"count_files", "count_lines"})
"""The built-ins whose answer starts with a number they counted: the one source a count's number may
come from (``planner/grounding.py``). Trust goes by name: a user's tool configured under one of
these names would be read the same way."""

def _read_lines(fh: IO[bytes], path: str, start_line: int, end_line: int | None, size: int) -> str:
    """Lines ``start_line``..``end_line`` of ``fh``, at most ``MAX_READ_CHARS`` characters, with a note if cut."""
    line, unterminated = 1, False
    while line < start_line:
        piece = fh.readline(_LINE_CHUNK)
        if not piece:
            count = line - 1 + unterminated  # a last line with no newline is a line too
            raise ToolException(f"{path!r} has {count} line(s); start_line {start_line} is past the end")
        unterminated = not piece.endswith(b"\n")
        if not unterminated:
            line += 1
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out: list[str] = []
    chars = 0
    while end_line is None or line <= end_line:
        piece = fh.readline(_LINE_CHUNK)
        if not piece and not out and start_line > 1:
            raise ToolException(f"{path!r} has {line - 1} line(s); start_line {start_line} is past the end")
        if not piece:
            text = decoder.decode(b"", final=True)
            out.append(text)
            return "".join(out)
        text = decoder.decode(piece)
        if chars + len(text) > MAX_READ_CHARS:
            out.append(text[: MAX_READ_CHARS - chars])
            started_inside = chars == 0  # one line longer than the whole cap
            where = (
                f"line {line} alone is longer than that; its start is shown, read on with start_line={line + 1}"
                if started_inside
                else f"shown lines {start_line}-{line - 1}; read on with start_line={line}"
            )
            return "".join(out) + (
                f"\n... [truncated: file is {size} bytes, shown {MAX_READ_CHARS} chars; {where}]"
            )
        out.append(text)
        chars += len(text)
        if piece.endswith(b"\n"):
            line += 1
    return "".join(out)


def make_builtin_tools(
    workspace: str | Path, *, protected_files: Iterable[str | Path] = (), small_model_aids: bool = False,
) -> dict[str, BaseTool]:
    """The built-in tools bound to ``workspace``, by name. The folder must exist.

    ``protected_files`` are files the run depends on (its config, its checkpoint database) that
    ``write_file`` must never touch, however the path to them is spelled.

    Each tool answers text for the model and, as its artifact (``StepResult.outcome``), the data a
    check needs: a count and what it counted, the lines a search found, the path and bytes written.

    ``small_model_aids`` (on for a model that declares the small-model rules): a literal phrase no
    line holds is answered with the lines nearest its words, and a search or line count over a
    folder passes over the files these tools have written: what a
    run wrote is its own output, not the workspace's data. On the 1.5B, a re-plan of
    "find every line containing TODO … and write those lines to TODO_REPORT.md" searched again
    after a first, incomplete report, and the new report listed the old one's line as a TODO line
    of the workspace. A search that names the file still reads it. The skip is not noted in the
    output, which a plan may write on verbatim ({{s1.output}}): a note there would land in the
    report.
    """
    ws = Workspace(workspace, protected_files=protected_files)
    written: set[str] = set()  # workspace-relative paths write_file wrote (passed over by searches, with the aids)
    nearest_lines = skip_own_writes = small_model_aids

    @os_errors
    def list_dir(path: str = ".", recursive: bool = False) -> Answer:
        names, rel = listing(ws, path, recursive, file_as_itself=True)
        lines = names[:MAX_LIST_ENTRIES]
        if len(names) > MAX_LIST_ENTRIES:
            lines.append(f"... ({len(names) - MAX_LIST_ENTRIES} more entries not shown)")
        data = {"path": rel or ".", "entries": len(names), "complete": len(names) <= MAX_LIST_ENTRIES}
        return ("\n".join(lines) if lines else f"{rel} is empty"), data

    @os_errors
    def read_file(path: str, start_line: int = 1, end_line: int | None = None) -> Answer:
        if start_line < 1:
            raise ToolException(f"start_line must be >= 1, got {start_line}")
        if end_line is not None and end_line < start_line:
            raise ToolException(f"end_line must be >= start_line ({start_line}), got {end_line}")
        with open_text(ws, path, "only text files can be read") as fh:
            text = _read_lines(fh, path, start_line, end_line, os.fstat(fh.fileno()).st_size)
        return text, {"path": path.strip()}

    def _scan(path: str, pattern: str, matcher: Any, cap: int, skipped: list[str]) -> tuple[list[tuple[str, str]], bool]:
        """``([(file:line, text)], stopped at cap)`` for the lines below ``path`` that ``matcher`` finds."""
        deadline = time.monotonic() + SEARCH_TIME_LIMIT_S
        hits: list[tuple[str, str]] = []
        for rel, fh in searchable(ws, path, skipped, written, max_bytes=MAX_SEARCH_FILE_BYTES):
            with fh:
                if is_binary(fh.read(8192)):
                    continue
                fh.seek(0)
                for number, raw in enumerate(fh, 1):
                    line = raw.decode("utf-8", errors="replace")
                    try:
                        found = matcher.search(
                            line, concurrent=True, timeout=max(deadline - time.monotonic(), 0.001)
                        )
                    except TimeoutError:
                        raise ToolException(
                            f"pattern {pattern!r} took longer than {SEARCH_TIME_LIMIT_S:g}s (stopped at "
                            f"{rel}:{number}); nested repetition such as (a+)+ or (a|aa)+ backtracks "
                            "exponentially: simplify the pattern"
                        ) from None
                    if found:
                        if len(hits) >= cap:
                            return hits, True
                        hits.append((f"{rel}:{number}", line.strip()[:200]))
        return hits, False

    @os_errors
    def search_text(pattern: str, path: str = ".", regex: bool = False) -> Answer:
        if not pattern:
            raise ToolException("search pattern is empty")
        skipped: list[str] = []
        found, more = _scan(path, pattern, compile_pattern(pattern, regex), MAX_SEARCH_HITS, skipped)
        lines = [f"{label}: {text}" for label, text in found]
        data: dict[str, Any] = {"pattern": pattern, "path": path.strip() or ".", "regex": regex, "lines": list(lines),
                                "exact": bool(found), "complete": not more and not skipped}
        words = [] if found or regex or not nearest_lines else phrase_words(pattern)
        if words:
            candidates, _ = _scan(path, pattern, words_matcher(words), MAX_WORD_CANDIDATES, [])
            ranked = rank_by_words(candidates, words)
            if ranked:
                # the lines first: a small model reading "no line contains" first answered MISSING
                lines = [*ranked, f"{NEAREST_LINES_MARK}{pattern!r} exactly; these lines hold the most of "
                                  f"its words: {', '.join(words)})"]
        if not lines:
            where = "" if path.strip() in {"", "."} else f" in {path}"
            lines = [f"no matches for {pattern!r}{where}"]
        if more:
            lines.append(f"{SEARCH_STOPPED_MARK}{MAX_SEARCH_HITS} matches)")
        if skipped:
            lines.append(skipped_note(skipped))
        return "\n".join(lines), data

    @os_errors
    def count_files(pattern: str = "*", path: str = ".") -> Answer:
        if not pattern.strip():
            raise ToolException("count_files: the pattern is empty; use '*' to count every file")
        names, rel = listing(ws, path, recursive=True)
        folded = pattern.strip().lower()
        # a pattern with a folder in it is matched against the path, one without against the name
        hits = [n for n in names if fnmatch.fnmatchcase((n if "/" in folded else n.rsplit("/", 1)[-1]).lower(), folded)]
        where = rel or "."
        if not hits and folded.startswith(".") and "/" not in folded and not any(c in folded for c in "*?["):
            # ".go" names no file: it is the extension, and the answer says the pattern it counted
            pattern = folded = "*" + folded
            hits = [n for n in names if fnmatch.fnmatchcase(n.rsplit("/", 1)[-1].lower(), folded)]
        if not hits and not any(c in folded for c in "*?["):
            # "python" for Python files: 0 would be a count of the wrong thing, stated as a fact
            raise ToolException(
                f"no file below {where} is named exactly {pattern.strip()!r}: a pattern without * or ? matches "
                f"whole names only; '*.py' matches the names ending in .py, '*{folded}*' those containing {folded!r}"
            )
        head = f"{len(hits)} file{'' if len(hits) == 1 else 's'} below {where} match {pattern.strip()!r}"
        data = {"count": len(hits), "complete": True, "counted": head}
        if not hits:
            return head, data
        shown = hits[:MAX_LIST_ENTRIES]
        if len(hits) > MAX_LIST_ENTRIES:
            shown.append(f"... ({len(hits) - MAX_LIST_ENTRIES} more not shown)")
        return head + ":\n" + "\n".join(shown), data

    @os_errors
    def count_lines(path: str, pattern: str = "", regex: bool = False) -> Answer:
        folder = is_folder(ws, path)
        if not folder:
            open_text(ws, path, "only a text file's lines can be counted").close()
        skipped: list[str] = []
        matcher = compile_pattern(pattern, regex) if pattern else _EVERY_LINE
        found, more = _scan(path, pattern or "(every line)", matcher, MAX_COUNTED_LINES, skipped)
        n = len(found)
        files = {label.rsplit(":", 1)[0] for label, _ in found}
        what = f"{'at least ' if more else ''}{n} line{'' if n == 1 else 's'}"
        if folder:
            what += f" in {len(files)} file{'' if len(files) == 1 else 's'} below {path.strip() or '.'}"
        else:
            what += f" in {path.strip()}"
        if pattern:
            what += f" contain {pattern!r}" if n != 1 else f" contains {pattern!r}"
        data = {"count": n, "complete": not more and not skipped, "counted": what}
        # what was counted, not only how many: a pattern that also matches another column or a
        # comment shows here, for whoever judges the count (the assessment, a person)
        shown = [f"{label}: {text}" for label, text in found[:MAX_COUNTED_SHOWN]] if pattern else []
        if pattern and n > MAX_COUNTED_SHOWN:
            shown.append(f"... ({n - MAX_COUNTED_SHOWN} more not shown)")
        body = (":\n" + "\n".join(shown)) if shown else ""
        return what + body + (f"\n{skipped_note(skipped)}" if skipped else ""), data

    @os_errors
    def write_file(path: str, content: str) -> Answer:
        if len(content) > MAX_WRITE_CHARS:
            raise ToolException(f"content is {len(content)} chars, over the {MAX_WRITE_CHARS}-char write limit")
        data = content.encode("utf-8")
        resolved = ws.write_file(path, data)
        if skip_own_writes:
            written.add(resolved.rel)
        record = {"path": resolved.rel, "bytes": len(data), "blank": not content.strip()}
        if not content.strip():
            return f"wrote {len(data)} bytes to {resolved.rel} {BLANK_WRITE_MARK}", record
        return f"wrote {len(data)} bytes to {resolved.rel}:\n{write_echo(content)}", record

    specs: list[tuple[Callable[..., Answer], str, bool]] = [
        (
            list_dir,
            "List the files and folders in a workspace folder (default: the workspace root; folders end "
            "in '/'); recursive=true lists every file below it.",
            True,
        ),
        (
            read_file,
            f"Read a text file from the workspace (lines start_line..end_line, default all; at most "
            f"{MAX_READ_CHARS} characters, a cut answer says where to read on).",
            True,
        ),
        (
            search_text,
            "Search the workspace's text files for a pattern (case-insensitive; regex=true for a regular "
            f"expression). Returns 'file:line: text' lines, at most {MAX_SEARCH_HITS}, and names skipped files; "
            "a phrase no line holds exactly returns the lines holding most of its words, labelled so.",
            True,
        ),
        (
            count_files,
            "Count the files below a folder whose names match a glob pattern such as '*.py' (every folder "
            "below it; the answer starts with the number, then lists them).",
            True,
        ),
        (
            count_lines,
            "Count the lines of a text file, or of every text file below a folder; with a pattern, only "
            "the lines containing it (case-insensitive; regex=true for a regular expression).",
            True,
        ),
        (write_file, "Write a text file in the workspace, creating folders as needed (overwrites); answers with "
                     "the start of what it wrote.", False),
    ]
    tools: dict[str, BaseTool] = {}
    for func, description, read_only in specs:
        metadata: dict[str, Any] = {"read_only": read_only, "builtin": True}
        if func is write_file:
            metadata[WRITES_PATH_ARG_KEY] = "path"
        if func.__name__ in COUNTING_TOOL_NAMES:
            metadata[COUNTS_KEY] = True
        tools[func.__name__] = StructuredTool.from_function(
            func=func, name=func.__name__, description=description, metadata=metadata, handle_tool_error=True,
            response_format="content_and_artifact",
        )
    return tools


