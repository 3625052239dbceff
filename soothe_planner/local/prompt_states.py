"""Why does the embedded model's server keep prompt states on disk?

Every CLI run, notebook kernel and test session starts its own server, and a new server has read
nothing: its first plan call reads the whole briefing — system prompt, tools, examples, about 900
tokens — at 40-60 tokens a second on two cores, 15-30 s before the first token, though every
earlier run began with the same tokens. ``PromptStates`` is the server's prompt cache (the RAM
cache llama-cpp-python keeps, keyed by tokens, longest common prefix wins) with every state it
saves also written to a folder, and the folder's states found again by the next server: a run's
first call of each kind restores the previous run's state and reads only what differs (its goal,
its workspace).

- **A warm server's answers.** A restored state is the KV cache of the same tokens through the
  same model, and the library re-reads at least the last token before choosing one, as for the
  RAM cache; a cold read splits the prompt into other batches, so a near-tie can tip either way,
  as between a warm server and a cold one.
- **One folder per model file, library version and context size** (``folder_for``): a state is
  only ever loaded by a server that could have made it.
- **No pickles.** A state is an ``.npz`` of plain arrays (tokens, the KV bytes, two integers),
  read with ``allow_pickle=False``; a file that does not read is skipped and deleted.
- **Off the call's path.** Files are written by a background thread after the reply is built; a
  server that stops first loses at most the last state.
- **Bounded.** ``capacity_bytes`` of files, the least recently used removed first; several servers
  may share a folder (files appear by rename, a file gone is a miss).

numpy (the ``local`` extra's) is imported where it is used, so ``soothe_planner.local`` imports
without the extra and can say which extra a model needs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import queue
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["PROMPT_STATES_ENV", "PROMPT_STATES_MIB_ENV", "PromptStates", "common_prefix", "folder_for"]

PROMPT_STATES_ENV = "SOOTHE_LLAMA_PROMPT_STATES"
"""The launcher's cue: the folder of this server's states (``folder_for``)."""
PROMPT_STATES_MIB_ENV = "SOOTHE_LLAMA_PROMPT_STATES_MIB"
"""How many MiB of files the folder may hold."""


def folder_for(root: Path, model_path: str, n_ctx: int, library_version: str) -> Path:
    """Where the states of one model file, library version and context size live under ``root``."""
    model = Path(model_path)
    stat = model.stat()
    ident = f"{model.resolve()}|{stat.st_size}|{int(stat.st_mtime)}|{library_version}|{n_ctx}"
    return root / f"{model.stem}-{hashlib.sha256(ident.encode()).hexdigest()[:16]}"


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items ``a`` and ``b`` share: what a server can reuse of one prompt for the other."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


class PromptStates:
    """A prompt cache for llama-cpp-python: states in RAM, each also kept in ``folder`` for the next server.

    ``make_state(input_ids, n_tokens, llama_state, seed)`` builds the library's state object when a
    file is read (``llama_cpp.llama.LlamaState`` in the server; plain objects in tests).
    """

    SUFFIX = ".npz"

    def __init__(self, folder: Path, capacity_bytes: int, *, ram_bytes: int, make_state: Any,
                 background: bool = True) -> None:
        if capacity_bytes < 0 or ram_bytes < 0:
            raise ValueError(f"PromptStates needs capacities >= 0, got disk {capacity_bytes} and RAM {ram_bytes}")
        self.folder = folder
        self.capacity_bytes = capacity_bytes
        self.ram_bytes = ram_bytes
        self._make_state = make_state
        self._ram: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._files: dict[tuple[int, ...], Path] = {}
        self._lock = threading.Lock()  # _files is changed by the writer thread too
        self.loaded = 0
        """States read from the folder (for the benchmark and the tests)."""
        folder.mkdir(parents=True, exist_ok=True)
        for path in sorted(folder.glob(f"*{self.SUFFIX}"), key=_mtime):
            key = self._key_of(path)
            if key is not None:
                self._files[key] = path
        self._writes: queue.Queue[tuple[tuple[int, ...], Any] | None] | None = None
        if background:
            self._writes = queue.Queue(maxsize=2)
            threading.Thread(target=self._writer, name="prompt-states", daemon=True).start()

    # ------------------------------------------------------------------ the library's interface

    @property
    def cache_size(self) -> int:
        return sum(int(state.llama_state_size) for state in self._ram.values())

    def _longest(self, key: tuple[int, ...]) -> tuple[tuple[int, ...] | None, bool]:
        best, best_len, on_disk = None, 0, False
        for k in self._ram:
            n = common_prefix(k, key)
            if n > best_len:
                best, best_len, on_disk = k, n, False
        with self._lock:
            on_file = list(self._files)
        for k in on_file:
            n = common_prefix(k, key)
            if n > best_len:
                best, best_len, on_disk = k, n, True
        return best, on_disk

    def __contains__(self, key: Sequence[int]) -> bool:
        return self._longest(tuple(key))[0] is not None

    def __getitem__(self, key: Sequence[int]) -> Any:
        found, on_disk = self._longest(tuple(key))
        while found is not None and on_disk:
            state = self._read(found)
            if state is not None:
                self.loaded += 1
                self._remember(found, state)
                return state
            found, on_disk = self._longest(tuple(key))  # that file is gone: the next best
        if found is None:
            raise KeyError("no saved state shares a prefix with this prompt")
        self._ram.move_to_end(found)
        return self._ram[found]

    def __setitem__(self, key: Sequence[int], state: Any) -> None:
        k = tuple(int(t) for t in key)
        self._remember(k, state)
        if len(getattr(state, "scores", ())):  # logits rows: a state made with logits_all, not kept on disk
            return
        if self._writes is None:
            self._write(k, state)
            return
        with contextlib.suppress(queue.Full):  # the writer is behind: this state stays in RAM only
            self._writes.put_nowait((k, state))

    # ------------------------------------------------------------------ RAM and files

    def _remember(self, key: tuple[int, ...], state: Any) -> None:
        self._ram.pop(key, None)
        self._ram[key] = state
        while self._ram and self.cache_size > self.ram_bytes:
            self._ram.popitem(last=False)

    def _name(self, key: tuple[int, ...]) -> Path:
        import numpy as np
        digest = hashlib.sha256(np.asarray(key, dtype=np.int32).tobytes()).hexdigest()[:24]
        return self.folder / f"{digest}{self.SUFFIX}"

    def _key_of(self, path: Path) -> tuple[int, ...] | None:
        import numpy as np
        try:
            with np.load(path, allow_pickle=False) as data:
                return tuple(int(t) for t in data["key"])
        except (OSError, ValueError, KeyError):
            path.unlink(missing_ok=True)
            return None

    def _read(self, key: tuple[int, ...]) -> Any:
        import numpy as np
        with self._lock:
            path = self._files.pop(key, None)
        if path is None:
            return None
        try:
            with np.load(path, allow_pickle=False) as data:
                if tuple(int(t) for t in data["key"]) != key:
                    return None
                state = self._make_state(
                    input_ids=data["input_ids"].astype(np.intc),
                    n_tokens=int(data["n_tokens"]),
                    llama_state=data["llama_state"].tobytes(),
                    seed=int(data["seed"]),
                )
        except (OSError, ValueError, KeyError):
            path.unlink(missing_ok=True)
            return None
        with self._lock:
            self._files[key] = path
        with contextlib.suppress(OSError):
            os.utime(path)  # recently used: evicted last
        return state

    def _write(self, key: tuple[int, ...], state: Any) -> None:
        import numpy as np
        path = self._name(key)
        tmp = path.with_name(f".{path.stem}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with open(tmp, "wb") as f:
                np.savez(f, key=np.asarray(key, dtype=np.int32),
                         input_ids=np.asarray(state.input_ids, dtype=np.int32)[: int(state.n_tokens)],
                         n_tokens=np.int64(state.n_tokens),
                         llama_state=np.frombuffer(state.llama_state, dtype=np.uint8),
                         seed=np.int64(state.seed))
            os.replace(tmp, path)
        except OSError:
            tmp.unlink(missing_ok=True)
            return
        with self._lock:
            self._files[key] = path
        self._trim()

    def _trim(self) -> None:
        paths = sorted(self.folder.glob(f"*{self.SUFFIX}"), key=_mtime)
        sizes = {p: _size(p) for p in paths}
        total = sum(sizes.values())
        for p in paths:
            if total <= self.capacity_bytes:
                break
            p.unlink(missing_ok=True)
            total -= sizes[p]
        alive = set(self.folder.glob(f"*{self.SUFFIX}"))
        with self._lock:
            for k, p in list(self._files.items()):
                if p not in alive:
                    self._files.pop(k, None)

    def _writer(self) -> None:
        assert self._writes is not None
        while True:
            item = self._writes.get()
            try:
                if item is None:
                    return
                self._write(*item)
            finally:
                self._writes.task_done()

    def flush(self) -> None:
        """Wait until every state handed over so far is on disk (tests; a server never needs to)."""
        if self._writes is not None:
            self._writes.join()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
