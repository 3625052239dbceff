"""Properties of the lenient parser over random plans, random renderings and random damage."""

from __future__ import annotations

import json
from itertools import pairwise
from typing import Any

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from soothe_planner.errors import PlanParseError
from soothe_planner.parsing import parse_decision

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ID = st.from_regex(r"[A-Za-z0-9_.-]{1,12}", fullmatch=True)
DESCRIPTION = st.text(min_size=1, max_size=40).filter(lambda s: s.strip() != "")
TOOL = st.sampled_from(["search", "read_file", "python", "http_get"])


@st.composite
def dags(draw: st.DrawFn, min_steps: int = 1) -> list[dict[str, Any]]:
    """A valid plan: unique ids, each step depending only on earlier ones."""
    ids = draw(st.lists(ID, min_size=min_steps, max_size=8, unique=True))
    steps = []
    for i, sid in enumerate(ids):
        deps = draw(st.lists(st.sampled_from(ids[:i]), unique=True, max_size=3)) if i else []
        steps.append(
            {
                "id": sid,
                "description": draw(DESCRIPTION),
                "depends_on": deps,
                "tools": draw(st.lists(TOOL, unique=True, max_size=2)),
                "subagent": draw(st.sampled_from([None, "writer"])),
            }
        )
    return steps


