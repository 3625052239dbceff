"""Is this model text a tool call written as text, and if so, which calls with which arguments?

Small models asked to use a tool often *write* the call instead of making it: the server returns it
as message text, and whatever reads the text as an answer would report a step that did nothing as
done. This is the one recogniser of that text, used at two boundaries that must stay apart:

- the embedded model's adapter (``local/embedded.py``) lifts such text into real tool calls when
  tools were bound to the request — a fix at the model boundary that helps every strategy using
  that model (a ReAct baseline as much as the StrangeLoop);
- the step runner (``execution/``) checks every step output a model produced: a call it finds is
  executed if the step may use that tool with those arguments, otherwise the step fails with
  ``unexecuted_tool_call`` — a recovery and an honesty rule of this package's own.

It only reads; what a call is allowed to do is decided by the caller.

Tolerances, every one (lenient because the input is a model; anything else is not a call):

Where a call may stand
  - the whole text, or anywhere in it: prose around a call is allowed and returned as ``prose``;
  - inside ```` ```json ```` / ```` ``` ```` fences or Qwen's ``<tool_call>…</tool_call>`` tags
    (an unclosed last tag, as when output was cut off, is accepted); the markers are not prose;
  - several calls in one message, one after another or as one JSON array of calls;
  - closed ``<think>…</think>`` blocks are removed first;
  - a call cut off by the end of the text is still a call (the model meant one), with
    ``args=None``: half a call is never run.
The shape of one call
  - ``{"name": N, "arguments": A}``, with ``parameters`` or ``args`` for ``arguments``, and an
    optional ``type`` and ``id``;
  - OpenAI's wire shape ``{"type": "function", "function": {"name": N, "arguments": A}}`` (``type``
    and ``id`` optional);
  - ``N`` is a string naming a tool (letters, digits, ``_ . -``); an argument key must be present —
    ``{"name": "Alice"}`` is data, not a call; any other key makes the object data, not a call.
The arguments
  - an object; ``null`` (read as no arguments); or a *string* holding JSON, as models copy the wire
    format (``"arguments": "{\\"path\\": \\".\\"}"``), read with the repairs of ``json_repair``;
  - a string that does not hold a JSON object still makes the object a call — the model meant one —
    with ``args=None`` and the reason in ``problem``, so the caller can refuse it by name.
JSON syntax is read with the repairs of ``json_repair`` (trailing commas, single quotes, …).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from soothe_planner.parsing.json_repair import json_type, scan_values, strip_think

__all__ = ["TextToolCall", "TextToolCalls", "read_text_tool_calls"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,127}$")
_ARG_KEYS = ("arguments", "parameters", "args")
_CALL_KEYS = frozenset((*_ARG_KEYS, "name", "type", "id"))
_WRAPPER_KEYS = frozenset(("function", "type", "id"))
# Fence and tag markers left once the calls inside them are cut out: not prose.
_MARKERS = re.compile(r"```[A-Za-z_]*|</?tool_call>", re.IGNORECASE)
MAX_CALLS = 8
"""Calls read from one message; a text holding more is read up to this many (the rest are ignored)."""


@dataclass(frozen=True)
class TextToolCall:
    """One call found in text: the tool's name and its arguments, or why they could not be read."""

    name: str
    args: dict[str, Any] | None
    problem: str | None = None

    def describe(self) -> str:
        """``name({...})`` for messages, arguments abbreviated."""
        if self.args is None:
            return f"{self.name}(<{self.problem or 'unreadable arguments'}>)"
        text = json.dumps(self.args, ensure_ascii=False, default=str)
        return f"{self.name}({text if len(text) <= 160 else text[:159] + '…'})"


@dataclass(frozen=True)
class TextToolCalls:
    """Every call found in a text, in order, and the prose around them (whitespace collapsed)."""

    calls: tuple[TextToolCall, ...]
    prose: str

    def __bool__(self) -> bool:
        return bool(self.calls)


def _read_args(value: Any) -> tuple[dict[str, Any] | None, str | None]:
    if value is None:
        return {}, None
    if isinstance(value, dict):
        return _plain(value), None
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            found = [f.value for f in scan_values(value).found if isinstance(f.value, dict) and not f.value.cut]
            parsed = found[0] if len(found) == 1 else None
        if isinstance(parsed, dict):
            return _plain(parsed), None
        return None, f"arguments is a string that holds no JSON object: {value[:80]!r}"
    return None, f"arguments is a JSON {json_type(value)}, not an object"


def _plain(value: dict[str, Any]) -> dict[str, Any]:
    # The scanner's containers are dict/list subclasses carrying a ``cut`` flag; callers get JSON.
    plain: dict[str, Any] = json.loads(json.dumps(value, default=str))
    return plain


def _as_call(value: Any) -> TextToolCall | None:
    if not isinstance(value, dict):
        return None
    if "function" in value and set(value) <= _WRAPPER_KEYS:
        if value.get("type", "function") != "function":
            return None
        return _as_call(value["function"])
    if not set(value) <= _CALL_KEYS:
        return None
    name = value.get("name")
    present = [k for k in _ARG_KEYS if k in value]
    if not isinstance(name, str) or not _NAME.match(name) or len(present) != 1:
        return None
    if value.get("type", "function") != "function":
        return None
    args, problem = _read_args(value[present[0]])
    return TextToolCall(name=name, args=args, problem=problem)


def _calls_in(value: Any) -> list[TextToolCall] | None:
    """The calls a top-level JSON value holds: one call, or an array of nothing but calls."""
    if isinstance(value, dict):
        call = _as_call(value)
        return [call] if call is not None else None
    if isinstance(value, list) and value:
        calls = [_as_call(v) for v in value]
        if all(c is not None for c in calls):
            return [c for c in calls if c is not None]
    return None


def read_text_tool_calls(text: str) -> TextToolCalls:
    """The tool calls written in ``text`` (see the module docstring); empty when it holds none."""
    if not text or ("{" not in text):
        return TextToolCalls((), " ".join((text or "").split()))
    clean = strip_think(text)
    calls: list[TextToolCall] = []
    spans: list[tuple[int, int]] = []
    for found in scan_values(clean).found:
        got = _calls_in(found.value)
        if got and getattr(found.value, "cut", False):
            # A call cut off by the end of the text may have lost arguments: never run half a call.
            got = [TextToolCall(c.name, None, "the call was cut off before it ended") for c in got]
        if got:
            calls.extend(got)
            spans.append((found.start, found.end))
    if not calls:
        return TextToolCalls((), " ".join(clean.split()))
    pieces: list[str] = []
    last = 0
    for start, end in spans:
        pieces.append(clean[last:start])
        last = end
    pieces.append(clean[last:])
    prose = " ".join(_MARKERS.sub(" ", "".join(pieces)).split())
    return TextToolCalls(tuple(calls[:MAX_CALLS]), prose)
