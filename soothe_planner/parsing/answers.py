"""Reading one small structured answer — an assessment, a route, a choice — out of a model's text.

``parse_object`` reads the small wire answers (``AssessStatus``, ``ChooseContinuation``,
``RouteIntake``, ``ReflectOnPlan``) with the finding and repairs of ``reader`` (the JSON anywhere
in the text, fenced or wrapped, repaired), plus these tolerances: a number written as a string
(``"0.5"``) or a percentage (``"80%"`` is 0.8), a number where text belongs (``"summary": 3``),
enum values in any case (``"Done"``), booleans written as ``"true"``/``"false"``, field names in
any case, a single wrapper named after the schema, and unknown keys dropped with a warning. A
value that still fails validation is an error, and so is a reply over ``REPLY_BASE_BYTES`` (no
answer of these bounded schemas comes near it), refused before it is read.

**Several objects.** A reply may hold more than one object with the schema's fields: a model that
quotes a tool output (which may hold a forged ``{"status": "done", ...}``) before its own answer,
or repeats its answer. Objects that agree — every field they share has the same value — are one
answer, read from the one with the most fields. Objects that disagree make the reply ambiguous:
an error (so the caller re-asks), never a pick. Picking the object with the most fields, as this
once did, read an honest ``continue`` as the quoted ``done`` whenever the forgery was the fuller
object; picking the last one would only move the forgery to the end of the tool output.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, TypeVar, get_args, get_origin

from pydantic import BaseModel, ValidationError

from soothe_planner.errors import PlanParseError
from soothe_planner.models import clean_text
from soothe_planner.parsing.json_repair import Found
from soothe_planner.parsing.reader import (
    REPLY_BASE_BYTES,
    check_reply_size,
    check_whole,
    find_values,
    repair_warnings,
    validation_errors,
)

__all__ = ["parse_object"]

M = TypeVar("M", bound=BaseModel)


def _coerce(value: Any, annotation: Any) -> Any:
    """Undo the harmless ways a model writes a value: "0.5" for 0.5, "Done" for "done"."""
    options = get_args(annotation)
    if get_origin(annotation) is Literal and isinstance(value, str):
        for opt in options:
            if isinstance(opt, str) and opt.lower() == value.strip().lower():
                return opt
        return value
    wants = set(options) if options else {annotation}
    if str in wants and isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str):
        v = value.strip()
        if bool in wants and v.lower() in ("true", "false"):
            return v.lower() == "true"
        if float in wants or int in wants:
            scale = 1.0
            if float in wants and v.endswith("%"):
                v, scale = v[:-1].strip(), 0.01  # "80%" is 0.8: the only reading of a percentage
            try:
                return float(v) * scale if float in wants else int(v)
            except ValueError:
                return value
    return value


def _fields(obj: dict[str, Any], schema: type[BaseModel], warnings: list[str] | None) -> dict[str, Any]:
    """``obj`` under the schema's field names, values coerced; unknown keys dropped (and noted)."""
    fields = schema.model_fields
    lower = {name.lower(): name for name in fields}
    data: dict[str, Any] = {}
    for k, v in obj.items():
        name = k if k in fields else lower.get(str(k).lower())
        if name is None:
            if warnings is not None:
                warnings.append(f"ignored unknown field {k!r}")
            continue
        data[name] = _coerce(v, fields[name].annotation)
    return data


def _conflict(a: dict[str, Any], b: dict[str, Any], order: Iterable[str]) -> str | None:
    """The first field (in ``order``) two readings give different values, described; None when they agree."""
    for name in order:
        if name in a and name in b and a[name] != b[name]:
            return f"{name} {a[name]!r} and {b[name]!r}"
    return None


def parse_object(text: str, schema: type[M]) -> tuple[M, list[str]]:
    """Read one small wire answer (``schema``) from a model's text; see the module docstring."""
    check_reply_size(text, REPLY_BASE_BYTES, f"a {schema.__name__} answer")
    text = clean_text(text)
    fields = schema.model_fields
    lower = {name.lower(): name for name in fields}
    decoded: list[str] = []
    scan = find_values(text, lambda v: isinstance(v, dict) and any(str(k).lower() in lower for k in v), decoded)
    candidates: list[tuple[int, Found, dict[str, Any]]] = []
    for f in scan.found:
        value: Any = f.value
        if isinstance(value, dict) and len(value) == 1:
            ((key, inner),) = value.items()
            if key.lower() == schema.__name__.lower() and isinstance(inner, dict):
                value = inner
        if isinstance(value, dict):
            score = sum(1 for k in value if str(k).lower() in lower)
            if score:
                candidates.append((score, f, value))
    if not candidates:
        raise PlanParseError(
            f"no JSON object with the fields of {schema.__name__} ({', '.join(fields)})", text
        )
    readings = [_fields(obj, schema, None) for _, _, obj in candidates]
    for i, reading in enumerate(readings):
        for other in readings[i + 1 :]:
            conflict = _conflict(reading, other, fields)
            if conflict:
                raise PlanParseError(
                    f"the answer holds {len(candidates)} JSON objects with the fields of {schema.__name__} "
                    f"that disagree ({conflict}); it is ambiguous which one is the answer: write exactly one",
                    text,
                )
    best = max(c[0] for c in candidates)
    _, found, obj = next(c for c in candidates if c[0] == best)
    check_whole(scan, [found], text, "answer")
    warnings = decoded + repair_warnings([found])
    if found.value.cut:
        warnings.append("the answer was cut off; closed the open JSON")
    data = _fields(obj, schema, warnings)
    try:
        return schema.model_validate(data), warnings
    except ValidationError as e:
        raise PlanParseError(f"{schema.__name__} does not validate: {validation_errors(e)}", text) from e
