"""What model does a ``scripted:PATH`` model string (or ``SOOTHE_SCRIPTED_MODEL``) name?

A ``testing`` double built from a JSON script file, so a config can run end to end with no model
at all: the CLI's tests, the server's CI test, demos. The file's forms are listed on
``load_script``; the by-schema form answers each call from the queue of the schema it asks for, so
concurrent runs sharing one model (a server) get their replies whatever the interleaving.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel

from soothe_planner.errors import ConfigError

__all__ = ["load_script"]


_SCRIPT_OPTIONS = {"replies", "latency_s", "call_log"}


def load_script(path: str, label: str | None = None) -> BaseChatModel:
    """The scripted model of a script file (see ``SCRIPTED_MODEL_ENV`` and the ``scripted:`` model string).

    The file holds a JSON list of replies (answered in order), or an object of reply lists keyed by
    schema name ('text' for plain calls; robust to the order of concurrent calls), or
    ``{"replies": <either>, "latency_s": S, "call_log": PATH}``: each call then takes S seconds
    and appends ``{"schema", "thread_id", "start", "end"}`` (wall-clock seconds) as a JSON line to ``call_log``
    (relative to the script's folder) — a record kept by the model itself, from which another
    process (a test driving a server) can read how many calls overlapped.

    ``label``: how messages name the script (default: its path); a path that came from an
    environment variable is shown hidden, since a run's errors are printed and saved.
    """
    from soothe_planner.testing import ScriptedChatModel

    shown = path if label is None else label
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"scripted model: script file {shown!r} does not exist") from None
    except OSError as exc:  # its own text names the path again: the reason alone
        raise ConfigError(f"scripted model: {shown!r} cannot be read: {exc.strerror or type(exc).__name__}") from None
    except ValueError as exc:
        raise ConfigError(f"scripted model: {shown!r} is not a readable JSON file: {exc}") from None
    options: dict[str, Any] = {}
    if isinstance(data, dict) and "replies" in data and set(data) <= _SCRIPT_OPTIONS:
        options, data = {k: v for k, v in data.items() if k != "replies"}, data["replies"]
        latency = options.get("latency_s", 0)
        if not isinstance(latency, int | float) or isinstance(latency, bool) or latency < 0:
            raise ConfigError(f"scripted model {shown!r}: latency_s must be a number of seconds >= 0, got {latency!r}")
        if "call_log" in options and not isinstance(options["call_log"], str):
            raise ConfigError(f"scripted model {shown!r}: call_log must be a file path, got {options['call_log']!r}")
    if isinstance(data, list):
        if not options:
            return ScriptedChatModel(responses=data)
        return _by_schema({"*": data}, path, options, shown)
    if isinstance(data, dict) and all(isinstance(v, list) for v in data.values()):
        return _by_schema(data, path, options, shown)
    raise ConfigError(
        f"scripted model: {shown!r} must hold a JSON list of replies, an object of reply lists keyed by "
        f"schema name ('text' for plain calls), or {{\"replies\": ..., \"latency_s\": ..., \"call_log\": ...}}, "
        f"got {type(data).__name__}"
    )


def _by_schema(
    queues: dict[str, list[Any]], path: str, options: dict[str, Any] | None = None, shown: str | None = None
) -> BaseChatModel:
    """A model answering each call from the queue of its requested schema ('*': one queue for all)."""
    import asyncio
    import threading
    import time

    from soothe_planner.errors import ScriptExhaustedError
    from soothe_planner.testing import FunctionChatModel, ScriptedCall

    options = options or {}
    shown = path if shown is None else shown
    pending = {k: list(v) for k, v in queues.items()}
    lock = threading.Lock()
    latency = float(options.get("latency_s", 0))
    log = Path(path).parent / options["call_log"] if "call_log" in options else None

    def next_reply(call: ScriptedCall) -> Any:
        key = "*" if "*" in pending else (call.schema_name or "text")
        with lock:
            queue = pending.get(key)
            if not queue:
                raise ScriptExhaustedError(f"scripted model {shown!r} has no reply left for {key!r}")
            return queue.pop(0)

    if not latency and log is None:
        return FunctionChatModel(next_reply)

    def record(entry: dict[str, Any]) -> None:
        assert log is not None
        with log.open("a", encoding="utf-8") as out:
            out.write(json.dumps(entry, default=str) + "\n")

    async def reply(call: ScriptedCall) -> Any:
        start = time.time()
        answer = next_reply(call)
        await asyncio.sleep(latency)
        if log is not None:  # a file write, off the event loop
            entry = {"schema": call.schema_name, "thread_id": call.metadata.get("thread_id"),
                     "start": start, "end": time.time()}
            await asyncio.to_thread(record, entry)
        return answer

    return FunctionChatModel(reply)
