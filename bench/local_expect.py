"""What does each recorded call need of a reply, and does a replayed reply give it?

A recording (``local_record.py``) keeps a real run of each goal; after the run, every call gets an
``expect`` derived from what the run needed, and the replay judges each new reply against it
(``judge``: ``""`` usable, else why not):

- **assess** — the status the recorded step of the run should have had. The rule: in a run the
  goal's suite checks call a *success*, the last assessment asked is ``done`` (its evidence is the
  evidence the run ended on, and the checks say it was enough) and every earlier one is
  ``continue`` or ``replan`` (the run went on, so the goal was not yet done: either answer keeps
  the loop going, which one is not decided from outside). In a run that did not succeed — a
  failure, a false success, or an ``expect`` goal rightly ended ``failed`` — no assessment is
  ``done``: the checks say the evidence never proved the goal. A reply must read as an
  ``AssessStatus`` with one of the expected statuses, so a model that always says ``done`` fails
  every ``continue``/``replan`` case. The rule cannot tell an earlier assessment that could already
  have said ``done`` (the evidence was there, the model did not see it): such a case counts as
  not done, as the run treated it.
- **step** (a model step) — the whole task: every *item* it was given must be in the reply. The
  items are the strings the goal's checks require (``answer_contains``, a ``file`` check's
  ``contains``) that occur in what the step was given; a step given none needs a reply that is not
  empty. A step given more than its task asked for is still asked for every needed item it holds.
- **synthesis** (the final answer) — as a step, and none of the goal's ``answer_not_contains``.
- **generate** (a plan) — the planner's own reader and validator accept it, built with the state
  the recorded call had (the plan so far, the deliverable, the step cap, the flags), captured
  from the planner as it built its check (a plan asked where no check was built: not empty).
- **crosscheck** — reads as a ``CrossCheck`` and copies at least one value its outputs hold.
- **deliverable**, **intake** — read as their schema (``DeclareDeliverable``, ``RouteIntake``).
"""

from __future__ import annotations

from typing import Any

from bench.local_calls import is_calls_plan_request, text_of

__all__ = ["expectations", "judge", "required_items"]

NOT_DONE = ["continue", "replan"]


def required_items(goal: dict[str, Any]) -> list[str]:
    """The strings the goal's checks require to appear (in the answer or a file)."""
    return list(dict.fromkeys(s for c in goal["checks"] if c["kind"] in ("answer_contains", "file") for s in c["strings"]))


def _forbidden(goal: dict[str, Any]) -> list[str]:
    return [s for c in goal["checks"] if c["kind"] == "answer_not_contains" for s in c["strings"]]


def _given(body: dict[str, Any]) -> str:
    return text_of(body.get("messages") or [], "user")


def expectations(goal: dict[str, Any]) -> None:
    """Give every call of a recorded goal its ``expect`` (see the module docstring), in place."""
    calls = goal["calls"]
    assessments = [c for c in calls if c["kind"] == "assess"]
    succeeded = goal["outcome"] == "success" and goal["status"] == "done"
    items = required_items(goal)
    for call in calls:
        kind = call["kind"]
        if kind == "assess":
            last = call is assessments[-1]
            if succeeded and last:
                call["expect"] = {"status": ["done"], "why": "the last assessment of a run the checks call a success"}
            elif succeeded:
                call["expect"] = {"status": NOT_DONE, "why": "the run went on after it and then succeeded"}
            else:
                call["expect"] = {"status": NOT_DONE, "why": f"the run ended {goal['status']} "
                                                             f"({goal['outcome']}): the evidence never proved the goal"}
        elif kind in ("step", "synthesis"):
            given = _given(call["body"]).casefold()
            call["expect"] = {"items": [s for s in items if s.casefold() in given],
                              "forbidden": _forbidden(goal) if kind == "synthesis" else []}
        else:
            call["expect"] = {}


# --------------------------------------------------------------------------- judging a replayed reply


def _parsed(text: str, schema: Any) -> tuple[Any, str]:
    from pydantic import ValidationError

    from soothe_planner.errors import PlannerError
    from soothe_planner.parsing.answers import parse_object

    try:
        value, _ = parse_object(text, schema)
    except (PlannerError, ValidationError, ValueError) as exc:
        return None, f"not a {schema.__name__}: {exc}"[:300]
    return value, ""


def _assess_problem(call: dict[str, Any], text: str) -> str:
    from soothe_planner.wire import AssessStatus

    value, problem = _parsed(text, AssessStatus)
    if problem:
        return problem
    wanted = call["expect"]["status"]
    if value.status not in wanted:
        return f"status {value.status!r} where the run needed {' or '.join(map(repr, wanted))} ({call['expect']['why']})"
    return ""


def _items_problem(call: dict[str, Any], text: str) -> str:
    if not text.strip():
        return "an empty reply"
    folded = text.casefold()
    items = call["expect"].get("items") or []
    missing = [s for s in items if s.casefold() not in folded]
    if missing:
        return f"{len(missing)} of {len(items)} items it was given missing, e.g. {missing[0]!r}"
    present = [s for s in call["expect"].get("forbidden") or [] if s.casefold() in folded]
    return f"says what the goal forbids: {present[0]!r}" if present else ""


def _plan_problem(call: dict[str, Any], text: str) -> str:
    from soothe_planner.dag import PlanManager
    from soothe_planner.deliverable import Deliverable
    from soothe_planner.errors import PlannerError
    from soothe_planner.models import PlanContext
    from soothe_planner.planner.generation import calls_reader, decision_validator, readers

    seen = call.get("validator")
    if seen is None:  # a plan asked by a path that builds no check of its own: only an empty reply is refused
        return "" if text.strip() else "an empty reply"
    context = PlanContext.model_validate(seen["context"])
    pm = PlanManager.from_dict(seen["plan"]) if seen["plan"] is not None else None
    deliverable = Deliverable.model_validate(seen["deliverable"]) if seen["deliverable"] is not None else None
    flags = {k: seen[k] for k in ("small_model", "allow_keep", "replace", "max_steps", "greedy") if k in seen}
    max_steps = int(flags["max_steps"])
    parse = calls_reader(context, max_steps, pm) if is_calls_plan_request(call["body"]) else readers(context, max_steps, pm)[1]
    try:
        generated = parse(text)
    except (PlannerError, ValueError) as exc:
        return f"the planner cannot read it: {exc}"[:300]
    problems = decision_validator(seen["goal"], context, pm, deliverable, **flags)(generated)
    return "the planner refuses it: " + "; ".join(problems)[:300] if problems else ""


def _reading_problem(call: dict[str, Any], text: str) -> str:
    from soothe_planner.wire import CrossCheck

    value, problem = _parsed(text, CrossCheck)
    if problem:
        return problem
    given = _given(call["body"]).casefold()
    copied = [v for v in value.values if v.strip() and v.strip().casefold() in given]
    return "" if copied else f"no value of the outputs copied: {value.values!r}"[:300]


def judge(call: dict[str, Any], text: str) -> str:
    """``""`` if a replayed ``text`` gives what the recorded ``call`` needed, else why not."""
    from soothe_planner.wire import DeclareDeliverable, RouteIntake

    kind = call["kind"]
    if kind == "assess":
        return _assess_problem(call, text)
    if kind in ("step", "synthesis"):
        return _items_problem(call, text)
    if kind == "generate":
        return _plan_problem(call, text)
    if kind == "crosscheck":
        return _reading_problem(call, text)
    if kind in ("deliverable", "intake"):
        return _parsed(text, DeclareDeliverable if kind == "deliverable" else RouteIntake)[1]
    return "" if text.strip() else "an empty reply"
