"""Could the loop use the reply a server gave in ``bench local``, or was it only fast?

Timing a reply says nothing of whether it was worth waiting for: an earlier run timed a
llama-server "plan" of 52 tokens that was one ``search_text`` step with empty arguments, which
the planner refuses. So every measured reply is also judged, the way the loop would take it, on
the benchmark's own goal and workspace (``local_calls.py``):

- **intake** — reads as a ``RouteIntake`` (the planner's lenient reader for small answers).
- **generate** — the planner's own reader and validator accept it with the compact profile's
  rules and the built-in tools' schemas, without a re-ask; and the plan writes the report the
  goal names (a plan that never writes it does not do the goal).
- **step** — the reply holds every TODO item of the search output it was given (the step's task
  is to summarise them by file; an item the reply leaves out is lost to the report).
- **assess** — reads as an ``AssessStatus`` whose status is ``done``: the recorded run's plan ran
  to its end and wrote the report, so "done" is the right answer and anything else costs the loop
  another iteration.
- **synthesis** — a reply that is not empty.

``judge`` returns ``""`` for a usable reply, else the reason, which the results keep.

This judge serves the one canned goal. Real runs replayed (``--replay``) are judged by what the
recorded run needed instead (``local_expect.py``): there an assessment's right status may be
``continue`` or ``replan``.
"""

from __future__ import annotations

import re
import tempfile
from functools import lru_cache
from typing import Any

from bench.local_calls import is_calls_plan_request, report_named, text_of

__all__ = ["judge"]

_TODO_ITEM = re.compile(r"^\S+:\d+:.*?\bTODO\b:?\s*(.+)")  # a search hit: path:line: ... TODO item


@lru_cache(maxsize=1)
def _capabilities() -> tuple[Any, ...]:
    """The built-in tools as the loop offers them to the planner (the executor's own capabilities)."""
    from soothe_planner.execution import StepExecutor
    from soothe_planner.tools import make_builtin_tools

    with tempfile.TemporaryDirectory(prefix="bench-judge-") as tmp:
        return tuple(StepExecutor(tools=list(make_builtin_tools(tmp).values())).capabilities())


def _step_cap(body: dict[str, Any]) -> int:
    """The most steps the request's plan schema (or plan grammar) allows, as the planner set it."""
    text = str((body or {}).get("grammar", ""))
    grammar = re.search(r"^root ::= .*?step\{1,(\d+)\}", text, re.M)
    if grammar:
        return int(grammar.group(1))
    owed = re.search(r"^root ::= .*?step\{0,(\d+)\} last ", text, re.M)  # held to end with a write
    if owed:
        return int(owed.group(1)) + 1
    tools = body.get("tools") or []
    fmt = body.get("response_format") or {}
    schema = tools[0]["function"].get("parameters") if tools else (fmt.get("json_schema") or {}).get("schema")
    cap = ((schema or {}).get("properties") or {}).get("steps", {}).get("maxItems")
    if not isinstance(cap, int):
        raise ValueError("a generate request whose plan schema has no steps.maxItems: local_calls.py's scenario changed")
    return cap


def _plan_problem(body: dict[str, Any], text: str) -> str:
    from soothe_planner.deliverable import Deliverable
    from soothe_planner.errors import PlannerError
    from soothe_planner.models import PlanContext
    from soothe_planner.planner.generation import calls_reader, decision_validator, readers

    named = report_named(body.get("messages") or [])
    if named is None:
        raise ValueError("a generate request without the benchmark's goal: local_calls.py's scenario changed")
    goal, report = named
    context = PlanContext(available_capabilities=list(_capabilities()))
    max_steps = _step_cap(body)
    parse = calls_reader(context, max_steps, None) if is_calls_plan_request(body) else readers(context, max_steps, None)[1]
    try:
        generated = parse(text)
    except (PlannerError, ValueError) as exc:
        return f"the planner cannot read it: {exc}"[:300]
    deliverable = Deliverable(kind="file", files=[report])
    validate = decision_validator(goal, context, None, deliverable, small_model=True, allow_keep=False,
                                  replace=False, max_steps=max_steps)
    problems = validate(generated)
    if problems:
        return "the planner refuses it: " + "; ".join(problems)[:300]
    assert generated.decision is not None  # validate refuses a decision without steps
    if not any(s.tool == "write_file" and str((s.args or {}).get("path", "")).strip("./") == report
               for s in generated.decision.steps):
        return f"no step writes {report}, the report the goal names"
    return ""


def _step_problem(body: dict[str, Any], text: str) -> str:
    given = text_of(body.get("messages") or [], "user")
    items = {m[1].strip() for line in given.splitlines() if (m := _TODO_ITEM.search(line))}
    if not items:
        raise ValueError("a step request without TODO lines: local_calls.py's scenario changed")
    missing = sorted(i for i in items if i.casefold() not in text.casefold())
    return f"{len(missing)} of {len(items)} TODO items missing, e.g. {missing[0]!r}" if missing else ""


def _object_problem(text: str, kind: str) -> str:
    from pydantic import ValidationError

    from soothe_planner.errors import PlannerError
    from soothe_planner.parsing.answers import parse_object
    from soothe_planner.wire import AssessStatus, RouteIntake

    schema = AssessStatus if kind == "assess" else RouteIntake
    try:
        value, _ = parse_object(text, schema)
    except (PlannerError, ValidationError, ValueError) as exc:
        return f"not a {schema.__name__}: {exc}"[:300]
    if isinstance(value, AssessStatus) and value.status != "done":
        return f"status {value.status!r} after the plan ran to its end and wrote the report (the answer is 'done')"
    return ""


def _reading_problem(body: dict[str, Any], text: str) -> str:
    """A second reading is usable when it copies at least one TODO item its request's outputs hold."""
    from pydantic import ValidationError

    from soothe_planner.errors import PlannerError
    from soothe_planner.parsing.answers import parse_object
    from soothe_planner.wire import CrossCheck

    try:
        value, _ = parse_object(text, CrossCheck)
    except (PlannerError, ValidationError, ValueError) as exc:
        return f"not a CrossCheck: {exc}"[:300]
    given = text_of(body.get("messages") or [], "user").casefold()
    copied = [v for v in value.values if v.strip() and v.strip().casefold() in given and "todo" in v.casefold()]
    return "" if copied else f"no TODO item of the outputs copied: {value.values!r}"[:300]


def judge(kind: str, body: dict[str, Any], text: str) -> str:
    """``""`` if the loop could use ``text`` as the reply to ``body`` (a call of ``kind``), else why not."""
    if kind == "generate":
        return _plan_problem(body, text)
    if kind == "step":
        return _step_problem(body, text)
    if kind in ("assess", "intake"):
        return _object_problem(text, kind)
    if kind == "synthesis":
        return "" if text.strip() else "an empty reply"
    if kind == "crosscheck":
        return _reading_problem(body, text)
    raise ValueError(f"judge: unknown call kind {kind!r}")
