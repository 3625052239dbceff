"""The events table in the docs lists exactly the kinds and keys of the types in ``soothe_planner.events``."""

from __future__ import annotations

import re
import typing
from pathlib import Path

from soothe_planner import events
from soothe_planner.deliverable import Deliverable
from soothe_planner.models import StatusAssessment

TABLE = Path(__file__).resolve().parent.parent / "docs" / "reference" / "api" / "events.md"
TYPES = {typing.get_args(typing.get_type_hints(t)["event"])[0]: t for t in typing.get_args(events.Event)}


def _table() -> dict[str, tuple[set[str], set[str]]]:
    """``kind -> (every key, the optional keys)`` read from the table's rows."""
    rows: dict[str, tuple[set[str], set[str]]] = {}
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        match = re.fullmatch(r"\| `(\w+)` \| (.*) \|", line)
        if match:
            kind, keys = match.groups()
            rows[kind] = (set(re.findall(r"`(\w+)`", keys)), set(re.findall(r"\*`(\w+)`\*", keys)))
    return rows


def test_the_table_lists_every_kind_and_no_other() -> None:
    assert set(_table()) == set(TYPES) == set(events.EVENT_KINDS)


def test_the_table_lists_every_key_of_each_kind_and_no_other() -> None:
    table = _table()
    for kind, typed in TYPES.items():
        keys, optional = table[kind]
        assert keys == set(typed.__annotations__) - {"event"}, kind
        hints = typing.get_type_hints(typed, include_extras=True)
        assert optional == {k for k, v in hints.items() if typing.get_origin(v) is typing.NotRequired}, kind


def test_the_events_built_from_models_carry_every_field() -> None:
    # deliverable_event and assessment_event read their model field by field: a new field needs a key.
    assert set(events.DeliverableEvent.__annotations__) == {"event", "iteration", *Deliverable.model_fields}
    assert set(events.AssessmentEvent.__annotations__) == {"event", "iteration", *StatusAssessment.model_fields}
