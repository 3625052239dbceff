"""The LLM-call cap shared through PostgreSQL (``concurrency/shared.py``), within one test process.

Each ``SharedSlots`` built directly has its own database agent and holder name, so two of them
behave as two processes sharing a cap. The multi-process case (real processes, a SIGKILL) is in
``test_shared_cap_processes.py``. Skipped, with the reason, when no PostgreSQL answers.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest

from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
from soothe_planner.concurrency.shared import TABLE, SharedSlots
from soothe_planner.config import SootheConfig, load_config
from soothe_planner.errors import ConfigError

DSN_ENV = "SOOTHE_TEST_POSTGRES_DSN"


def _dsn() -> str:
    dsn = os.environ.get(DSN_ENV)
    if not dsn:
        pytest.skip(f"{DSN_ENV} is not set: start a server with `eval \"$(bash .ci/postgres.sh)\"`")
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=3):
            pass
    except Exception as exc:
        pytest.skip(f"no PostgreSQL server answers at {DSN_ENV} ({type(exc).__name__}: {exc})")
    return dsn


def _rows(dsn: str, scope: str) -> list[tuple[int, str | None]]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        return [(r[0], r[1]) for r in conn.execute(
            f"SELECT slot, holder FROM {TABLE} WHERE scope = %s ORDER BY slot", (scope,)).fetchall()]


def _held(dsn: str, scope: str) -> int:
    return sum(1 for _, holder in _rows(dsn, scope) if holder is not None)


async def _until(predicate: object, timeout_s: float = 20.0) -> None:
    """Poll a condition (a hang guard, not a timing assertion)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not predicate():  # type: ignore[operator]
        assert loop.time() < deadline, "condition never held"
        await asyncio.sleep(0.05)


# --------------------------------------------------------------------------- configuration


