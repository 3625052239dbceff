"""Limits that hold whatever happens: oversize replies, the call budget across a resume, one count, one limiter.

- A reply far over what ``max_plan_steps`` allows is refused before the lenient reader reads any
  of it; an honest plan at the cap is still read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from planner_support import CTX, FAST, GOAL, planner, state

import soothe_planner.parsing.reader as reader
from soothe_planner.errors import PlanGenerationError, PlanParseError
from soothe_planner.models import StatusAssessment
from soothe_planner.parsing import parse_decision, parse_object
from soothe_planner.wire import AssessStatus

# --------------------------------------------------------------------------- 25: oversize replies


def _plan_text(steps: int, content: str = "") -> str:
    return json.dumps({"plan_action": "new", "steps": [
        {"id": f"s{i}", "description": f"step {i}", "tool": "write_file" if content else None,
         "args": {"path": f"f{i}.txt", "content": content} if content else {}, "depends_on": []}
        for i in range(steps)
    ]})


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text the lenient reader scanned."""
    lengths: list[int] = []
    real = reader.scan_values

    def spy(text: str, *args: Any, **kwargs: Any) -> Any:
        lengths.append(len(text))
        return real(text, *args, **kwargs)

    monkeypatch.setattr(reader, "scan_values", spy)
    return lengths


async def test_a_100k_step_reply_is_refused_before_the_reader_reads_it(scanned: list[int]) -> None:
    huge = _plan_text(100_000)
    assert len(huge) > 8_000_000
    settings = FAST.model_copy(update={"retries": 1})
    p, model = planner(huge, huge, huge, settings=settings)
    with pytest.raises(PlanGenerationError) as info:
        await p.generate_from_assessment(GOAL, state(1), CTX, StatusAssessment(status="continue"))
    cap = reader.reply_byte_cap(settings.max_plan_steps)
    assert cap == 32 * 1024 + 8 * 8 * 1024
    assert scanned == []  # not one byte of it went through the lenient reader
    refused = [a for a in info.value.attempts if "over the cap" in a.error]
    assert len(refused) == 3 and f"over the cap of {cap} bytes" in refused[0].error
    assert len(model.calls) == 3


def test_an_honest_plan_at_the_cap_is_still_read(scanned: list[int]) -> None:
    content = "x" * 6000  # a file's content written literally into each of 8 steps
    text = _plan_text(8, content)
    assert len(text) < reader.reply_byte_cap(8)
    decision = parse_decision(text, max_steps=8).decision
    assert decision is not None and len(decision.steps) == 8
    with pytest.raises(PlanParseError, match="over the cap"):
        parse_decision(_plan_text(8, "x" * 14_000), max_steps=8)


def test_a_small_answer_has_its_own_cap() -> None:
    padded = json.dumps({"status": "continue", "summary": "ok"}) + " " * (64 * 1024)
    with pytest.raises(PlanParseError, match="over the cap of 32768 bytes for a AssessStatus answer"):
        parse_object(padded, AssessStatus)
    assert parse_object(padded[:1000], AssessStatus)[0].status == "continue"
