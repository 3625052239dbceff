"""One error root; every family carries its payload and names the value and the rule."""

from __future__ import annotations

import pytest

from soothe_planner import errors
from soothe_planner.errors import (
    GenerationAttempt,
    LLMBudgetExceeded,
    ModelIntegrityError,
    PlanGenerationError,
    PlannerError,
    PlanParseError,
    PlanValidationError,
)


@pytest.mark.parametrize("name", errors.__all__)
def test_every_exported_error_descends_from_planner_error(name: str) -> None:
    obj = getattr(errors, name)
    if name == "GenerationAttempt":
        return
    assert issubclass(obj, PlannerError)


def test_validation_error_carries_each_message() -> None:
    err = PlanValidationError(["step 's3' depends on unknown step 's9'", "cycle: s1 -> s2 -> s1"])
    assert err.errors[1] == "cycle: s1 -> s2 -> s1"
    assert "s9" in str(err) and "cycle" in str(err)


def test_validation_error_message_is_bounded_but_errors_are_not() -> None:
    err = PlanValidationError([f"e{i}" for i in range(25)])
    assert len(err.errors) == 25
    assert "(and 15 more)" in str(err)


def test_parse_error_keeps_the_raw_text_whole() -> None:
    text = "garbage " * 100
    err = PlanParseError("no JSON object found", text)
    assert err.text == text
    assert len(str(err)) < 400


def test_generation_error_lists_every_attempt() -> None:
    attempts = [
        GenerationAttempt(phase="plan-generate", kind="structured", error="bad json", raw_text="{"),
        GenerationAttempt(phase="plan-generate", kind="reask", error="still bad", raw_text="}"),
    ]
    err = PlanGenerationError("plan-generate", attempts)
    assert err.attempts == attempts
    assert "1. [structured] bad json" in str(err) and "2. [reask] still bad" in str(err)


def test_budget_and_integrity_errors_name_their_numbers() -> None:
    assert "3 of 3" in str(LLMBudgetExceeded(limit=3, used=3))
    msg = str(ModelIntegrityError("m.gguf", expected="aa", actual="bb"))
    assert "aa" in msg and "bb" in msg
