"""A damaged SQLite checkpoint: one clear line and exit 2, never an internal error or a silent "no such run".

The damage is real: a run is saved through the CLI, then bytes of the database file are changed
the way a bad disk or a careless copy would. Each case first asserts, with SQLite itself, that
the file really is damaged, so the test cannot pass by damaging nothing.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

import pytest

from soothe_planner.cli.app import EXIT_DONE, EXIT_USAGE, main
from soothe_planner.errors import CheckpointDamagedError, ConfigError
from soothe_planner.graph.persistence import open_persistence

PAGE = 4096  # SQLite's default page size


def _flip(offset: int) -> Callable[[bytearray], None]:
    def damage(data: bytearray) -> None:
        data[offset] ^= 0x5A

    return damage


def _header(data: bytearray) -> None:
    data[0:16] = b"not a database!!"


DAMAGE = {
    "header overwritten": _header,
    # a b-tree page's header: reads of it fail with "database disk image is malformed"
    "table page header": _flip(PAGE * 1 + 8),
    # a page whose loss made the saved run read back as missing (show answered "no run")
    "index page header": _flip(PAGE * 2 + 8),
}


def _quick_check_fails(db: Path) -> bool:
    try:
        with closing(sqlite3.connect(db)) as conn:
            return conn.execute("PRAGMA quick_check").fetchall() != [("ok",)]
    except sqlite3.DatabaseError:
        return True


@pytest.fixture
def saved_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    # a trivial goal: answered at intake, one model call, and the run is saved
    (tmp_path / "script.json").write_text(json.dumps({"RouteIntake": [{"route": "trivial", "answer": "4"}]}))
    cfg = tmp_path / "config.yaml"
    cfg.write_text(json.dumps({
        "models": {"default": "scripted:script.json"},
        "execution": {"workspace": str(tmp_path)},
        "checkpoint": {"backend": "sqlite", "path": "state/ck.sqlite"},
    }))
    assert main(["run", "--json", "--config", str(cfg), "--thread", "past", "goal"]) == EXIT_DONE
    capsys.readouterr()
    db = tmp_path / "state" / "ck.sqlite"
    assert not _quick_check_fails(db)
    return cfg, db


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("command", ["show", "resume"])
def test_a_damaged_checkpoint_is_one_clear_line_and_exit_2(
    saved_run: tuple[Path, Path], capsys: pytest.CaptureFixture[str], damage: str, command: str
) -> None:
    cfg, db = saved_run
    data = bytearray(db.read_bytes())
    DAMAGE[damage](data)
    db.write_bytes(bytes(data))
    assert _quick_check_fails(db), "the damage did not damage anything"
    assert main([command, "--json", "--config", str(cfg), "--thread", "past"]) == EXIT_USAGE
    captured = capsys.readouterr()
    err = captured.err
    assert err.count("\n") == 1 and "internal error" not in err, err
    assert f"checkpoint {str(db)!r} is damaged" in err and "move it aside" in err
    assert captured.out == ""


async def test_opening_a_damaged_file_raises_a_typed_config_error(saved_run: tuple[Path, Path]) -> None:
    _, db = saved_run
    data = bytearray(db.read_bytes())
    _flip(PAGE * 1 + 8)(data)
    db.write_bytes(bytes(data))
    with pytest.raises(CheckpointDamagedError) as info:
        async with open_persistence("sqlite", path=db):
            pytest.fail("a damaged checkpoint was opened")
    assert isinstance(info.value, ConfigError) and info.value.path == str(db)
    assert info.value.reason


async def test_a_healthy_or_new_checkpoint_opens(tmp_path: Path, saved_run: tuple[Path, Path]) -> None:
    _, db = saved_run
    async with open_persistence("sqlite", path=db) as persistence:
        assert await persistence.checkpointer.aget_tuple({"configurable": {"thread_id": "past"}}) is not None
    async with open_persistence("sqlite", path=tmp_path / "fresh" / "new.sqlite") as persistence:
        assert await persistence.checkpointer.aget_tuple({"configurable": {"thread_id": "x"}}) is None
