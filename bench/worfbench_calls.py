"""What did each WorFBench variant cost: which model calls it made, their tokens and their seconds?

Every model call of a run is recorded once, by a LangChain callback on the model (so the calls the
planner makes through its own machinery — re-asks, a raw fallback, a transport retry — are seen as
surely as the harness's own): the phase the planner named it with (``soothe_phase`` in its run
metadata; ``""`` for the harness's own call), what the model wrote (its text, or its tool calls'
arguments as JSON), the prompt and completion tokens the model reported (``usage_metadata``;
``None`` when it reported none, never estimated), and the seconds from the request's start to its
end, measured around the model call alone (a wait for the LLM slot is not model time).

A variant's answer names how many of its run's calls it accounts for, always a prefix: all of them,
the calls before the first re-ask, or the first alone. Its cost is computed from those records and
nothing else (``cost_of``), so the figures and the raw answers cannot disagree.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from langchain_core.callbacks import AsyncCallbackHandler

__all__ = ["COST_KEYS", "CallRecord", "CallRecorder", "cost_of", "summarise_cost"]

COST_KEYS = ("llm_calls", "prompt_tokens", "completion_tokens", "model_seconds")


@dataclass
class CallRecord:
    """One model call: its phase, what the model wrote, its tokens and its seconds."""

    phase: str
    text: str
    prompt_tokens: int | None
    completion_tokens: int | None
    seconds: float
    tool_calls: list[Any] = field(default_factory=list)
    error: str = ""


class CallRecorder(AsyncCallbackHandler):
    """Records every model call between two ``take`` calls (see the module docstring)."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []
        self._open: dict[Any, tuple[float, str]] = {}

    def _start(self, run_id: Any, metadata: dict[str, Any] | None) -> None:
        self._open[run_id] = (time.perf_counter(), str((metadata or {}).get("soothe_phase") or ""))

    async def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: Any,
                                  metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._start(run_id, metadata)

    async def on_llm_start(self, serialized: Any, prompts: Any, *, run_id: Any,
                           metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        self._start(run_id, metadata)

    async def on_llm_end(self, response: Any, *, run_id: Any, **kwargs: Any) -> None:
        began, phase = self._open.pop(run_id, (time.perf_counter(), ""))
        seconds = time.perf_counter() - began
        for gens in response.generations:
            for gen in gens:
                msg = getattr(gen, "message", None)
                calls = [c.get("args") for c in getattr(msg, "tool_calls", None) or []]
                text = getattr(gen, "text", "") or ""
                usage = getattr(msg, "usage_metadata", None) or _llm_output_usage(response)
                self.records.append(CallRecord(
                    phase=phase, text=json.dumps(calls) if calls and not text else text,
                    prompt_tokens=_int(usage, "input_tokens", "prompt_tokens"),
                    completion_tokens=_int(usage, "output_tokens", "completion_tokens"),
                    seconds=seconds, tool_calls=calls,
                ))

    async def on_llm_error(self, error: BaseException, *, run_id: Any, **kwargs: Any) -> None:
        began, phase = self._open.pop(run_id, (time.perf_counter(), ""))
        self.records.append(CallRecord(phase=phase, text="", prompt_tokens=None, completion_tokens=None,
                                       seconds=time.perf_counter() - began, error=f"{type(error).__name__}: {error}"))

    def take(self) -> list[dict[str, Any]]:
        """The calls recorded since the last ``take``, as plain dicts (the results file's form)."""
        out, self.records = [asdict(r) for r in self.records], []
        return out


def _llm_output_usage(response: Any) -> dict[str, Any] | None:
    out = getattr(response, "llm_output", None) or {}
    usage = out.get("token_usage") if isinstance(out, dict) else None
    return usage if isinstance(usage, dict) else None


def _int(usage: Any, *keys: str) -> int | None:
    if not isinstance(usage, dict):
        return None
    for key in keys:
        if isinstance(usage.get(key), int):
            return int(usage[key])
    return None


def cost_of(calls: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """An answer's cost from the calls it accounts for; a token count is ``None`` if any call lacks it."""
    prompt = [c.get("prompt_tokens") for c in calls]
    completion = [c.get("completion_tokens") for c in calls]
    return {
        "llm_calls": len(calls),
        "prompt_tokens": None if None in prompt else sum(int(p) for p in prompt if p is not None),
        "completion_tokens": None if None in completion else sum(int(p) for p in completion if p is not None),
        "model_seconds": sum(float(c.get("seconds") or 0.0) for c in calls),
    }


def summarise_cost(costs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per-item means and totals of a variant's costs; tokens over the items that reported them."""
    out: dict[str, Any] = {"items": len(costs)}
    for key in COST_KEYS:
        values = [float(c[key]) for c in costs if c.get(key) is not None]
        out[f"{key}_per_item"] = statistics.mean(values) if values else None
        out[f"{key}_total"] = sum(values) if values else None
        if len(values) != len(costs):
            out[f"{key}_items_unreported"] = len(costs) - len(values)
    return out
