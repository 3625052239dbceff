"""Finding JSON values in model text, and repairing the mistakes models make in it.

The question: which JSON values does this text hold, read as generously as is safe? It is the
scanner under ``parsing.py``, and nothing else uses it; the tolerances it implements are listed
(and justified) in the docstring of ``parsing.py``, which is the one place that decides what a
model's text means. This module only turns text into Python values and says what it repaired.

Weighed: ``json.loads`` on a guessed slice (fails on every repair below), a third-party repairer
(json5/demjson: another dependency, and each guesses more than we want), a recursive-descent
parser (a model, or an attacker, writing 10,000 ``[`` blows the stack). This is a small
iterative parser with an explicit stack and a depth cap, driven by regular expressions that
never backtrack, so its time is linear in practice and bounded by a scan budget in the worst case.

A value whose text ended before its closing bracket is returned with ``cut = True`` on every
container that was still open; callers decide what a cut container is worth.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MAX_DEPTH", "Arr", "Broken", "Found", "Obj", "Scan", "json_type", "scan_values", "strip_think"]

MAX_DEPTH = 64
"""Deeper nesting than this is not a plan or an answer; it is refused, not recursed into."""

_BUDGET_FACTOR = 8
"""Work units (a token, or a character searched inside a string) per input character before the
scan gives up: every bracket is a fresh attempt, and this is what keeps hostile text linear."""


class Obj(dict[str, Any]):
    """A scanned JSON object; ``cut`` when the text ended before its closing brace."""

    cut: bool = False


class Arr(list[Any]):
    """A scanned JSON array; ``cut`` when the text ended before its closing bracket."""

    cut: bool = False


@dataclass
class Found:
    """One whole top-level value: where it was and what had to be repaired to read it."""

    value: Obj | Arr
    start: int
    end: int
    repairs: set[str] = field(default_factory=set)


@dataclass
class Broken:
    """A bracket where a value began but could not be read: it failed at ``pos`` for ``reason``."""

    start: int
    pos: int
    reason: str


@dataclass
class Scan:
    """Everything one pass over a text found."""

    found: list[Found]
    broken: list[Broken]
    exhausted: bool = False


class _Syntax(Exception):
    def __init__(self, pos: int, reason: str, *, deep: bool = False) -> None:
        super().__init__(reason)
        self.pos = pos
        self.reason = reason
        self.deep = deep


# Whitespace and comments between tokens. One character or one comment per repetition, so the
# star never has two ways to match the same text (no catastrophic backtracking).
_GAP = re.compile(r"(?:\s|//[^\n]*|/\*.*?(?:\*/|\Z))*", re.S)
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?")
_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$-]*")
_OPENER = re.compile(r"[\[{]")
_QUOTES = {'"': '"', "'": "'", "\u201c": "\u201d"}
_STOPS = {q: re.compile("[\\\\" + re.escape(c) + "]") for q, c in _QUOTES.items()}
_LITERALS: dict[str, Any] = {"true": True, "false": False, "null": None, "none": None}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "/": "/", "\\": "\\", '"': '"', "'": "'"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|.)", re.S)
# After a closing quote, these mean the string really ended: a separator, a closer, the start
# of the next value (a missing comma), or a comment.
_ENDS_STRING = set(",:}]\"'{[/\u201c")


def _unescape(raw: str) -> str:
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if len(code) == 5:
            return chr(int(code[1:], 16))
        # An unknown escape such as "C:\dir" keeps its backslash: the model meant the text.
        return _ESCAPES.get(code, "\\" + code)

    out = _ESCAPE.sub(one, raw)
    try:
        return out.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeError:
        return out


def _read_string(text: str, pos: int, repairs: set[str], budget: list[int]) -> tuple[str, int, bool]:
    """The string opening at ``pos``: (value, index after it, whether the text ended inside it)."""
    quote = text[pos]
    stop = _STOPS[quote]
    n = len(text)
    i = pos + 1
    first_close = newline = -1
    while True:
        m = stop.search(text, i)
        budget[0] -= 1 + (m.end() if m else n) - i
        if budget[0] <= 0:
            raise _Syntax(i, "scan budget exhausted", deep=True)
        if first_close >= 0 and (m is None or 0 <= newline < m.start()):
            # Reading past a quote found no end on its line: the quote did end the string after all.
            return _unescape(text[pos + 1 : first_close]), first_close + 1, False
        if m is None:
            raw = text[pos + 1 :]
            if raw.endswith("\\") and not raw.endswith("\\\\"):
                raw = raw[:-1]
            return _unescape(raw), n, True
        j = m.start()
        if text[j] == "\\":
            i = j + 2
            continue
        k = j + 1
        while k < n and text[k] in " \t\r\n":
            k += 1
        if k >= n or text[k] in _ENDS_STRING:
            if quote != '"':
                repairs.add("non-JSON quotes")
            return _unescape(text[pos + 1 : j]), j + 1, False
        # A quote followed by a word is a quote inside the text ("say "hi" twice"): keep going.
        repairs.add("unescaped quote inside a string")
        if first_close < 0:
            first_close, newline = j, text.find("\n", j)
        i = j + 1


class _Frame:
    __slots__ = ("after_comma", "box", "key", "state")

    def __init__(self, box: Obj | Arr) -> None:
        self.box = box
        self.state = "K" if isinstance(box, Obj) else "V"
        self.key: str | None = None
        self.after_comma = False


def _read_value(text: str, pos: int, repairs: set[str], budget: list[int]) -> tuple[Obj | Arr, int]:
    """The object or array opening at ``pos``, read with an explicit stack (no recursion)."""
    n = len(text)
    root: Obj | Arr = Obj() if text[pos] == "{" else Arr()
    stack = [_Frame(root)]
    i = pos + 1

    def attach(fr: _Frame, value: Any) -> None:
        if isinstance(fr.box, Obj):
            fr.box[fr.key or ""] = value
        else:
            fr.box.append(value)
        fr.state = "N"

    def cut_all() -> tuple[Obj | Arr, int]:
        # Close what is open, innermost first: each open container joins its parent, marked cut.
        for k in range(len(stack) - 1, -1, -1):
            stack[k].box.cut = True
            if k:
                attach(stack[k - 1], stack[k].box)
        repairs.add("cut off")
        return root, n

    charged = i
    while True:
        gap = _GAP.match(text, i)
        if gap and gap.end() > i:
            if "/" in gap.group():
                repairs.add("comments")
            i = gap.end()
        # One unit per token plus one per character consumed since the last one, so a long gap,
        # word or unterminated comment costs what it took to read.
        budget[0] -= 1 + i - charged
        charged = i
        if budget[0] <= 0:
            raise _Syntax(i, "scan budget exhausted", deep=True)
        if i >= n:
            return cut_all()
        ch = text[i]
        fr = stack[-1]
        is_obj = isinstance(fr.box, Obj)
        closer = "}" if is_obj else "]"

        if fr.state == "N":
            if ch == ",":
                fr.state = "K" if is_obj else "V"
                fr.after_comma = True
                i += 1
                continue
            if ch != closer:
                if ch in _QUOTES or ch in "{[" or _WORD.match(text, i) or _NUMBER.match(text, i):
                    repairs.add("missing comma")
                    fr.state = "K" if is_obj else "V"
                    fr.after_comma = False
                    continue
                raise _Syntax(i, f"expected ',' or {closer!r}, found {ch!r}")
        elif fr.state == "K":
            if ch == "}":
                if fr.after_comma:
                    repairs.add("trailing comma")
            elif ch == ",":
                repairs.add("extra comma")
                i += 1
                continue
            elif ch in _QUOTES:
                key, i, ended = _read_string(text, i, repairs, budget)
                if ended:
                    return cut_all()
                fr.key, fr.state = key, "C"
                continue
            else:
                w = _WORD.match(text, i)
                if not w:
                    raise _Syntax(i, f"expected a key, found {ch!r}")
                if w.end() >= n:
                    return cut_all()
                repairs.add("unquoted keys")
                fr.key, fr.state, i = w.group(), "C", w.end()
                continue
        elif fr.state == "C":
            if ch != ":":
                raise _Syntax(i, f"expected ':' after key {fr.key!r}, found {ch!r}")
            fr.state = "V"
            i += 1
            continue
        else:  # "V": a value is due
            if ch == closer and not is_obj:
                if fr.after_comma:
                    repairs.add("trailing comma")
            elif ch == "," and not is_obj:
                repairs.add("extra comma")
                i += 1
                continue
            elif ch in "{[":
                if len(stack) >= MAX_DEPTH:
                    raise _Syntax(i, f"nested deeper than {MAX_DEPTH} levels", deep=True)
                stack.append(_Frame(Obj() if ch == "{" else Arr()))
                i += 1
                continue
            elif ch in _QUOTES:
                s, i, ended = _read_string(text, i, repairs, budget)
                attach(fr, s)
                if ended:
                    return cut_all()
                continue
            else:
                num = _NUMBER.match(text, i)
                if num:
                    t = num.group()
                    try:
                        attach(fr, int(t) if t.lstrip("+-").isdigit() else float(t))
                    except ValueError:
                        raise _Syntax(i, f"unreadable number {t!r}") from None
                    i = num.end()
                    continue
                w = _WORD.match(text, i)
                if w:
                    if w.end() >= n:
                        return cut_all()  # a literal cut in half: 'tr'
                    word = w.group()
                    if word.lower() in _LITERALS:
                        if word not in ("true", "false", "null"):
                            repairs.add("Python literals")
                        attach(fr, _LITERALS[word.lower()])
                    else:
                        repairs.add("unquoted strings")
                        attach(fr, word)
                    i = w.end()
                    continue
                raise _Syntax(i, f"expected a value, found {ch!r}")

        # ch closes the top frame (states N, K or V above fell through only for that).
        if ch != closer:
            raise _Syntax(i, f"expected {closer!r}, found {ch!r}")
        done = stack.pop()
        i += 1
        if not stack:
            return root, i
        attach(stack[-1], done.box)


def json_type(value: Any) -> str:
    """The JSON name of a scanned value's type, for messages a model will read in a re-ask."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "object" if isinstance(value, dict) else "array"


