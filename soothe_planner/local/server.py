"""How is the embedded model served: llama.cpp's OpenAI-compatible server, on 127.0.0.1.

One server process per ``LocalModelServer``, in its own process group, stopped (the whole group)
by the context manager, at exit and on Ctrl-C, and with ``PR_SET_PDEATHSIG`` when started from the
main thread on Linux (see ``embedded.py`` for what was weighed). Its settings come from
``ServerTuning`` (``tuning.py``), its threads from ``threads.py``, and the prompt states it keeps
for the next server from ``prompt_states.py``.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import IO

from soothe_planner.errors import ConfigError
from soothe_planner.local.model_file import (
    DEFAULT_MODEL,
    INSTALL_HINT,
    EmbeddedModel,
    ensure_model_file,
    model_cache_dir,
)
from soothe_planner.local.prompt_states import PROMPT_STATES_ENV, PROMPT_STATES_MIB_ENV, folder_for
from soothe_planner.local.threads import default_threads
from soothe_planner.local.tuning import ServerTuning

__all__ = ["DRAFT_TOKENS_ENV", "LocalModelServer"]

DRAFT_TOKENS_ENV = "SOOTHE_LLM_DRAFT_TOKENS"
"""How many tokens the server guesses per pass (``ServerTuning.draft_tokens``), for a server started with default settings."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:  # runs in the child between fork and exec (Linux only)
    import ctypes

    pr_set_pdeathsig = 1
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


class LocalModelServer:
    """llama.cpp's OpenAI-compatible server for one model file, on 127.0.0.1; a context manager."""

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        port: int | None = None,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        startup_timeout_s: float = 180.0,
        command: Sequence[str] | None = None,
        tuning: ServerTuning | None = None,
        model: EmbeddedModel = DEFAULT_MODEL,
    ) -> None:
        self.model_path = model_path
        self.model = model
        self.host = "127.0.0.1"
        self.port = port
        self.tuning = tuning or ServerTuning()
        guesses = os.environ.get(DRAFT_TOKENS_ENV, "").strip()
        if tuning is None and guesses:
            if not guesses.isdigit():
                raise ConfigError(f"{DRAFT_TOKENS_ENV}={guesses!r}: give a whole number of tokens >= 0 (0 guesses none)")
            self.tuning = self.tuning.with_(draft_tokens=int(guesses))
        if n_ctx is not None:
            self.tuning = self.tuning.with_(n_ctx=n_ctx)
        self.n_threads = n_threads or default_threads()
        self.startup_timeout_s = startup_timeout_s
        self.command = list(command) if command else [sys.executable, "-m", "soothe_planner.local.launcher"]
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._atexit_registered = False

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def argv(self) -> list[str]:
        return [
            *self.command,
            "--model", str(self.model_path),
            "--model_alias", self.model.alias,
            "--host", self.host,
            "--port", str(self.port),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            *self.tuning.flags(),
            "--verbose", "False",
        ]  # fmt: skip

    @property
    def n_ctx(self) -> int:
        return self.tuning.n_ctx

    def states_env(self) -> dict[str, str]:
        """Where the server keeps its prompt states for the next one (``prompt_states.py``); empty when it keeps none.

        One folder per model file, llama-cpp-python version and context size, under the model cache
        folder, or under the folder ``SOOTHE_LLAMA_PROMPT_STATES`` names (never a state of another
        model, whatever the user points at).
        """
        t = self.tuning
        if not (t.prompt_cache_mib and t.prompt_states_mib) or self.model_path is None:
            return {}
        root = Path(os.environ.get(PROMPT_STATES_ENV) or model_cache_dir() / "prompt-states")
        try:
            from importlib.metadata import version

            library = version("llama_cpp_python")
        except Exception:  # any failure: a folder of its own
            library = "unknown"
        try:
            folder = folder_for(root, str(self.model_path), t.n_ctx, library)
        except OSError:  # no model file to name the folder by: the server will say what is wrong
            return {}
        return {PROMPT_STATES_ENV: str(folder), PROMPT_STATES_MIB_ENV: str(t.prompt_states_mib)}

    def log_tail(self, max_chars: int = 2000) -> str:
        if self._log is None:
            return ""
        with contextlib.suppress(OSError, ValueError):
            self._log.flush()
            self._log.seek(0)
            return self._log.read().decode("utf-8", errors="replace")[-max_chars:].strip()
        return ""

    def start(self) -> str:
        """Start the server and wait until it answers; returns its base URL."""
        if self.process is not None and self.process.poll() is None:
            return self.base_url
        if self.model_path is None:
            self.model_path = ensure_model_file(model=self.model)
        if self.command[1:3] == ["-m", "soothe_planner.local.launcher"]:
            import importlib.util

            if importlib.util.find_spec("llama_cpp") is None:
                raise ConfigError(f"the embedded model needs llama-cpp-python; {INSTALL_HINT}")
        self.port = self.port or _free_port()
        # A file, not a pipe: nobody drains a pipe while the server runs, and a full pipe blocks it.
        self._log = tempfile.TemporaryFile(prefix="soothe-llm-")  # noqa: SIM115 (lives as long as the server)
        main_thread = threading.current_thread() is threading.main_thread()
        self.process = subprocess.Popen(
            self.argv(),
            stdin=subprocess.DEVNULL,
            env={**os.environ, **self.tuning.env(), **self.states_env()},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopping it stops its children too
            preexec_fn=_die_with_parent if sys.platform == "linux" and main_thread else None,
        )
        if not self._atexit_registered:
            atexit.register(self.stop)
            self._atexit_registered = True
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self.base_url

    def _wait_ready(self) -> None:
        import httpx

        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        delay = 0.05
        while True:
            code = self.process.poll()
            if code is not None:
                tail = " | ".join(line.strip() for line in self.log_tail().splitlines()[-6:] if line.strip())
                raise ConfigError(
                    f"the local model server exited with code {code} before it was ready; its output ends: {tail}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(self.base_url + "/models", timeout=2.0).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise ConfigError(
                    f"the local model server did not answer on {self.base_url} within {self.startup_timeout_s:.0f} s"
                )
            time.sleep(delay)
            delay = min(0.5, delay * 2)

    def stop(self) -> None:
        """Stop the server's whole process group; idempotent."""
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None

    def __enter__(self) -> LocalModelServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
