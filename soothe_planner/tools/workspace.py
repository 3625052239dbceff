"""How does a tool open a path inside its workspace — and never outside, even while the folder changes under it?

A ``Workspace`` holds a descriptor of its root folder, opened once, and resolves every path one
component at a time *relative to descriptors it holds*, with no-follow semantics
(``os.open(name, O_NOFOLLOW, dir_fd=parent)``). A symlink met on the way is read
(``readlink``) and its target spliced into the remaining components, so it is followed only by
this code, from descriptors it already holds: a target that climbs above the root (``..`` past
it, or an absolute path elsewhere) is refused. ``..`` pops a held descriptor rather than asking
the file system, so a folder moved away mid-walk cannot lead out either. The final open carries
``O_NOFOLLOW`` too: a file swapped for a symlink between the check and the open fails the open
(``ELOOP``) and is resolved again, never followed blindly. The check and the use are one walk,
so there is no window between them to race.

What was weighed:

- ``openat2(..., RESOLVE_BENEATH)`` does the same walk in the kernel, but Python (3.11–3.13)
  has no binding for it; calling the raw syscall through ``ctypes`` would add a Linux-only path
  (and one that seccomp filters in containers may refuse) beside the portable walk, which would
  still be needed. The walk is the one path.
- The root descriptor is held for the workspace's lifetime (closed when it is collected), so
  swapping the workspace folder itself for a symlink after the tools were built changes nothing.
- **Protected paths** are refused for writes however they are spelled: any component named
  ``.git`` or ``.soothe`` (the package's state folder) anywhere below the root, compared
  case-insensitively (case-insensitive file systems reach ``.git`` as ``.GIT``), after symlinks
  and ``..`` were resolved; and the files the run depends on (its config, its checkpoint database,
  the approval seal's key), each with SQLite's ``-wal``/``-shm``/``-journal`` files beside it
  whatever its name or suffix (a checkpoint at ``state/ckpt`` has a ``state/ckpt-wal`` too),
  matched both by their resolved path (case-insensitively) and by device and inode, so a hard
  link to them is refused too.
- **Secret control files are refused to every tool.** The state folder (``.soothe``) cannot be
  read, listed or searched either, and a protected file given as a ``ControlFile(...,
  secret=True)`` (the seal's key, the checkpoint and its side files, wherever the config puts
  them) is refused to reads and skipped by walks: a step's output would otherwise copy the key
  into the very checkpoint the key's seal protects.
- **A write replaces the name, never the file behind it.** The new content goes to a temporary
  file in the same folder, renamed over the name: a file hard-linked to one outside the workspace
  keeps the outside copy untouched (writing in place would rewrite it), and a reader never sees a
  half-written file.
- FIFOs and devices are not files to read or write: files are opened with ``O_NONBLOCK`` (a FIFO
  would otherwise block the open forever) and refused unless ``fstat`` says regular file.
"""

from __future__ import annotations

import contextlib
import os
import stat
import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PosixPath, PurePosixPath

from langchain_core.tools import ToolException

__all__ = ["PROTECTED_NAMES", "STATE_NAMES", "ControlFile", "Resolved", "Workspace"]

PROTECTED_NAMES = frozenset({".git", ".soothe"})
STATE_NAMES = frozenset({".soothe"})
"""Folder names no tool reads or writes: the package's state folder (checkpoints, the seal's key)."""
_MAX_LINKS = 40  # as the kernel's own limit on symlinks in one lookup
_RETRIES = 3  # re-resolutions after a file turned into a symlink between the walk and the open
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _NOFOLLOW | _CLOEXEC
_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")


class ControlFile(PosixPath):
    """A path the run depends on; ``ControlFile(path, secret=True)`` is refused to reads as well as writes."""

    secret: bool = False

    def __new__(cls, *parts: str | os.PathLike[str], secret: bool = False) -> ControlFile:
        made = super().__new__(cls, *parts)
        made.secret = secret
        return made


def _outside(path: str) -> ToolException:
    return ToolException(
        f"path {path!r} is outside the workspace (it resolves to a location outside it); "
        "use a path relative to the workspace root"
    )


def _close_all(fds: Iterable[int]) -> None:
    for fd in fds:
        os.close(fd)


