"""How do several processes (server replicas, queue workers, CLI runs) share one cap on LLM calls?

With ``concurrency.backend: postgres`` the LLM-call slots of ``global_max_llm_calls`` are rows of
one table in the PostgreSQL database the checkpoints already use: a call takes a row before its
provider request and gives it back after, so every call of every run of every process sharing
that database counts against the same cap. ``SharedSlots`` is a ``Slots`` (``slots.py``) whose
acquire first passes the process's own gate of the same size (in-process FIFO, and never more
requests to the database than the cap) and then takes a row; its release gives the row back, then
the local place. The per-run budget is untouched: it lives in the run's checkpointed state
(``meter.py``), so it already holds wherever the run executes.

What was weighed — a lease with an expiry, or session-level advisory locks:

- **Advisory locks** (``pg_try_advisory_lock(scope, i)`` per slot, held by a connection) need no
  table and come back the moment the holder's connection closes, which for a SIGKILLed process
  is at once. But a held slot then *is* a live session: a connection dropped by a network blip,
  a server restart or a transaction-mode pooler (PgBouncer) frees the lock while the process
  still runs its call, and the next process takes the same slot — a slot held twice, silently.
  A whole machine that vanishes is noticed only when TCP keepalives give up. Waiting needs a
  connection per waiter (blocking ``pg_advisory_lock``) or polling every key.
- **Leases** (chosen): a row ``(scope, slot, holder, expires_at)`` taken with one ``UPDATE`` that
  re-checks under the row lock that the slot is free or expired, so two takers of one row
  serialise and the second finds it held: a slot is never handed to two holders. The holder
  renews its leases every third of the lease (one statement for all of a process's rows), so a
  call may run longer than the lease; a process that dies stops renewing and its rows are free
  ``lease_s`` after their last renewal at the latest (the database's clock, no clock of ours is
  compared). It works through any pooler, costs two short statements per call, and a lost lease
  is *noticed* (the renewal does not return it) instead of vanishing; a lease that expired while
  its holder was slow but whose row nobody took (the row still names it) is simply renewed.
  A broken connection is replaced on the next statement; a take that keeps failing for a whole
  lease fails its call, which leaves the run resumable. The price: a SIGKILLed
  process's slots come back after up to ``lease_s``, not at once, and a holder cut off from the
  database for longer than ``lease_s`` loses its slots while its calls go on; it logs that, and
  cannot recall a request already sent to a provider (no limiter can).

How a waiter learns that a slot is free: a released row sends ``NOTIFY soothe_llm_slots``, which
every process ``LISTEN``s to; an expired row sends nothing, so waiters also retry every
``min(1 s, lease_s / 4)``. Waiting is not FIFO across processes, only within one.

The database work runs on one daemon thread per process with its own event loop and two
connections (one for statements, one listening), whatever loops or threads the callers run on:
a provider client is bound to its caller's loop, a database connection to the agent's, and the
caller waits on a future. The table is created on first use (``CREATE TABLE IF NOT EXISTS`` under
an advisory transaction lock, so replicas starting together do not race). Processes configured
with different caps share the rows below the smaller one; the cap in force is the largest.
``SharedSlots.acquire`` and ``acquire_sync`` stay written twice: they differ in every line that
waits (the agent is started off the loop and its future wrapped for a coroutine; a thread just
blocks on both), and what they share is the order of taking and giving back, four lines.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import itertools
import logging
import os
import socket
import threading
import uuid
from collections.abc import Coroutine
from typing import Any, TypeVar

from soothe_planner.concurrency.slots import Slots
from soothe_planner.errors import ConfigError

__all__ = ["TABLE", "SharedSlots", "shared_slots"]

log = logging.getLogger(__name__)

T = TypeVar("T")

TABLE = "soothe_llm_slots"
CHANNEL = "soothe_llm_slots"
_CREATE = f"""
CREATE TABLE IF NOT EXISTS {TABLE} (
    scope text NOT NULL,
    slot integer NOT NULL,
    holder text,
    expires_at timestamptz,
    PRIMARY KEY (scope, slot)
)"""
_ROWS = f"INSERT INTO {TABLE} (scope, slot) SELECT %s, g FROM generate_series(0, %s - 1) AS g ON CONFLICT DO NOTHING"
# Free means never taken, given back, or expired. The outer WHERE repeats the test: a row taken by
# someone else between the inner read and this update is re-read under its lock and skipped.
_TAKE = f"""
UPDATE {TABLE} AS s SET holder = %(holder)s, expires_at = now() + make_interval(secs => %(lease)s)
WHERE s.scope = %(scope)s
  AND s.slot = (SELECT slot FROM {TABLE}
                WHERE scope = %(scope)s AND slot < %(cap)s AND (holder IS NULL OR expires_at < now())
                ORDER BY slot LIMIT 1 FOR UPDATE SKIP LOCKED)
  AND (s.holder IS NULL OR s.expires_at < now())
