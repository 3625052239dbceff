"""How do the built-in tools walk, open and search files, and only inside the workspace?

The file-system half of the built-ins (``builtins.py`` holds the tools and what each answers):
one walk that ``list_dir(recursive=True)``, ``count_files``, a search and the planner's overview
of a workspace share (the same pruned folders, symlinks followed only inside), text files opened
through the workspace's held descriptors, and every ``OSError`` turned into a ``ToolException``
that names the path, so the model reads the reason and can correct itself.
"""

from __future__ import annotations

import errno
import functools
import inspect
import os
import stat
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import regex
from langchain_core.tools import ToolException

from soothe_planner.tools.workspace import Workspace

__all__ = [
    "compile_pattern",
    "is_binary",
    "is_folder",
    "listing",
    "open_text",
    "os_errors",
    "resolve_in_workspace",
    "searchable",
    "skipped_note",
    "workspace_files",
]

MAX_SKIPPED_NAMED = 20
SKIPPED_DIRS = frozenset({".git", ".hg", ".svn", "__pycache__", ".venv", "node_modules", ".soothe"})
"""Folders no walk enters: version control, caches, environments, and the run's own state."""


F = TypeVar("F", bound=Callable[..., Any])


def os_errors(func: F) -> F:
    """Every ``OSError`` out of ``func`` becomes a ``ToolException`` naming the path and the reason."""

    signature = inspect.signature(func)

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except OSError as exc:
            bound = signature.bind_partial(*args, **kwargs)
            bound.apply_defaults()
            path = bound.arguments.get("path", "?")
            reason = exc.strerror or errno.errorcode.get(exc.errno or 0) or type(exc).__name__
            raise ToolException(f"{func.__name__} {path!r}: {reason}") from None

    return wrapper  # type: ignore[return-value]


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """``path`` (relative to ``workspace``, or absolute) resolved, or ``ToolException`` if it escapes.

    For callers that want the location; the tools themselves open through the held descriptors.
    """
    ws = Workspace(workspace)
    try:
        resolved = ws.resolve(path)
    except OSError as exc:
        raise ToolException(f"path {path!r}: {exc.strerror or exc}") from None
    os.close(resolved.dir_fd)
    return ws.root.joinpath(*resolved.parts)


def is_binary(head: bytes) -> bool:
    return b"\x00" in head


def compile_pattern(pattern: str, is_regex: bool) -> Any:
    try:
        return regex.compile(pattern if is_regex else regex.escape(pattern), regex.IGNORECASE)
    except regex.error as exc:
        raise ToolException(f"pattern {pattern!r} is not a valid regular expression: {exc}") from None


def skipped_note(skipped: list[str]) -> str:
    shown = ", ".join(skipped[:MAX_SKIPPED_NAMED])
    more = f" and {len(skipped) - MAX_SKIPPED_NAMED} more" if len(skipped) > MAX_SKIPPED_NAMED else ""
    return f"not searched: {shown}{more}"


def listing(ws: Workspace, path: str, recursive: bool, *, file_as_itself: bool = False) -> tuple[list[str], str]:
    """``(names, the folder's workspace-relative path)``: every readable file below ``path`` (``recursive``),
    or its entries, folders marked ``/`` and symlinks ``@``; for a file, its own path when
    ``file_as_itself`` (a listing), else the error that it is not a folder (a count of files below it)."""
    if file_as_itself and not is_folder(ws, path):
        # a file lists as itself, as ``ls`` does: the name a model asked about is there
        file_fd, found = ws.open_file(path)
        os.close(file_fd)
        os.close(found.dir_fd)
        return [found.rel], found.rel
    fd, resolved = ws.open_folder(path)
    try:
        if recursive:
            names = list(_files_below(ws, fd, resolved.parts))
        else:
            names = []
            with os.scandir(fd) as entries:
                for entry in sorted(entries, key=lambda e: e.name):
                    suffix = "/" if entry.is_dir(follow_symlinks=False) else ("@" if entry.is_symlink() else "")
                    names.append(entry.name + suffix)
    finally:
        os.close(fd)
        os.close(resolved.dir_fd)
    return names, resolved.rel


def open_text(ws: Workspace, path: str, refusal: str) -> IO[bytes]:
    """``path`` opened for reading at its start; a ``ToolException`` ending in ``refusal`` if it is binary."""
    fd, resolved = ws.open_file(path)
    os.close(resolved.dir_fd)
    fh = os.fdopen(fd, "rb")
    if is_binary(fh.read(8192)):
        fh.close()
        raise ToolException(f"{path!r} is a binary file; {refusal}")
    fh.seek(0)
    return fh