@dataclass(frozen=True)
class Resolved:
    """A path below the root: the held folder that contains it, its name there, and its canonical parts.

    ``name`` is empty when the path is a folder that the walk ended *in* (the root, ``.``, ``a/..``):
    then ``dir_fd`` is that folder itself. The caller owns ``dir_fd`` and closes it.
    """

    dir_fd: int
    name: str
    parts: tuple[str, ...]

    @property
    def rel(self) -> str:
        return "/".join(self.parts) or "."


class Workspace:
    """One folder the built-in tools may touch, and the paths in it they must never write."""

    def __init__(self, root: str | Path, *, protected_files: Iterable[str | Path] = ()) -> None:
        self.root = Path(root).expanduser().resolve()
        try:
            self._fd = os.open(self.root, _DIR_FLAGS)
        except OSError:
            raise ToolException(f"workspace {str(root)!r} is not an existing folder") from None
        weakref.finalize(self, os.close, self._fd)
        files: list[Path] = []
        secrets: list[Path] = []
        for item in protected_files:
            path = Path(item).expanduser().resolve()
            # every file gets its side files: SQLite makes them whatever the database is called
            family = [path, *(path.with_name(path.name + side) for side in _SQLITE_SIDE_FILES)]
            files += family
            if isinstance(item, ControlFile) and item.secret:
                secrets += family
        self._protected_files = tuple(files)
        self._secret_files = tuple(secrets)

    # ------------------------------------------------------------------ resolution

    def _inside_parts(self, path: str, original: str) -> list[str]:
        """The components below the root of an absolute ``path``, or ``ToolException`` if it is elsewhere."""
        pure = PurePosixPath(os.path.normpath(path))
        if pure.is_relative_to(self.root):
            return list(pure.relative_to(self.root).parts)
        # spelled through a symlink outside the workspace (e.g. /tmp -> /private/tmp): the real path
        # only chooses where the walk starts; the walk itself still runs from the held root
        real = PurePosixPath(os.path.realpath(path))
        if real.is_relative_to(self.root):
            return list(real.relative_to(self.root).parts)
        raise _outside(original)

    def resolve(self, path: str, *, for_write: bool = False) -> Resolved:
        """Walk ``path`` from the root descriptor; ``for_write`` creates missing folders and refuses protected paths."""
        if not isinstance(path, str) or "\x00" in path or not path.strip():
            raise ToolException(f"path {path!r} is not a valid path")
        pending = deque(self._inside_parts(path, path) if os.path.isabs(path) else path.split("/"))
        stack = [os.dup(self._fd)]
        names: list[str] = []
        links = 0
        try:
            while pending:
                part = pending.popleft()
                if part in ("", "."):
                    continue
                if part == "..":
                    if not names:
                        raise _outside(path)
                    os.close(stack.pop())
                    names.pop()
                    continue
                if for_write:
                    self._refuse_protected_name(path, part)
                elif part.casefold() in STATE_NAMES:
                    raise ToolException(
                        f"{path!r} is inside {part!r}, the run-state folder, which the built-in tools never read"
                    )
                last = not any(p not in ("", ".") for p in pending)
                try:
                    st = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
                except FileNotFoundError:
                    if last:
                        return self._found(stack, part, names)
                    rest = [p for p in pending if p not in ("", ".")]
                    if not for_write or ".." in rest:
                        raise ToolException(
                            f"{path!r}: there is no folder {'/'.join([*names, part])!r} in the workspace"
                        ) from None
                    # nothing is created until the whole rest of the path is known to be writable
                    for name in rest:
                        self._refuse_protected_name(path, name)
                    # made meanwhile by someone else: the no-follow open below decides what it is
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(part, dir_fd=stack[-1])
                    st = os.stat(part, dir_fd=stack[-1], follow_symlinks=False)
                if stat.S_ISLNK(st.st_mode):
                    links += 1
                    if links > _MAX_LINKS:
                        raise ToolException(f"{path!r}: too many symbolic links on the way (a loop?)")
                    target = os.readlink(part, dir_fd=stack[-1])
                    if os.path.isabs(target):
                        inside = self._inside_parts(target, path)
                        _close_all(stack[1:])
                        del stack[1:]
                        names.clear()
                        pending.extendleft(reversed(inside))
                    else:
                        pending.extendleft(reversed(target.split("/")))
                    continue
                if last:
                    return self._found(stack, part, names)
                if not stat.S_ISDIR(st.st_mode):
                    raise ToolException(f"{path!r}: {'/'.join([*names, part])!r} is a file, not a folder")
                stack.append(os.open(part, _DIR_FLAGS, dir_fd=stack[-1]))
                names.append(part)
            top = stack.pop()
            return Resolved(top, "", tuple(names))
        finally:
            _close_all(stack)

    @staticmethod
    def _found(stack: list[int], name: str, names: list[str]) -> Resolved:
        top = stack.pop()
        return Resolved(top, name, (*names, name))

    def _refuse_protected_name(self, path: str, part: str) -> None:
        if part.casefold() in PROTECTED_NAMES:
            raise ToolException(
                f"{path!r} is inside {part!r}, which the built-in tools never write "
                "(version-control and run-state folders are protected)"
            )

    def _refuse_secret_file(self, path: str, resolved: Resolved, identity: os.stat_result) -> None:
        if self._is_secret(resolved.parts, identity):
            raise ToolException(
                f"{path!r} is a file the run keeps to itself (its checkpoint or the approval seal's key); "
                "the built-in tools never read it"
            )

    def _is_secret(self, parts: tuple[str, ...], identity: os.stat_result) -> bool:
        return self._matches(self._secret_files, self.root.joinpath(*parts), identity) is not None

    @staticmethod
    def _matches(files: Iterable[Path], target: Path, identity: os.stat_result | None) -> Path | None:
        for protected in files:
            if str(target).casefold() == str(protected).casefold():
                return protected
            if identity is not None:
                try:
                    st = os.stat(protected)
                except OSError:
                    continue
                if (st.st_dev, st.st_ino) == (identity.st_dev, identity.st_ino):
                    return protected
        return None

    def _refuse_protected_file(self, path: str, resolved: Resolved, identity: os.stat_result | None) -> None:
        target = self.root.joinpath(*resolved.parts)
        for protected in self._protected_files:
            same_path = str(target).casefold() == str(protected).casefold()
            same_file = False
            if identity is not None:
                try:
                    st = os.stat(protected)
                except OSError:
                    st = None
                same_file = st is not None and (st.st_dev, st.st_ino) == (identity.st_dev, identity.st_ino)
            if same_path or same_file:
                raise ToolException(
                    f"{path!r} is {protected.name!r}, a file this run depends on (its config or checkpoint); "
                    "the built-in tools never write it"
                )

    # ------------------------------------------------------------------ operations

    def open_file(self, path: str) -> tuple[int, Resolved]:
        """A descriptor for reading the regular file at ``path`` (the caller closes both descriptors)."""
        for _ in range(_RETRIES):
            resolved = self.resolve(path)
            if not resolved.name:
                os.close(resolved.dir_fd)
                raise ToolException(f"{path!r} is a folder, not a file")
            try:
                fd = os.open(resolved.name, os.O_RDONLY | _NOFOLLOW | _NONBLOCK | _CLOEXEC, dir_fd=resolved.dir_fd)
            except FileNotFoundError:
                os.close(resolved.dir_fd)
                raise ToolException(f"{path!r} is not a file in the workspace") from None
            except OSError as exc:
                os.close(resolved.dir_fd)
                if _is_symlink_error(exc):
                    continue  # became a symlink after the walk: walk again, which follows it safely
                raise
            opened = os.fstat(fd)
            mode = opened.st_mode
            if self._secret_files and self._is_secret(resolved.parts, opened):
                os.close(fd)
                os.close(resolved.dir_fd)
                self._refuse_secret_file(path, resolved, opened)
            if not stat.S_ISREG(mode):
                os.close(fd)
                os.close(resolved.dir_fd)
                what = "a folder, not a file" if stat.S_ISDIR(mode) else "not a regular file"
                raise ToolException(f"{path!r} is {what} in the workspace")
            return fd, resolved
        raise ToolException(f"{path!r} kept changing while it was being opened; try again")

    def open_folder(self, path: str) -> tuple[int, Resolved]:
        """A descriptor of the folder at ``path`` (the caller closes both descriptors)."""
        resolved = self.resolve(path)
        if not resolved.name:
            return os.dup(resolved.dir_fd), resolved
        try:
            fd = os.open(resolved.name, _DIR_FLAGS, dir_fd=resolved.dir_fd)
        except (FileNotFoundError, NotADirectoryError):
            os.close(resolved.dir_fd)
            raise ToolException(f"{path!r} is not a folder in the workspace") from None
        except BaseException:
            os.close(resolved.dir_fd)
            raise
        return fd, resolved

    def write_file(self, path: str, data: bytes) -> Resolved:
        """Write ``data`` as the file at ``path`` (created, or replaced), creating folders as needed.

        The bytes go to a temporary file beside it, renamed over the name (see the module docstring).
        """
        for _ in range(_RETRIES):
            resolved = self.resolve(path, for_write=True)
            try:
                if not resolved.name:
                    raise ToolException(f"{path!r} is a folder; give a file path")
                try:
                    before: os.stat_result | None = os.stat(
                        resolved.name, dir_fd=resolved.dir_fd, follow_symlinks=False
                    )
                except FileNotFoundError:
                    before = None
                self._refuse_protected_file(path, resolved, before)
                if before is not None and stat.S_ISLNK(before.st_mode):
                    continue  # became a symlink after the walk: walk again, which follows it safely
                if before is not None and not stat.S_ISREG(before.st_mode):
                    what = "a folder; give a file path" if stat.S_ISDIR(before.st_mode) else "not a regular file"
                    raise ToolException(f"{path!r} is {what}")
                self._replace(resolved, data, stat.S_IMODE(before.st_mode) if before is not None else None)
                return resolved
            finally:
                os.close(resolved.dir_fd)
        raise ToolException(f"{path!r} kept changing while it was being written; try again")

    @staticmethod
    def _replace(resolved: Resolved, data: bytes, mode: int | None) -> None:
        """Write ``data`` to a fresh temporary file in the folder, then rename it over ``resolved.name``."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC
        for _ in range(_RETRIES):
            temp = f".{resolved.name[:200]}.{os.urandom(6).hex()}.tmp"
            try:
                fd = os.open(temp, flags, 0o666, dir_fd=resolved.dir_fd)
            except FileExistsError:
                continue
            break
        else:
            raise ToolException(f"{resolved.rel!r}: no temporary file could be made beside it; try again")
        try:
            try:
                if mode is not None:
                    os.fchmod(fd, mode)  # the file keeps its permissions
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
            finally:
                os.close(fd)
            os.replace(temp, resolved.name, src_dir_fd=resolved.dir_fd, dst_dir_fd=resolved.dir_fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=resolved.dir_fd)
            raise

    def walk(self, folder_fd: int, prefix: tuple[str, ...], skip: frozenset[str]) -> Iterator[tuple[tuple[str, ...], int]]:
        """``(parts, dir_fd)`` for every file below ``folder_fd``, sorted; skipped folder names are pruned.

        Symlinked folders are not entered (``os.fwalk`` checks that what it opened is what it
        listed). A symlinked file is yielded with its own name; opening it goes through
        :meth:`open_file`, which follows it only inside the workspace.
        """
        secret_ids: set[tuple[int, int]] | None = None if self._secret_files else set()
        for dirpath, dirnames, filenames, dir_fd in os.fwalk(".", dir_fd=folder_fd):
            dirnames[:] = sorted(d for d in dirnames if d not in skip)
            dirnames[:] = [d for d in dirnames if d.casefold() not in STATE_NAMES]
            below = tuple(p for p in PurePosixPath(dirpath).parts if p != ".")
            for name in sorted(filenames):
                if secret_ids is None:
                    secret_ids = self._secret_ids()
                if secret_ids and self._walked_secret(self.root.joinpath(*prefix, *below, name), name, dir_fd,
                                                      secret_ids):
                    continue
                yield (*prefix, *below, name), dir_fd

    def _secret_ids(self) -> set[tuple[int, int]]:
        ids = set()
        for path in self._secret_files:
            with contextlib.suppress(OSError):
                st = os.stat(path)
                ids.add((st.st_dev, st.st_ino))
        return ids

    def _walked_secret(self, target: Path, name: str, dir_fd: int, secret_ids: set[tuple[int, int]]) -> bool:
        """Whether a walked file is a secret one, by path or by identity (a hard link or symlink to it)."""
        if any(str(target).casefold() == str(p).casefold() for p in self._secret_files):
            return True
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=True)
        except OSError:
            return False  # a dangling symlink: opening it fails on its own
        return (st.st_dev, st.st_ino) in secret_ids


def _is_symlink_error(exc: OSError) -> bool:
    import errno

    return exc.errno in (errno.ELOOP, errno.EMLINK)