def test_the_shared_cap_uses_the_checkpoints_database_by_default(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.postgres", reason="needs the postgres extra")
    (tmp_path / "c.yaml").write_text(
        "concurrency: {backend: postgres, global_max_llm_calls: 3}\n"
        "checkpoint: {backend: postgres, dsn: 'postgresql://u@h/db'}\n"
    )
    config = load_config(tmp_path / "c.yaml")
    assert config.concurrency.backend == "postgres"
    assert config.concurrency.dsn is not None and config.concurrency.dsn.get_secret_value() == "postgresql://u@h/db"
    assert config.redacted_dump()["concurrency"]["dsn"] != "postgresql://u@h/db"  # a DSN may hold a password


def test_the_shared_cap_without_a_database_is_a_config_error_naming_the_way_out(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("concurrency: {backend: postgres}\n")
    with pytest.raises(ConfigError, match=r"concurrency.*set concurrency.dsn, or keep the checkpoints on PostgreSQL"):
        load_config(tmp_path / "c.yaml")


def test_the_process_backend_stays_the_default() -> None:
    assert SootheConfig().concurrency.backend == "process"
    assert type(ConcurrencyController()._llm).__name__ == "Slots"


# --------------------------------------------------------------------------- against PostgreSQL


@pytest.mark.postgres
async def test_two_holders_of_one_cap_never_hold_more_rows_than_the_cap() -> None:
    dsn, scope = _dsn(), f"t-{uuid.uuid4().hex[:8]}"
    a, b = (SharedSlots(2, dsn=dsn, scope=scope, lease_s=30) for _ in range(2))
    inside = peak = 0

    async def call(slots: SharedSlots) -> None:
        nonlocal inside, peak
        await slots.acquire()
        try:
            inside += 1
            peak = max(peak, inside)
            assert await asyncio.to_thread(_held, dsn, scope) <= 2
            await asyncio.sleep(0.02)
            inside -= 1
        finally:
            slots.release()

    await asyncio.gather(*(call(a if i % 2 else b) for i in range(16)))
    assert peak == 2  # the cap was reached, and held
    await _until(lambda: _held(dsn, scope) == 0)
    assert a.in_flight == b.in_flight == 0


@pytest.mark.postgres
async def test_a_row_left_by_a_dead_holder_is_taken_once_its_lease_expires() -> None:
    import psycopg

    dsn, scope = _dsn(), f"t-{uuid.uuid4().hex[:8]}"
    slots = SharedSlots(1, dsn=dsn, scope=scope, lease_s=30)
    await slots.acquire()  # creates the row; then a "dead process" takes it with a short lease
    slots.release()
    await _until(lambda: _held(dsn, scope) == 0)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"UPDATE {TABLE} SET holder = 'dead', expires_at = now() + interval '1 second' "
                     "WHERE scope = %s", (scope,))
    await slots.acquire()  # waits for the expiry: nobody will ever give that row back
    try:
        ((_, holder),) = _rows(dsn, scope)
        assert holder is not None and holder != "dead"
    finally:
        slots.release()


@pytest.mark.postgres
async def test_a_live_holder_renews_its_lease_so_a_long_call_keeps_its_slot() -> None:
    dsn, scope = _dsn(), f"t-{uuid.uuid4().hex[:8]}"
    holder = SharedSlots(1, dsn=dsn, scope=scope, lease_s=1)
    other = SharedSlots(1, dsn=dsn, scope=scope, lease_s=1)
    await holder.acquire()
    waiting = asyncio.create_task(other.acquire())
    await asyncio.sleep(2.5)  # a call running for more than two leases
    assert not waiting.done(), "the slot was taken while its holder's call still ran"
    holder.release()
    await waiting  # given back, it goes to the waiter
    other.release()
    await _until(lambda: _held(dsn, scope) == 0)
    assert holder._agent is not None and holder._agent.lost == 0


@pytest.mark.postgres
async def test_a_cancelled_waiter_leaves_no_row_taken() -> None:
    dsn, scope = _dsn(), f"t-{uuid.uuid4().hex[:8]}"
    a, b = SharedSlots(1, dsn=dsn, scope=scope, lease_s=30), SharedSlots(1, dsn=dsn, scope=scope, lease_s=30)
    await a.acquire()
    waiting = asyncio.create_task(b.acquire())
    await asyncio.sleep(0.3)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    a.release()
    await _until(lambda: _held(dsn, scope) == 0 and a.in_flight == 0)
    await asyncio.sleep(0.5)  # a take still in flight when the waiter gave up must have been given back
    assert _held(dsn, scope) == 0 and b.in_flight == 0


@pytest.mark.postgres
async def test_a_controller_on_the_postgres_backend_limits_calls_and_keeps_its_budget() -> None:
    from soothe_planner.errors import LLMBudgetExceeded

    dsn = _dsn()
    policy = ConcurrencyPolicy(backend="postgres", dsn=dsn, scope=f"t-{uuid.uuid4().hex[:8]}",
                               global_max_llm_calls=2, max_total_llm_calls=5)
    controller = ConcurrencyController(policy)
    inside = peak = 0

    async def call() -> None:
        nonlocal inside, peak
        async with controller.llm_call("x"):
            inside += 1
            peak = max(peak, inside)
            await asyncio.sleep(0.05)
            inside -= 1

    results = await asyncio.gather(*(call() for _ in range(6)), return_exceptions=True)
    assert peak == 2
    assert sum(isinstance(r, LLMBudgetExceeded) for r in results) == 1  # the sixth call never reached a slot


async def test_a_local_grant_abandoned_by_a_cancelled_waiter_goes_back_without_the_shared_release() -> None:
    # SharedSlots.release gives back a database row; a place granted locally to a waiter that is
    # cancelled before it runs has no row yet, so giving it back must not call that release.
    from soothe_planner.concurrency.slots import Slots

    class Counting(Slots):
        releases = 0

        def release(self) -> None:
            self.releases += 1
            super().release()

    slots = Counting(1)
    await slots.acquire()
    waiter = asyncio.create_task(slots.acquire())
    await asyncio.sleep(0)  # queued behind the holder
    slots.release()  # handed over to the waiter...
    waiter.cancel()  # ...which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert slots.in_flight == 0
    assert slots.releases == 1  # only the holder's own release


@pytest.mark.postgres
async def test_a_connection_the_server_dropped_is_replaced_and_the_cap_goes_on() -> None:
    import psycopg

    dsn, scope = _dsn(), f"t-{uuid.uuid4().hex[:8]}"
    slots = SharedSlots(1, dsn=dsn, scope=scope, lease_s=30)
    await slots.acquire()
    slots.release()
    await _until(lambda: _held(dsn, scope) == 0 and slots.in_flight == 0)
    assert slots._agent is not None
    pid = slots._agent._db.info.backend_pid
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
    await slots.acquire()  # the first statement finds the connection broken and opens another
    try:
        assert _held(dsn, scope) == 1 and slots._agent._db.info.backend_pid != pid
    finally:
        slots.release()
