"""The servers ``bench local`` measures, one streamed request at a time, and how tokens are counted.

- ``PythonServer``: the package's own ``LocalModelServer`` (llama-cpp-python's server through the
  package's launcher) for one embedded model, with a given ``ServerTuning``.
- ``LlamaServer``: llama.cpp's ``llama-server`` binary, built elsewhere and named on the command
  line (this benchmark never builds or downloads anything), with ``--jinja`` for the model's chat
  template, several slots and its host-memory prompt cache.

A request is sent with ``stream: true``: the first chunk that carries any output (text, or a
tool call's name or arguments) marks the time to first token; a chunk carrying only the role
does not. llama-server reports token counts and the reused prefix in its final chunk;
llama-cpp-python reports nothing when streaming, so its prompt is rendered with the model's own
chat template and tokenised with the model's vocabulary (``TokenCounter``: a vocabulary-only
load, no weights), as its server does.

The server process's CPU seconds per request are read from ``/proc``: on a machine others share,
they stay meaningful where wall time does not.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import httpx

from bench._common import scoped_environ

__all__ = ["LlamaServer", "PythonServer", "Server", "Streamed", "TokenCounter", "stream"]


@dataclass
class Streamed:
    """What one streamed request took and returned; token counts only when the server said them."""

    ttft: float
    total: float
    text: str
    cpu_s: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reused: int | None = None


def cpu_seconds(pid: int | None) -> float:
    """User plus system CPU seconds of process ``pid`` so far (0 when unknown)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _output_of(chunk: dict[str, Any]) -> tuple[str, bool]:
    """(the output text a chunk carries, whether it names a tool call)."""
    piece, named = "", False
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        piece += delta.get("content") or ""
        for call in delta.get("tool_calls") or []:
            fn = call.get("function") or {}
            # llama-cpp-python repeats the tool's name in every chunk: only the arguments are output
            named = named or bool(fn.get("name"))
            piece += fn.get("arguments") or ""
    return piece, named


def stream(base_url: str, body: dict[str, Any], pid: int | None = None, *, timeout_s: float = 900.0,
           clock: Callable[[], float] = time.perf_counter) -> Streamed:
    """POST one chat completion, streamed; time it and read what the server says about it."""
    payload = {**body, "stream": True}
    payload.setdefault("model", "local")
    cpu0 = cpu_seconds(pid)
    t0 = clock()
    ttft: float | None = None
    parts: list[str] = []
    final: dict[str, Any] = {}
    with httpx.stream("POST", base_url + "/chat/completions", json=payload, timeout=timeout_s) as response:
        if response.status_code != 200:
            raise RuntimeError(f"the server answered HTTP {response.status_code}: {response.read()[:300]!r}")
        for line in response.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            if "timings" in chunk:
                final = chunk
            piece, named = _output_of(chunk)
            if (piece or named) and ttft is None:
                ttft = clock() - t0
            parts.append(piece)
    total = clock() - t0
    got = Streamed(ttft if ttft is not None else total, total, "".join(parts), cpu_seconds(pid) - cpu0)
    timings = final.get("timings") or {}
    if timings:
        got.reused = int(timings.get("cache_n", 0))
        got.prompt_tokens = int(timings.get("prompt_n", 0)) + got.reused
        got.completion_tokens = int(timings.get("predicted_n", 0))
    return got


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server(Protocol):
    """A model server that is running between ``__enter__`` and ``__exit__``."""

    def __enter__(self) -> Server: ...
    def __exit__(self, *exc: object) -> None: ...
    def stream(self, body: dict[str, Any]) -> Streamed: ...