def workspace_files(root: str | Path, *, limit: int = 120) -> tuple[list[str], int]:
    """``(the first `limit` file paths below root, how many files there are)``, as list_dir walks them.

    The planner's overview of a workspace (a small model guesses paths it was never shown): the
    same walk as ``list_dir(".", recursive=True)`` — the same pruned folders, symlinks followed only
    inside — so a plan is shown exactly the names a step could read. Counting goes on past
    ``limit`` (names are not kept) so the overview can say how many it left out.
    """
    ws = Workspace(root)
    fd, resolved = ws.open_folder(".")
    names: list[str] = []
    total = 0
    try:
        for name in _files_below(ws, fd, resolved.parts):
            total += 1
            if len(names) < limit:
                names.append(name)
    finally:
        os.close(fd)
        os.close(resolved.dir_fd)
    return names, total


def _files_below(ws: Workspace, fd: int, parts: tuple[str, ...]) -> Iterator[str]:
    """The workspace-relative name of every readable file below the open folder ``fd`` (at ``parts``):
    the one walk ``list_dir(recursive=True)``, ``count_files`` and the planner's overview share."""
    for found, dir_fd in ws.walk(fd, parts, SKIPPED_DIRS):
        if _readable_inside(ws, found, dir_fd):
            yield "/".join(found)


def _readable_inside(ws: Workspace, parts: tuple[str, ...], dir_fd: int) -> bool:
    """Whether the listed file is a file, or a symlink to a file inside the workspace."""
    st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
    if not stat.S_ISLNK(st.st_mode):
        return True
    try:
        fd, resolved = ws.open_file("/".join(parts))
    except (ToolException, OSError):
        return False
    os.close(fd)
    os.close(resolved.dir_fd)
    return True


def searchable(
    ws: Workspace, path: str, skipped: list[str], written: Collection[str] = (), *, max_bytes: int
) -> Iterable[tuple[str, IO[bytes]]]:
    """``(relative name, open file)`` for every file to search below ``path``; notes what it skips in ``skipped``.

    Files over ``max_bytes`` and files that cannot be read are named in ``skipped``; below a folder,
    the ``written`` ones (this run's own output) and a symlink that leads outside the workspace are
    not part of the data and are passed over silently.
    """
    fd, resolved = ws.open_folder(path) if is_folder(ws, path) else (None, None)
    if fd is None:
        file_fd, res = ws.open_file(path)
        os.close(res.dir_fd)
        yield from _sized(res.rel, os.fdopen(file_fd, "rb"), skipped, max_bytes)
        return
    assert resolved is not None
    try:
        for parts, dir_fd in ws.walk(fd, resolved.parts, SKIPPED_DIRS):
            rel = "/".join(parts)
            if rel in written:
                continue
            try:
                st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    try:
                        file_fd, res = ws.open_file(rel)
                    except ToolException:
                        continue
                    os.close(res.dir_fd)
                elif stat.S_ISREG(st.st_mode):
                    file_fd = os.open(
                        parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd
                    )
                else:
                    continue  # FIFOs, sockets, devices: not text files
            except OSError as exc:
                skipped.append(f"{rel} ({exc.strerror or type(exc).__name__})")
                continue
            yield from _sized(rel, os.fdopen(file_fd, "rb"), skipped, max_bytes)
    finally:
        os.close(fd)
        os.close(resolved.dir_fd)


def _sized(rel: str, fh: IO[bytes], skipped: list[str], max_bytes: int) -> Iterable[tuple[str, IO[bytes]]]:
    size = os.fstat(fh.fileno()).st_size
    if size > max_bytes:
        fh.close()
        skipped.append(f"{rel} ({size} bytes, over the {max_bytes}-byte search cap; "
                       "read it by line range with read_file)")
        return
    yield rel, fh


def is_folder(ws: Workspace, path: str) -> bool:
    resolved = ws.resolve(path)
    try:
        if not resolved.name:
            return True
        try:
            st = os.stat(resolved.name, dir_fd=resolved.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            raise ToolException(f"{path!r} does not exist in the workspace") from None
        return stat.S_ISDIR(st.st_mode)
    finally:
        os.close(resolved.dir_fd)
