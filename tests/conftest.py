"""Isolation for every test: no real network, no tracing keys from the environment.

A test may start servers on the loopback interface (a mock OTLP receiver, a local model server)
and use unix sockets; any other connection fails at once with an error naming the host, so no
test can reach a real model or a real Langfuse by accident.
"""

from __future__ import annotations

import ipaddress
import os
import socket
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
