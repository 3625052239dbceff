"""Prompt states on disk: a server's saved states are found by the next one (``local/prompt_states.py``)."""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

np = pytest.importorskip("numpy", reason="needs the 'local' extra: pip install -e '.[local]'")

from soothe_planner.local.prompt_states import (  # noqa: E402 (after the skip)
    PROMPT_STATES_ENV,
    PROMPT_STATES_MIB_ENV,
    PromptStates,
    folder_for,
)


def state(tokens: list[int], kv: bytes = b"kv", seed: int = 7, rows: int = 0) -> SimpleNamespace:
    ids = np.zeros(16, dtype=np.intc)
    ids[: len(tokens)] = tokens
    return SimpleNamespace(input_ids=ids, scores=np.zeros((rows, 3), dtype=np.single), n_tokens=len(tokens),
                           llama_state=kv, llama_state_size=len(kv), seed=seed)


def make_state(**fields: Any) -> SimpleNamespace:
    return SimpleNamespace(scores=np.zeros((0, 1)), llama_state_size=len(fields["llama_state"]), **fields)


def states(folder: Path, disk: int = 1 << 20, ram: int = 1 << 20) -> PromptStates:
    return PromptStates(folder, disk, ram_bytes=ram, make_state=make_state, background=False)


def test_a_new_cache_on_the_same_folder_restores_the_longest_matching_state(tmp_path: Path) -> None:
    first = states(tmp_path)
    first[[1, 2, 3, 4, 9]] = state([1, 2, 3, 4], kv=b"briefing+goal A")
    first[[1, 2, 7]] = state([1, 2], kv=b"other")
    second = states(tmp_path)  # another server: nothing in RAM
    got = second[[1, 2, 3, 4, 5, 6]]
    assert got.llama_state == b"briefing+goal A" and got.n_tokens == 4 and got.seed == 7
    assert list(got.input_ids) == [1, 2, 3, 4]  # only its own tokens: the launcher pads them
    assert second.loaded == 1
    assert second[[1, 2, 3, 4, 5]].llama_state == b"briefing+goal A" and second.loaded == 1  # now from RAM


def test_a_prompt_sharing_nothing_is_a_miss(tmp_path: Path) -> None:
    cache = states(tmp_path)
    cache[[1, 2]] = state([1])
    assert [9, 9] not in cache and [1, 5] in cache
    with pytest.raises(KeyError, match="no saved state"):
        cache[[9, 9]]


def test_a_file_that_does_not_read_is_skipped_and_removed(tmp_path: Path) -> None:
    states(tmp_path)[[1, 2, 3]] = state([1, 2])
    (tmp_path / "broken.npz").write_bytes(b"not a state")
    cache = states(tmp_path)
    assert not (tmp_path / "broken.npz").exists()
    assert cache[[1, 2, 3, 4]].llama_state == b"kv"


def test_a_file_removed_by_another_server_is_a_miss_not_an_error(tmp_path: Path) -> None:
    states(tmp_path)[[1, 2, 3]] = state([1, 2])
    cache = states(tmp_path)
    for f in tmp_path.glob("*.npz"):
        f.unlink()
    with pytest.raises(KeyError):
        cache[[1, 2, 3]]


def test_the_folder_keeps_within_its_capacity_dropping_the_least_recently_used(tmp_path: Path) -> None:
    big = b"x" * 4000
    cache = states(tmp_path, disk=10_000)
    cache[[1, 1]] = state([1], kv=big)
    os.utime(next(tmp_path.glob("*.npz")), (1, 1))  # the oldest
    cache[[2, 2]] = state([2], kv=big)
    cache[[3, 3]] = state([3], kv=big)
    assert sum(f.stat().st_size for f in tmp_path.glob("*.npz")) <= 10_000
    fresh = states(tmp_path)
    with pytest.raises(KeyError):
        fresh[[1, 1]]
    assert fresh[[3, 3]].llama_state == big


