"""Shared witnesses for the limiter tests: a counter inside the model, and slow test models."""

from __future__ import annotations

import asyncio
import threading
import time

from soothe_planner.testing import FunctionChatModel, ScriptedCall

# A bug in the limiter shows up as a hang; these bound every wait so it becomes a failure instead.
GUARD_S = 10.0


class InFlight:
    """Counts calls inside the model itself: an independent witness of the controller's numbers."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.max = 0
        self.done = 0

    def enter(self) -> None:
        with self.lock:
            self.now += 1
            self.max = max(self.max, self.now)

    def exit(self) -> None:
        with self.lock:
            self.now -= 1
            self.done += 1


def slow_async_model(witness: InFlight, delay_s: float = 0.003) -> FunctionChatModel:
    async def reply(call: ScriptedCall) -> str:
        witness.enter()
        try:
            # Varying sleeps make calls finish out of order, so hand-over is exercised.
            await asyncio.sleep(delay_s * (1 + call.index % 3) / 2)
            return f"reply {call.index}"
        finally:
            witness.exit()

    return FunctionChatModel(reply)


def slow_sync_model(witness: InFlight, delay_s: float = 0.002) -> FunctionChatModel:
    def reply(call: ScriptedCall) -> str:
        witness.enter()
        try:
            time.sleep(delay_s)
            return "ok"
        finally:
            witness.exit()

    return FunctionChatModel(reply)
