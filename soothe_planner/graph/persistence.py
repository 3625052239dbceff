"""Where does a StrangeLoop run live between processes: a checkpointer and a store, opened as a pair.

The checkpointer holds the graph state at node boundaries; the store holds the step journal that
lets a killed ``execute`` node resume without re-running completed steps (see
``execution/scheduler.py``). They are opened together on the same backend so that a run is
either durable as a whole or not at all:

- ``memory``: ``InMemorySaver`` + ``InMemoryStore`` (one process; tests, notebooks);
- ``sqlite``: ``AsyncSqliteSaver`` + ``AsyncSqliteStore`` on one file (the CLI's default; SQLite
  serialises the two connections' writes);
- ``postgres``: ``AsyncPostgresSaver`` + ``AsyncPostgresStore`` on one DSN (many workers).

Each backend's tables are created on open (``setup()`` is idempotent). Processes opening one
SQLite file at once take turns to open it (a ``flock`` on its folder): the first to create it
sets WAL mode and the tables, and SQLite answers the others "database is locked" meanwhile
without waiting.

A SQLite file that already exists is checked before it is used (``PRAGMA quick_check``): a
damaged file otherwise surfaces later and in many guises — "database disk image is malformed"
from deep inside a read, or worse, a run that silently reads as missing because the page that
held it no longer parses. The check raises ``CheckpointDamagedError`` (a ``ConfigError``: the
run has not started and the way out is the user's), naming the file and SQLite's first complaint.
``quick_check`` reads every page once (it skips the index-versus-table cross-check of
``integrity_check``), so its cost grows with the file; damage inside a stored value that still
parses as a page is beyond what SQLite can see.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager, closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from soothe_planner.errors import CheckpointDamagedError, ConfigError

__all__ = ["Persistence", "check_sqlite_file", "open_persistence"]

Backend = Literal["memory", "sqlite", "postgres"]


@dataclass(frozen=True)
class Persistence:
    """A checkpointer and a store on one backend; pass both to ``build_strange_loop``."""

    checkpointer: Any
    store: Any
    backend: Backend


@asynccontextmanager
async def open_persistence(
    backend: Backend, *, path: str | Path | None = None, dsn: str | None = None
) -> AsyncIterator[Persistence]:
    """Open (and set up) the checkpointer and store of ``backend``; close both on exit."""
    if backend == "memory":
        from langgraph.checkpoint.memory import InMemorySaver
        from langgraph.store.memory import InMemoryStore

        yield Persistence(InMemorySaver(), InMemoryStore(), "memory")
        return
    async with AsyncExitStack() as stack:
        if backend == "sqlite":
            if not path:
                raise ConfigError("the sqlite backend needs a path (e.g. .soothe/checkpoints.sqlite)")
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
            from langgraph.store.sqlite.aio import AsyncSqliteStore

            Path(path).parent.mkdir(parents=True, exist_ok=True)
            # Opening is serialised across processes: setting up a new file (WAL mode, the tables)
            # answers "database is locked" at once to a second process doing the same, busy
            # timeout or not. The lock is on the state folder, so no file of its own is made.
            async with _folder_lock(Path(path).parent):
                check_sqlite_file(Path(path))
                saver: Any = await stack.enter_async_context(AsyncSqliteSaver.from_conn_string(str(path)))
                store: Any = await stack.enter_async_context(AsyncSqliteStore.from_conn_string(str(path)))
                await saver.setup()
                await store.setup()
        elif backend == "postgres":
            if not dsn:
                raise ConfigError("the postgres backend needs a DSN (e.g. postgresql://user@host:5432/db)")
            try:
                from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
                from langgraph.store.postgres.aio import AsyncPostgresStore
            except ImportError as exc:
                raise ConfigError(
                    f"the postgres backend needs the 'postgres' extra ({exc}); pip install 'soothe-planner[postgres]'"
                ) from None
            saver = await stack.enter_async_context(AsyncPostgresSaver.from_conn_string(dsn))
            store = await stack.enter_async_context(AsyncPostgresStore.from_conn_string(dsn))
        else:
            raise ConfigError(f"unknown persistence backend {backend!r}; use 'memory', 'sqlite' or 'postgres'")
        if backend != "sqlite":
            await saver.setup()
            await store.setup()
        yield Persistence(saver, store, backend)


@asynccontextmanager
async def _folder_lock(folder: Path) -> AsyncIterator[None]:
    """An exclusive ``flock`` on ``folder``, waited for in a worker thread (no lock where flock is absent)."""
    import asyncio

    try:
        import fcntl
    except ImportError:  # not POSIX: SQLite's own locking is all there is
        yield
        return
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        await asyncio.to_thread(fcntl.flock, fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def check_sqlite_file(path: Path) -> None:
    """Raise ``CheckpointDamagedError`` if the SQLite file at ``path`` exists and fails SQLite's quick check."""
    import sqlite3

    if not path.is_file() or path.stat().st_size == 0:
        return  # created on first use
    try:
        with closing(sqlite3.connect(path)) as conn:
            rows = conn.execute("PRAGMA quick_check(1)").fetchall()  # the first problem is enough
    except sqlite3.DatabaseError as exc:
        raise CheckpointDamagedError(str(path), str(exc)) from None
    if rows != [("ok",)]:
        first = str(rows[0][0]) if rows else "no answer from the check"
        raise CheckpointDamagedError(str(path), " ".join(first.replace("*** in database main ***", "").split()))
