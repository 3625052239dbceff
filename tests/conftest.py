"""Isolation for every test: no real network, no tracing keys from the environment, no stray processes.

A test may start servers on the loopback interface (a mock OTLP receiver, a local model server)
and use unix sockets; any other connection fails at once with an error naming the host, so no
test can reach a real model or a real Langfuse by accident.

A test may start processes, and must leave none behind. On Linux the test process makes itself
a *child subreaper* (``PR_SET_CHILD_SUBREAPER``), so a grandchild orphaned by its parent's death is
re-parented here instead of to init, where nobody would notice it. After each test the live
children are listed (from ``/proc``) and a new one is noted against the test that was running;
at the end of the session any that still live after a short grace are named with their test and
command line, killed, and the session fails. Checked per test but judged once, at the end, so a
module-scoped fixture that stops its server in its own teardown is not reported.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import socket
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

# Read by langgraph when it is imported, so it must be set before any test module imports it:
# checkpoints in tests hold plain data, and strict mode turns a stray object into an error.
os.environ["LANGGRAPH_STRICT_MSGPACK"] = "true"
for _key in [k for k in os.environ if k.startswith("LANGFUSE_")]:
    del os.environ[_key]

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


class NetworkBlockedError(RuntimeError):
    """A test tried to connect somewhere other than this machine."""


def _is_local(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths (str/bytes) and other local families
    host = address[0]
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    host = str(host).split("%", 1)[0]  # drop an IPv6 zone id
    if host.lower() in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _refuse(address: Any) -> NetworkBlockedError:
    return NetworkBlockedError(
        f"test tried to connect to {address!r}; tests may only use 127.0.0.1, ::1, localhost or "
        "unix sockets (start a local server, or use httpx.MockTransport / ScriptedChatModel)"
    )


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_create_connection = socket.create_connection

    def connect(self: socket.socket, address: Any) -> None:
        if not _is_local(address):
            raise _refuse(address)
        return real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not _is_local(address):
            raise _refuse(address)
        return real_connect_ex(self, address)

    def create_connection(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not _is_local(address):
            raise _refuse(address)
        return real_create_connection(address, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    yield


@pytest.fixture(autouse=True)
def _no_tracing_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in [k for k in os.environ if k.startswith("LANGFUSE_")]:
        monkeypatch.delenv(key)


# --------------------------------------------------------------------------- no process left behind

_PR_SET_CHILD_SUBREAPER = 36
_LEFT_GRACE_S = 3.0  # a process signalled at the very end of a test may take a moment to exit
_first_seen: dict[int, tuple[str, str]] = {}  # pid -> (test that was running, command line)
_left_behind: list[str] = []


def _become_subreaper() -> None:
    if sys.platform != "linux":
        return
    import ctypes

    # if this fails, only direct children are seen; orphans escape to init unnoticed
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _live_children() -> dict[int, str]:
    """This process's children that are not zombies, with their command lines (Linux /proc)."""
    me = os.getpid()
    found: dict[int, str] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return found
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
            # the command name may hold spaces and parentheses: the fields start after the last ')'
            state, ppid = stat[stat.rindex(b")") + 2 :].split()[:2]
            if int(ppid) != me or state == b"Z":
                continue
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError):
            continue
        found[int(name)] = cmdline[:200]
    return found


def pytest_configure(config: pytest.Config) -> None:
    _become_subreaper()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    yield
    for pid, cmdline in _live_children().items():
        _first_seen.setdefault(pid, (item.nodeid, cmdline))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    deadline = time.monotonic() + _LEFT_GRACE_S
    alive = _live_children()
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = _live_children()
    for pid, cmdline in sorted(alive.items()):
        test, _ = _first_seen.get(pid, ("(no test: started during collection or session teardown)", cmdline))
        _left_behind.append(f"pid {pid} ({cmdline}) left behind by {test}")
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    if _left_behind and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if _left_behind:
        terminalreporter.section("processes left behind (killed; the session fails)", red=True)
        for line in _left_behind:
            terminalreporter.line(line)