RETURNING s.slot"""
_GIVE = f"""
WITH freed AS (
    UPDATE {TABLE} SET holder = NULL, expires_at = NULL WHERE scope = %(scope)s AND holder = ANY(%(holders)s)
    RETURNING slot)
SELECT pg_notify('{CHANNEL}', %(scope)s) FROM freed"""
_RENEW = f"""
UPDATE {TABLE} SET expires_at = now() + make_interval(secs => %(lease)s)
WHERE scope = %(scope)s AND holder = ANY(%(holders)s)
RETURNING holder"""


class _Take:
    """One request for a row: answered by the agent, or abandoned by its caller (then given back)."""

    __slots__ = ("abandoned", "future", "lock")

    def __init__(self) -> None:
        self.future: concurrent.futures.Future[str] = concurrent.futures.Future()
        self.abandoned = False
        self.lock = threading.Lock()


class _Agent:
    """The database side of one shared cap in this process: a thread, its loop, two connections."""

    def __init__(self, dsn: str, scope: str, cap: int, lease_s: float) -> None:
        self.dsn, self.scope, self.cap, self.lease_s = dsn, scope, cap, lease_s
        self.poll_s = min(1.0, lease_s / 4)
        self.ident = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._serial = itertools.count(1)
        self.held: set[str] = set()  # holders of the rows this process has (touched on the agent loop only)
        self.lost = 0  # leases the renewal found gone while their calls still ran
        self._loop = asyncio.new_event_loop()
        self._ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._serve, name="soothe-shared-slots", daemon=True)
        self._thread.start()
        self._ready.result()  # a connection error surfaces here, to the first caller

    # -- the agent's thread --------------------------------------------------------------------

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        if self._ready.exception() is None:
            self._loop.run_forever()

    async def _start(self) -> None:
        try:
            import psycopg
        except ImportError:
            self._ready.set_exception(
                ConfigError("concurrency.backend 'postgres' needs psycopg: pip install 'soothe-planner[postgres]'")
            )
            return
        try:
            self._db = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            async with self._db.transaction():
                await self._db.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (TABLE,))
                await self._db.execute(_CREATE)
                await self._db.execute(_ROWS, (self.scope, self.cap))
            self._listen = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
            await self._listen.execute(f"LISTEN {CHANNEL}")
        except Exception as exc:
            # The DSN may hold a password: the error's class and the server's words, never the DSN.
            self._ready.set_exception(
                ConfigError(f"concurrency.backend 'postgres': cannot use the database ({type(exc).__name__}); "
                            "check concurrency.dsn (default: checkpoint.dsn) and that the server runs")
            )
            return
        self._changes = 0
        self._changed = asyncio.Condition()
        self._tasks = [asyncio.create_task(self._listener()), asyncio.create_task(self._renewer())]
        self._ready.set_result(None)

    async def _execute(self, query: str, params: Any) -> Any:
        """Run one statement, on a new connection if the last one broke (a server restart, a network blip)."""
        if self._db.closed or self._db.broken:
            import psycopg

            self._db = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        return await self._db.execute(query, params)

    async def _bump(self) -> None:
        async with self._changed:
            self._changes += 1
            self._changed.notify_all()

    async def _listener(self) -> None:
        while True:
            try:
                async for _ in self._listen.notifies():
                    await self._bump()
            except Exception as exc:  # the connection broke: waiters fall back to polling until it is back
                log.warning("shared LLM slots: LISTEN connection lost (%s); retrying", type(exc).__name__)
                await asyncio.sleep(self.poll_s)
                with contextlib.suppress(Exception):
                    import psycopg

                    self._listen = await psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
                    await self._listen.execute(f"LISTEN {CHANNEL}")

    async def _renewer(self) -> None:
        while True:
            await asyncio.sleep(self.lease_s / 3)
            if not self.held:
                continue
            holders = list(self.held)
            try:
                cur = await self._execute(
                    _RENEW, {"scope": self.scope, "holders": holders, "lease": self.lease_s}
                )
                kept = {row[0] for row in await cur.fetchall()}
            except Exception as exc:
                log.warning("shared LLM slots: renewing %d lease(s) failed (%s)", len(holders), type(exc).__name__)
                continue
            gone = [h for h in holders if h not in kept and h in self.held]
            if gone:
                # Expired before this renewal: another process may hold those rows now. The calls
                # under them go on (nothing can recall a sent request); their releases free nothing.
                log.warning("shared LLM slots: %d lease(s) expired while their calls ran", len(gone))
                self.held.difference_update(gone)
                self.lost += len(gone)

    async def _try_take(self) -> str | None:
        holder = f"{self.ident}#{next(self._serial)}"
        cur = await self._execute(
            _TAKE, {"holder": holder, "scope": self.scope, "cap": self.cap, "lease": self.lease_s}
        )
        return holder if await cur.fetchone() is not None else None

    async def _take(self, request: _Take) -> None:
        failing_since: float | None = None
        try:
            while not request.abandoned and not request.future.cancelled():
                seen = self._changes
                try:
                    holder = await self._try_take()
                except Exception:
                    # The database is unreachable: retry on a new connection for up to a lease,
                    # then fail the call (a run stays resumable) rather than wait without end.
                    now = asyncio.get_running_loop().time()
                    failing_since = now if failing_since is None else failing_since
                    if now - failing_since >= self.lease_s:
                        raise
                    await asyncio.sleep(self.poll_s)
                    continue
                failing_since = None
                if holder is not None:
                    self.held.add(holder)
                    with request.lock:
                        if not request.abandoned:
                            # Its caller may have cancelled the future a moment ago (a cancelled await).
                            with contextlib.suppress(concurrent.futures.InvalidStateError):
                                request.future.set_result(holder)
                                return
                    await self._give(holder)
                    return
                await self._wait_change(seen)
        except Exception as exc:
            with request.lock, contextlib.suppress(concurrent.futures.InvalidStateError):
                request.future.set_exception(exc)

    async def _wait_change(self, seen: int) -> None:
        """Until a slot may have come back (a NOTIFY, a local release), or ``poll_s`` (an expiry sends nothing)."""
        async with self._changed:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait_for(lambda: self._changes != seen), self.poll_s)

    async def _give(self, holder: str) -> None:
        if holder not in self.held:
            return  # its lease was lost; the row is someone else's now
        self.held.discard(holder)
        try:
            await self._execute(_GIVE, {"scope": self.scope, "holders": [holder]})
        except Exception as exc:  # the row comes back when its lease expires
            log.warning("shared LLM slots: giving a slot back failed (%s); it expires in %s s",
                        type(exc).__name__, self.lease_s)
        await self._bump()

    async def _give_all(self) -> None:
        holders, self.held = list(self.held), set()
        if holders:
            await self._execute(_GIVE, {"scope": self.scope, "holders": holders})

    # -- callers' threads ----------------------------------------------------------------------

    def _submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    def take(self) -> _Take:
        request = _Take()
        self._submit(self._take(request))
        return request

    def abandon(self, request: _Take) -> None:
        """The caller stopped waiting: a row already granted goes back, a pending take stops."""
        with request.lock:
            request.abandoned = True
            granted = request.future.done() and not request.future.cancelled() and request.future.exception() is None
        if granted:
            self.give(request.future.result())

    def give(self, holder: str, then: Any = None) -> None:
        future = self._submit(self._give(holder))
        if then is not None:
            future.add_done_callback(lambda _: then())

    def close(self) -> None:
        """Give back every row still held (best effort, at exit): a clean exit does not wait for expiry."""
        if not self._loop.is_running():
            return
        with contextlib.suppress(Exception):
            self._submit(self._give_all()).result(timeout=2)


class SharedSlots(Slots):
    """The LLM-call slots of ``global_max_llm_calls``, shared through PostgreSQL (see the module docstring).

    ``in_flight`` and ``peak`` count this process's calls; the cap holds across processes.
    """

    def __init__(self, limit: int, *, dsn: str, scope: str, lease_s: float) -> None:
        super().__init__(limit)
        self.dsn, self.scope, self.lease_s = dsn, scope, lease_s
        self._agent: _Agent | None = None
        self._agent_lock = threading.Lock()
        self._holders: list[str] = []  # rows held by this process's calls; any one is given back on release
        self._holders_lock = threading.Lock()

    def agent(self) -> _Agent:
        with self._agent_lock:
            if self._agent is None:
                self._agent = _Agent(self.dsn, self.scope, self.limit, self.lease_s)
                atexit.register(self._agent.close)
            return self._agent

    def _granted(self, holder: str) -> None:
        with self._holders_lock:
            self._holders.append(holder)

    async def acquire(self) -> None:
        await super().acquire()
        try:
            agent = await asyncio.to_thread(self.agent) if self._agent is None else self._agent
            request = agent.take()
            try:
                holder = await asyncio.wrap_future(request.future)
            except BaseException:
                agent.abandon(request)
                raise
        except BaseException:
            super().release()
            raise
        self._granted(holder)

    def acquire_sync(self) -> None:
        super().acquire_sync()
        try:
            agent = self.agent()
            request = agent.take()
            try:
                holder = request.future.result()
            except BaseException:
                agent.abandon(request)
                raise
        except BaseException:
            super().release()
            raise
        self._granted(holder)

    def release(self) -> None:
        with self._holders_lock:
            holder = self._holders.pop() if self._holders else None
        if holder is None or self._agent is None:
            super().release()
            return
        # The local place goes back once the row is back, so the next local waiter finds it free.
        self._agent.give(holder, then=super().release)


_registry: dict[tuple[int, str, str, int, float], SharedSlots] = {}
_registry_lock = threading.Lock()


def shared_slots(limit: int, *, dsn: str, scope: str, lease_s: float) -> SharedSlots:
    """This process's slots for one shared cap: one object (and one database agent) per cap."""
    key = (os.getpid(), dsn, scope, limit, lease_s)
    with _registry_lock:
        found = _registry.get(key)
        if found is None:
            found = _registry[key] = SharedSlots(limit, dsn=dsn, scope=scope, lease_s=lease_s)
        return found
