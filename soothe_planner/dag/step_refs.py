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

Resolution lives here as well (``resolve_args``, ``resolve_references``): the executor splices
outputs into a tool's args with it, and the planner's guard (``planner/grounding.py``) reads what
a write was given with the same code, rather than a second resolver beside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from soothe_planner.models import StepResult

__all__ = ["REFERENCE_RE", "BadReferenceError", "Reference", "arg_strings", "canonical", "find_references", "free_step_id",
           "lookup_reference", "map_arg_strings", "parse_token", "references_in", "rename_references", "resolve_args",
           "resolve_references"]

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


# --------------------------------------------------------------------------- resolving references


class BadReferenceError(Exception):
    """A step's description refers to an output that does not exist (yet)."""


def find_references(text: str, known_ids: Sequence[str]) -> list[str]:
    """The step ids ``text`` refers to (known or not), in order of appearance."""
    known = dict.fromkeys(known_ids)
    return [parse_token(m.group(1), known)[0] for m in REFERENCE_RE.finditer(text)]


def _field(result: StepResult, field: str) -> str:
    source: object = result.outcome if field in result.outcome else None
    if source is None:
        try:
            parsed = json.loads(result.output)
        except (ValueError, TypeError):
            parsed = None
        if isinstance(parsed, dict) and field in parsed:
            source = parsed
    if not isinstance(source, Mapping):
        raise BadReferenceError(
            f"reference '{{{{{result.step_id}.result.{field}}}}}' names field {field!r}, which step "
            f"{result.step_id!r} did not produce (its result has no such key); refer to the whole output instead"
        )
    value = source[field]
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def lookup_reference(m: re.Match[str], completed: Mapping[str, StepResult]) -> tuple[Reference, str]:
    """``(the reference a REFERENCE_RE match names, the output or field it stands for)``; an exact
    id wins ("s1.output" could in principle be an id: ids may contain dots)."""
    step_id, field = parse_token(m.group(1), completed)
    result = completed.get(step_id)
    if result is None or not result.success:
        raise BadReferenceError(
            f"reference '{m.group(0)}' names step {step_id!r}, which has not completed; a step may "
            "only refer to the output of a completed step it depends on"
        )
    return Reference(m.group(0), step_id, field), _field(result, field) if field else result.output


def resolve_references(text: str, completed: Mapping[str, StepResult]) -> tuple[str, list[str]]:
    """Replace every reference in ``text``; return the new text and the step ids it used.

    ``completed`` maps step ids to results of steps that *completed*; a reference to anything
    else raises ``BadReferenceError`` naming the reference and the rule.
    """
    used: list[str] = []

    def sub(m: re.Match[str]) -> str:
        ref, value = lookup_reference(m, completed)
        used.append(ref.step_id)
        return value

    return REFERENCE_RE.sub(sub, text), used


def resolve_args(args: Mapping[str, Any], completed: Mapping[str, StepResult]) -> tuple[dict[str, Any], list[str]]:
    """A typed tool step's args with every reference in a string (at any depth) replaced by the output."""
    used: list[str] = []

    def resolve(text: str) -> str:
        resolved, ids = resolve_references(text, completed)
        used.extend(ids)
        return resolved

    return {k: map_arg_strings(v, resolve) for k, v in args.items()}, used


def free_step_id(taken: Collection[str]) -> str:
    """The first id of the ``s1``, ``s2``, ... series not in ``taken``: the id a step added by
    code (a parsed call with none, a prescribed reading or write) gets."""
    n = 1
    while f"s{n}" in taken:
        n += 1
    return f"s{n}"
