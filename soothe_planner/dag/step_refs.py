"""Which earlier steps does a typed tool step's arguments refer to, and in what words?

An argument may carry an earlier step's output as ``{{s1.output}}`` (the one canonical form; a
field of a structured result is ``{{s1.output.url}}``). The executor resolves references just
before the tool runs (``execution/references.py``); this module reads them at ingest, so that a
reference to a step that does not exist, or that the step does not wait for, is refused before
anything runs. It reads every ``{{token}}`` the executor would resolve — the executor also takes
``{{s1}}``, ``{{s1.result}}`` and a ``step_`` prefix, so a plan written to the typed API in those
words is judged the same — and it lives here, below the executor, because validation may not
import it (``tests/test_layers.py``).

Only arguments are read: a description's references are resolved by the executor too, but a
description is prose for a model, where a brace pair is as often an example as a reference.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["REFERENCE_RE", "Reference", "arg_strings", "canonical", "map_arg_strings", "parse_token", "references_in",
           "rename_references"]

REFERENCE_RE = re.compile(r"\{\{\s*([A-Za-z0-9_][A-Za-z0-9_.-]*)\s*\}\}")
"""Every ``{{token}}`` the executor treats as a reference (the same pattern it resolves)."""
_SUFFIX_RE = re.compile(r"^(?P<id>.+?)\.(?:output|result)(?:\.(?P<field>[A-Za-z0-9_]+))?$")


@dataclass(frozen=True)
class Reference:
    """One reference: as written, the step it names, and the field of that step's result, if any."""

    text: str
    step_id: str
    field: str | None


def _candidates(step_id: str) -> list[str]:
    return [step_id, step_id[5:]] if step_id.startswith("step_") and len(step_id) > 5 else [step_id]


def parse_token(token: str, known: Collection[str]) -> tuple[str, str | None]:
    """``(step id, field)`` a token names, read as the executor reads it (an exact known id wins)."""
    for cand in _candidates(token):
        if cand in known:
            return cand, None
    m = _SUFFIX_RE.match(token)
    base, field = (m.group("id"), m.group("field")) if m else (token, None)
    for cand in _candidates(base):
        if cand in known:
            return cand, field
    return base, field


def canonical(step_id: str, field: str | None = None) -> str:
    """The one way this package writes a reference: ``{{s1.output}}`` or ``{{s1.output.url}}``."""
    return "{{" + step_id + ".output" + (f".{field}" if field else "") + "}}"


def references_in(text: str, known: Collection[str]) -> list[Reference]:
    """The references in ``text``, in order; ``known`` ids decide how an ambiguous token is read."""
    out = []
    for m in REFERENCE_RE.finditer(text):
        step_id, field = parse_token(m.group(1), known)
        out.append(Reference(m.group(0), step_id, field))
    return out


def arg_strings(args: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, str]]:
    """Every string inside ``args`` (nested lists and objects too), with its path: ``content``, ``files[0]``."""
    stack: list[tuple[str, Any]] = [(f"{path}{k}", v) for k, v in reversed(list(args.items()))]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str):
            yield where, value
        elif isinstance(value, Mapping):
            stack.extend((f"{where}.{k}", v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list | tuple):
            stack.extend((f"{where}[{i}]", v) for i, v in reversed(list(enumerate(value))))


def map_arg_strings(value: Any, change: Callable[[str], str]) -> Any:
    """``value`` with every string inside it passed through ``change`` (a copy; the input is not touched)."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, Mapping):
        return {k: map_arg_strings(v, change) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [map_arg_strings(v, change) for v in value]
    return value


def rename_references(args: dict[str, Any], renamed: Mapping[str, str], batch: Collection[str]) -> dict[str, Any]:
    """``args`` with references to ``renamed`` ids following the rename (``batch``: the ids as given)."""
    if not args or not renamed:
        return args

    def follow(text: str) -> str:
        if "{{" not in text:
            return text

        def sub(m: re.Match[str]) -> str:
            step_id, field = parse_token(m.group(1), batch)
            return canonical(renamed[step_id], field) if step_id in renamed else m.group(0)

        return REFERENCE_RE.sub(sub, text)

    changed: dict[str, Any] = map_arg_strings(args, follow)
    return changed