def _alias(step: dict[str, Any], draw: st.DrawFn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    sid = step["id"]
    out[draw(st.sampled_from(["id", "step_id", "stepId"]))] = (
        int(sid) if sid.isdigit() and str(int(sid)) == sid else sid
    )
    out[draw(st.sampled_from(["description", "task", "action", "desc", "instruction"]))] = step["description"]
    dep_key = draw(st.sampled_from(["depends_on", "dependencies", "deps", "depends", "dependsOn"]))
    deps = step["depends_on"]
    out[dep_key] = (
        draw(st.sampled_from([deps, ", ".join(deps)])) if deps else draw(st.sampled_from([[], None]))
    )
    if len(step["tools"]) == 1 and draw(st.booleans()):
        out["tools"] = step["tools"][0]  # a name where a list belongs ("tool" names a typed step's tool)
    else:
        out["tools"] = step["tools"]
    if step["subagent"]:
        out[draw(st.sampled_from(["subagent", "agent"]))] = step["subagent"]
    return out


def _lax(value: Any, trailing: bool, python: bool) -> str:
    if isinstance(value, dict):
        items = [f"{json.dumps(k)}: {_lax(v, trailing, python)}" for k, v in value.items()]
        return "{" + ", ".join(items) + ("," if trailing and items else "") + "}"
    if isinstance(value, list):
        items = [_lax(v, trailing, python) for v in value]
        return "[" + ", ".join(items) + ("," if trailing and items else "") + "]"
    if python and (value is None or isinstance(value, bool)):
        return repr(value)
    return json.dumps(value)


@st.composite
def renderings(draw: st.DrawFn, steps: list[dict[str, Any]], *, wraps: tuple[str, ...] | None = None) -> str:
    raw = [_alias(s, draw) if draw(st.booleans()) else dict(s) for s in steps]
    trailing, python = draw(st.booleans()), draw(st.booleans())
    shape = draw(st.sampled_from(["wire", "runtime", "array", "lines", "commas", "wrapper", "tasks"]))
    if shape == "wire":
        body = _lax({"plan_action": "new", "next_action": None, "steps": raw}, trailing, python)
    elif shape == "runtime":
        body = _lax({"type": "execute_steps", "steps": raw, "execution_mode": "dependency"}, trailing, python)
    elif shape == "array":
        body = _lax(raw, trailing, python)
    elif shape == "lines":
        body = "\n".join(_lax(s, trailing, python) for s in raw)
    elif shape == "commas":
        body = ",\n".join(_lax(s, trailing, python) for s in raw)
    elif shape == "wrapper":
        body = _lax({"plan": {"steps": raw}}, trailing, python)
    else:
        body = _lax({"tasks": raw}, trailing, python)
    wrap = draw(st.sampled_from(wraps or ("raw", "fence", "prose", "think")))
    if wrap == "fence":
        return f"```json\n{body}\n```"
    if wrap == "prose":
        return f"Here is my plan.\n\n{body}\n\nIt should work."
    if wrap == "think":
        return f'<think>maybe {{"steps": [{{"id": "zz", "task": "draft"}}]}}</think>\n{body}'
    return body


def _ids_and_deps(steps: list[dict[str, Any]]) -> list[tuple[str, list[str]]]:
    return [(s["id"], s["depends_on"]) for s in steps]


@SETTINGS
@given(st.data())
def test_a_valid_plan_in_any_rendering_reads_back_to_the_same_ids_and_dependencies(
    data: st.DataObject,
) -> None:
    steps = data.draw(dags())
    text = data.draw(renderings(steps))
    result = parse_decision(text, max_steps=len(steps))
    assert result.plan_action == "new" and result.decision is not None
    got = [(s.id, s.depends_on) for s in result.decision.steps]
    assert got == _ids_and_deps(steps)
    assert [s.tools for s in result.decision.steps] == [s["tools"] for s in steps]


@SETTINGS
@given(st.data())
def test_one_step_over_the_cap_always_fails(data: st.DataObject) -> None:
    steps = data.draw(dags(min_steps=2))
    text = data.draw(renderings(steps))
    try:
        parse_decision(text, max_steps=len(steps) - 1)
    except PlanParseError as e:
        assert f"plan has {len(steps)} steps" in e.reason
    else:
        raise AssertionError("a plan over the cap was accepted")


@SETTINGS
@given(st.data())
def test_an_injected_cycle_always_raises_and_the_named_cycle_is_real(data: st.DataObject) -> None:
    steps = data.draw(dags(min_steps=2))
    # Pick steps in plan order, chain each to the previous, and close the loop from the first.
    members = sorted(data.draw(st.lists(st.integers(0, len(steps) - 1), min_size=2, max_size=4, unique=True)))
    for a, b in pairwise(members):
        if steps[a]["id"] not in steps[b]["depends_on"]:
            steps[b]["depends_on"].append(steps[a]["id"])
    steps[members[0]]["depends_on"].append(steps[members[-1]]["id"])
    text = data.draw(renderings(steps))
    try:
        parse_decision(text)
    except PlanParseError as e:
        assert e.reason.startswith("cycle: ")
        named = e.reason.removeprefix("cycle: ").split(" (")[0].split(" -> ")
        deps = {s["id"]: s["depends_on"] for s in steps}
        assert named[0] == named[-1] and len(named) >= 3
        for x, y in pairwise(named):
            assert y in deps[x], f"{x} does not depend on {y}"
    else:
        raise AssertionError("a cyclic plan was accepted")


@SETTINGS
@given(st.data())
def test_cutting_a_plan_anywhere_gives_a_prefix_of_its_steps_or_a_parse_error(data: st.DataObject) -> None:
    steps = data.draw(dags())
    text = data.draw(renderings(steps, wraps=("raw", "fence", "prose")))
    cut = data.draw(st.integers(0, len(text)))
    try:
        result = parse_decision(text[:cut])
    except PlanParseError:
        return
    assert result.decision is not None
    got = [(s.id, s.depends_on) for s in result.decision.steps]
    assert got == _ids_and_deps(steps)[: len(got)]


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("{}[]\":,'\\/*tfn0.1- \nab\u201c\u201d")), max_size=300))
def test_arbitrary_json_like_text_either_parses_or_raises_a_parse_error(text: str) -> None:
    try:
        parse_decision(text)
    except PlanParseError as e:
        assert e.text == text
    assume(True)


PROSE = st.sampled_from(
    [
        "Here's the plan.",
        "It's short [see note 1].",
        "Use the {placeholder} syntax.",
        "Steps (e.g. [a], [b]) follow:",
        "I don't think we need more than this.",
        "**Plan:**",
        "`code` and “quotes” [“like this”].",
        "- [ ] todo\n- [x] done",
        "See https://example.com/a?b=[c]",
        "Done: {}",
    ]
)


@SETTINGS
@given(st.data())
def test_realistic_prose_around_a_plan_does_not_change_what_is_read(data: st.DataObject) -> None:
    steps = data.draw(dags())
    body = data.draw(renderings(steps, wraps=("raw", "fence")))
    before = " ".join(data.draw(st.lists(PROSE, max_size=3)))
    after = " ".join(data.draw(st.lists(PROSE, max_size=3)))
    result = parse_decision(f"{before}\n{body}\n{after}")
    assert result.decision is not None
    assert [(s.id, s.depends_on) for s in result.decision.steps] == _ids_and_deps(steps)
