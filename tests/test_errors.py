"""One error root; every family carries its payload and names the value and the rule."""

from __future__ import annotations

import copy
import inspect
import pickle
import typing
from typing import Any

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


# -- every error crosses a process boundary intact ---------------------------------------------------


def _error_classes() -> list[type[BaseException]]:
    """Every exception class defined in ``errors.py``, and every ``PlannerError`` subclass loaded."""
    found = {
        obj for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, BaseException) and obj.__module__ == errors.__name__
    }
    stack = [PlannerError]
    while stack:
        cls = stack.pop()
        found.add(cls)
        stack.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: c.__qualname__)


_SAMPLES: dict[Any, Any] = {
    str: "s3 depends on s9",
    int: 7,
    float: 0.5,
    bool: True,
    list[str]: ["step 's3' depends on unknown step 's9'", "cycle: s1 -> s2 -> s1"],
    list[GenerationAttempt]: [
        GenerationAttempt(phase="plan-generate", kind="structured", error="bad json", raw_text="{",
                          error_type="parse"),
        GenerationAttempt(phase="plan-generate", kind="reask", error="still bad", raw_text="}"),
    ],
}


def _sample_instance(cls: type[BaseException]) -> BaseException:
    """An instance built from the constructor's annotations, so a new class needs no entry here."""
    if cls.__init__ is BaseException.__init__:  # the message is the only argument
        return cls(f"{cls.__name__}: something went wrong (the way out)")
    hints = typing.get_type_hints(cls.__init__)
    params = [p for p in inspect.signature(cls.__init__).parameters.values()
              if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in params:
        hint = hints.get(p.name, str)
        assert hint in _SAMPLES, f"add a sample value for {hint!r} (parameter {p.name!r} of {cls.__name__})"
        value = _SAMPLES[hint]
        if p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = value
        else:
            args.append(value)
    return cls(*args, **kwargs)


def test_the_error_classes_are_discovered() -> None:
    names = {c.__name__ for c in _error_classes()}
    assert {"PlannerError", "PlanParseError", "PlanGenerationError", "LLMBudgetExceeded"} <= names


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_survives_a_pickle_round_trip_with_its_payload(cls: type[BaseException]) -> None:
    err = _sample_instance(cls)
    err.add_note("raised while planning goal g1")

    for back in (pickle.loads(pickle.dumps(err)), copy.copy(err)):
        assert type(back) is cls
        assert str(back) == str(err) and back.args == err.args
        assert back.__dict__ == err.__dict__  # .errors, .text, .attempts, .limit, ..., notes
        assert back.__dict__ is not err.__dict__


def test_a_pickled_generation_error_keeps_each_attempt() -> None:
    err = _sample_instance(PlanGenerationError)
    assert isinstance(err, PlanGenerationError)
    back = pickle.loads(pickle.dumps(err))
    assert back.phase == err.phase and back.attempts == err.attempts
    assert back.attempts[0].raw_text == "{"