def test_states_with_logits_rows_stay_in_ram(tmp_path: Path) -> None:
    cache = states(tmp_path)
    cache[[1, 2]] = state([1, 2], rows=2)  # made with logits_all: not written
    assert cache[[1, 2]].n_tokens == 2 and not list(tmp_path.glob("*.npz"))


def test_ram_keeps_within_its_capacity(tmp_path: Path) -> None:
    cache = states(tmp_path, ram=10)
    cache[[1]] = state([1], kv=b"123456")
    cache[[2]] = state([2], kv=b"123456")
    assert cache.cache_size == 6  # the first went from RAM (its file stays)


def test_the_background_writer_puts_every_state_on_disk(tmp_path: Path) -> None:
    cache = PromptStates(tmp_path, 1 << 20, ram_bytes=1 << 20, make_state=make_state)
    cache[[4, 5, 6]] = state([4, 5])
    cache.flush()
    assert states(tmp_path)[[4, 5, 6, 7]].llama_state == b"kv"


def test_bad_capacities_are_refused_naming_them(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"capacities >= 0, got disk -1 and RAM 5"):
        PromptStates(tmp_path, -1, ram_bytes=5, make_state=make_state)


def test_a_folder_belongs_to_one_model_file_library_version_and_context_size(tmp_path: Path) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    a = folder_for(tmp_path, str(model), 4096, "0.3.36")
    assert a == folder_for(tmp_path, str(model), 4096, "0.3.36") and a.parent == tmp_path and a.name.startswith("m-")
    assert len({a, folder_for(tmp_path, str(model), 8192, "0.3.36"), folder_for(tmp_path, str(model), 4096, "0.3.37")}) == 3
    model.write_bytes(b"GGUF v2")
    assert folder_for(tmp_path, str(model), 4096, "0.3.36") != a


def test_the_server_is_told_its_folder_unless_it_keeps_no_states(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from soothe_planner.local import LocalModelServer
    from soothe_planner.local.tuning import ServerTuning

    monkeypatch.setenv("SOOTHE_CACHE_DIR", str(tmp_path / "models"))
    monkeypatch.delenv(PROMPT_STATES_ENV, raising=False)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    env = LocalModelServer(model, port=1).states_env()
    assert Path(env[PROMPT_STATES_ENV]).parent == tmp_path / "models" / "prompt-states"
    assert env[PROMPT_STATES_MIB_ENV] == str(ServerTuning().prompt_states_mib)
    assert LocalModelServer(model, port=1, tuning=ServerTuning(prompt_states_mib=0)).states_env() == {}
    assert LocalModelServer(model, port=1, tuning=ServerTuning(prompt_cache_mib=0)).states_env() == {}
    assert LocalModelServer(model, port=1, tuning=ServerTuning.stock()).states_env() == {}
    monkeypatch.setenv(PROMPT_STATES_ENV, str(tmp_path / "mine"))
    mine = Path(LocalModelServer(model, port=1).states_env()[PROMPT_STATES_ENV])
    assert mine.parent == tmp_path / "mine"  # the user's folder, and in it one of this model's own


def test_a_folder_the_server_cannot_make_leaves_the_ram_cache_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    llama_cpp = pytest.importorskip("llama_cpp", reason="needs the `local` extra (llama-cpp-python)")
    from soothe_planner.local.launcher import prompt_states_on_disk

    blocker = tmp_path / "a file"
    blocker.write_text("not a folder")
    monkeypatch.setattr(llama_cpp, "LlamaRAMCache", llama_cpp.LlamaRAMCache)  # undone after the test
    monkeypatch.setenv(PROMPT_STATES_ENV, str(blocker / "states"))
    prompt_states_on_disk()
    cache = llama_cpp.LlamaRAMCache(capacity_bytes=1 << 20)
    assert type(cache).__name__ == "LlamaRAMCache" and "prompt states stay in RAM" in capsys.readouterr().err
    monkeypatch.setenv(PROMPT_STATES_ENV, str(tmp_path / "states"))
    prompt_states_on_disk()
    assert isinstance(llama_cpp.LlamaRAMCache(capacity_bytes=1 << 20), PromptStates)