def strip_think(text: str) -> str:
    """``text`` without closed ``<think>…</think>`` blocks (a reasoning model's scratchpad)."""
    out: list[str] = []
    i = 0
    while True:
        a = text.find("<think>", i)
        if a < 0:
            break
        b = text.find("</think>", a)
        if b < 0:
            break  # an unclosed scratchpad may be all there is: keep it
        out.append(text[i:a])
        i = b + len("</think>")
    out.append(text[i:])
    return "".join(out)


def scan_values(text: str, useful: Callable[[Obj | Arr], bool] | None = None) -> Scan:
    """Every top-level object or array in ``text``, left to right, and every bracket that failed.

    After a value is read the scan continues after it; after a failure it continues one
    character past the failed bracket, so whole values inside broken ones are still found (the
    caller decides whether to trust them). A value cut off by the end of the text that
    ``useful`` rejects is kept but scanned *into* as well: an apostrophe in prose (``[it's``)
    opens a string that swallows the rest of the text, and the plan is inside it. Nesting past
    ``MAX_DEPTH`` skips past the deep part at once. The total work is capped by a budget of
    ``_BUDGET_FACTOR`` units per input character.
    """
    budget = [_BUDGET_FACTOR * len(text) + 65536]
    scan = Scan(found=[], broken=[])
    i = 0
    while True:
        m = _OPENER.search(text, i)
        if m is None:
            return scan
        start = m.start()
        repairs: set[str] = set()
        try:
            value, end = _read_value(text, start, repairs, budget)
        except _Syntax as e:
            scan.broken.append(Broken(start, e.pos, e.reason))
            i = e.pos if e.deep else start + 1
        else:
            scan.found.append(Found(value, start, end, repairs))
            i = start + 1 if value.cut and useful is not None and not useful(value) else end
        if budget[0] <= 0:
            scan.exhausted = True
            return scan
