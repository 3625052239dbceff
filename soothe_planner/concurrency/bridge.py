"""How does synchronous code (a script, a notebook cell, ``graph.invoke``) run the package's async work?

Through one background event loop per process, on a daemon thread started on first use:
``run_sync(coroutine)`` hands the coroutine to that loop and blocks the calling thread until it is
done, with the caller's context variables (LangGraph's run config, stream writer and runtime, the
limiter's held slots) copied into the task, so a node behaves the same under ``invoke`` as under
``ainvoke``.

What was weighed:

- ``asyncio.run`` per call is the obvious form and the wrong one: it cannot run on a thread whose
  loop is running (a Jupyter cell), and each call makes a new loop, while provider clients
  (``httpx.AsyncClient`` pools) bind their connections to the loop that opened them — a second
  loop then reuses sockets of a closed one. One long-lived loop keeps every async client on one
  loop for the life of the process.
- Blocking the caller is the contract of a sync call. A caller that *is* the bridge's loop (sync
  code called from a coroutine the bridge runs) would wait on itself forever; that is refused with
  an error that says to await instead.
- The loop is a daemon thread: a script that forgets to close anything still exits.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["run_sync"]

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _bridge_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed() or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            ready = threading.Event()

            def serve() -> None:
                asyncio.set_event_loop(loop)
                loop.call_soon(ready.set)
                loop.run_forever()

            thread = threading.Thread(target=serve, name="soothe-sync-bridge", daemon=True)
            thread.start()
            ready.wait()
            _loop, _thread = loop, thread
        return _loop


def run_sync(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run ``coroutine`` to completion on the bridge loop and return its result (or raise its error)."""
    loop = _bridge_loop()
    if threading.current_thread() is _thread:
        coroutine.close()
        raise RuntimeError(
            "a synchronous soothe-planner call was made from code running on its own sync bridge; "
            "inside async code, await the async form instead (ainvoke, or the planner's async methods)"
        )
    context = contextvars.copy_context()
    done: Future[T] = Future()

    def start() -> None:
        task = loop.create_task(coroutine, context=context)

        def finish(t: asyncio.Task[T]) -> None:
            if t.cancelled():
                done.cancel()
            elif (exc := t.exception()) is not None:
                done.set_exception(exc)
            else:
                done.set_result(t.result())

        task.add_done_callback(finish)

    loop.call_soon_threadsafe(start)
    return done.result()