class PythonServer:
    """The package's embedded server for ``model`` with ``tuning`` (``{"stock": True}``: the untuned one)."""

    def __init__(self, model: Any, *, threads: int, tuning: dict[str, Any], states_dir: Path | None = None) -> None:
        from soothe_planner.local import LocalModelServer
        from soothe_planner.local.tuning import ServerTuning

        self.states_dir = states_dir  # where its prompt states go (a configuration's own folder), if it keeps any
        settings = dict(tuning)
        base = ServerTuning.stock() if settings.pop("stock", False) else ServerTuning()
        # States a server left on disk would let the next configuration restore prompts it never read.
        settings.setdefault("prompt_states_mib", 0)
        self.server = LocalModelServer(model=model, n_threads=threads, tuning=base.with_(**settings))

    def __enter__(self) -> PythonServer:
        from soothe_planner.local.prompt_states import PROMPT_STATES_ENV

        if self.states_dir is None:
            self.server.start()
        else:
            with scoped_environ(**{PROMPT_STATES_ENV: str(self.states_dir)}):
                self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    def stream(self, body: dict[str, Any]) -> Streamed:
        proc = self.server.process
        return stream(self.server.base_url, body, proc.pid if proc else None)


class LlamaServer:
    """llama.cpp's ``llama-server`` for ``model`` on 127.0.0.1; ``options``: parallel, n_ctx, cache_ram_mib, no_repack."""

    def __init__(self, binary: str, model: Any, *, threads: int, options: dict[str, Any]) -> None:
        from soothe_planner.local import ensure_model_file

        self.binary = binary
        self.threads = threads
        self.options = {"parallel": 4, "n_ctx": 4096, "cache_ram_mib": 256, "no_repack": True, **options}
        self.model_path = ensure_model_file(model=model)
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.process: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        o = self.options
        # every slot gets the whole context: one KV buffer shared by all slots (--kv-unified)
        argv = [self.binary, "-m", str(self.model_path), "--host", "127.0.0.1", "--port", str(self.port),
                "-t", str(self.threads), "-tb", str(self.threads), "-c", str(o["n_ctx"]),
                "-np", str(o["parallel"]), "--kv-unified", "--jinja", "--cache-ram", str(o["cache_ram_mib"]),
                "--no-webui", "--log-disable"]
        if o.get("no_repack"):
            argv.append("--no-repack")
        return argv

    def __enter__(self) -> LlamaServer:
        self.process = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise RuntimeError(f"llama-server exited with code {code} before it was ready")
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/health", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.__exit__()
        raise RuntimeError("llama-server did not become ready in 180 s")

    def __exit__(self, *exc: object) -> None:
        proc, self.process = self.process, None
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)

    def stream(self, body: dict[str, Any]) -> Streamed:
        payload = dict(body)
        payload.pop("max_completion_tokens", None)  # llama-server honours it; one cap is enough
        return stream(self.base_url, payload, self.process.pid if self.process else None)


class TokenCounter:
    """Tokens of a request as llama-cpp-python's server sees them: its chat template, its vocabulary."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self._llama: Any = None
        self._formatter: Any = None

    def _load(self) -> None:
        if self._llama is not None:
            return
        from llama_cpp import Llama
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        from soothe_planner.local import ensure_model_file

        llama = Llama(str(ensure_model_file(model=self.model)), vocab_only=True, verbose=False)
        # the special tokens as the server's own chat handler takes them (llama_cpp.Llama.__init__)
        eos, bos = llama.token_eos(), llama.token_bos()
        self._formatter = Jinja2ChatFormatter(
            llama.metadata["tokenizer.chat_template"],
            eos_token=llama._model.token_get_text(eos) if eos != -1 else "",
            bos_token=llama._model.token_get_text(bos) if bos != -1 else "",
        )
        self._llama = llama

    def prompt_tokens(self, body: dict[str, Any]) -> int:
        self._load()
        rendered = self._formatter(messages=body["messages"], tools=body.get("tools"),
                                   tool_choice=body.get("tool_choice"))
        ids = self._llama.tokenize(rendered.prompt.encode("utf-8"), add_bos=not rendered.added_special, special=True)
        return len(ids)

    def count(self, text: str) -> int:
        if not text:
            return 0
        self._load()
        return len(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))
