"""The lenient parser: every corpus case reads as its construction says, and the rules hold."""

from __future__ import annotations

import importlib.util
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from soothe_planner.errors import PlanParseError
from soothe_planner.parsing import ParsedDecision, parse_decision, parse_object
from soothe_planner.wire import AssessStatus, ChooseContinuation, ReflectOnPlan, RouteIntake

CORPUS = Path(__file__).parent / "data" / "parser_corpus"


def _load_corpus() -> list[dict[str, Any]]:
    cases = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                cases.append(json.loads(line))
    return cases


CASES = _load_corpus()


def _shape(result: ParsedDecision) -> list[dict[str, Any]]:
    if result.decision is None:
        return []
    return [
        {"id": s.id, "depends_on": s.depends_on, "tools": s.tools, "subagent": s.subagent, "tool": s.tool,
         "args": s.args}
        for s in result.decision.steps
    ]


def _expected(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A case names ``tool`` and ``args`` only when the step has them."""
    return [{"tool": None, "args": {}, **s} for s in steps]


# --------------------------------------------------------------------------- the corpus


def test_corpus_has_at_least_300_cases_in_every_category() -> None:
    assert len(CASES) >= 300
    by_category = Counter(c["category"] for c in CASES)
    assert set(by_category) >= {
        "shapes",
        "repairs",
        "aliases",
        "truncated",
        "capabilities",
        "structure",
        "handwritten",
        "real_model",
        "typed",
    }
    assert sum(1 for c in CASES if "error_contains" in c["expect"]) >= 40
    assert len({c["name"] for c in CASES}) == len(CASES), "case names must be unique"


def test_corpus_files_are_what_the_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS / "make_corpus.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, body in module.build().items():
        assert (CORPUS / name).read_text(encoding="utf-8") == body, f"{name} is stale: rerun make_corpus.py"


@pytest.mark.parametrize("case", CASES, ids=[f"{c['category']}:{c['name']}" for c in CASES])
def test_corpus_case_reads_as_constructed(case: dict[str, Any]) -> None:
    expect = case["expect"]
    kwargs = {"known_capabilities": case["known_capabilities"], "max_steps": case["max_steps"],
              "tool_schemas": case.get("tool_schemas")}
    if "error_contains" in expect:
        with pytest.raises(PlanParseError) as info:
            parse_decision(case["text"], **kwargs)
        assert expect["error_contains"] in info.value.reason
        assert info.value.text == case["text"]
        return
    result = parse_decision(case["text"], **kwargs)
    assert result.plan_action == expect["plan_action"]
    assert _shape(result) == _expected(expect["steps"])
    for fragment in expect["warnings_contain"]:
        assert any(fragment in w for w in result.warnings), (fragment, result.warnings)


# --------------------------------------------------------------------------- specific rules


def test_keep_has_no_decision_and_new_always_has_one() -> None:
    keep = parse_decision('{"plan_action": "keep", "next_action": "wait"}')
    assert keep.decision is None and keep.next_action == "wait"
    new = parse_decision('[{"id": "s1", "description": "look"}]')
    assert new.decision is not None and new.decision.type == "execute_steps"


def test_unknown_tool_is_dropped_never_remapped_to_a_near_name() -> None:
    result = parse_decision(
        '[{"id": "s1", "description": "a", "tool": "websearch"}, {"id": "s2", "description": "b", "tool": "web_search"}]',
        known_capabilities=["web_search"],
    )
    assert [s.id for s in result.decision.steps] == ["s2"]  # type: ignore[union-attr]
    assert any("'websearch'" in w for w in result.warnings)


def test_over_the_cap_fails_rather_than_truncating() -> None:
    steps = [{"id": f"s{i}", "description": "x"} for i in range(1, 10)]
    with pytest.raises(PlanParseError, match=r"plan has 9 steps, over max_steps=8"):
        parse_decision(json.dumps(steps), max_steps=8)


def test_cycle_error_names_the_cycle_and_keeps_the_text() -> None:
    text = '[{"id": "a", "description": "x", "depends_on": "b"}, {"id": "b", "description": "y", "depends_on": "a"}]'
    with pytest.raises(PlanParseError) as info:
        parse_decision(text)
    assert "cycle: a -> b -> a" in info.value.reason
    assert info.value.text == text


def test_execution_mode_next_action_and_reasoning_are_carried() -> None:
    result = parse_decision(
        json.dumps(
            {
                "plan_action": "new",
                "execution_mode": "Sequential",
                "next_action": "fetch both",
                "steps": [{"id": "s1", "description": "x"}],
            }
        )
    )
    assert result.execution_mode == "sequential"
    assert result.decision is not None and result.decision.execution_mode == "sequential"
    assert result.next_action == "fetch both" and result.decision.reasoning == "fetch both"


def test_parallel_an_old_name_that_ran_as_dependency_is_read_as_dependency_without_a_warning() -> None:
    text = json.dumps({"plan_action": "new", "execution_mode": "Parallel", "steps": [{"id": "s1", "description": "x"}]})
    result = parse_decision(text)
    assert result.execution_mode == "dependency" and result.warnings == []
    assert result.decision is not None and result.decision.execution_mode == "dependency"
    odd = parse_decision(text.replace("Parallel", "eventually"))
    assert odd.execution_mode == "dependency" and "'eventually' is not one of sequential, dependency" in odd.warnings[0]


def test_execution_hint_is_derived_like_the_wire_conversion() -> None:
    result = parse_decision(
        '[{"id": "a", "description": "x", "tools": ["t"]}, {"id": "b", "description": "y", "agent": "w"},'
        ' {"id": "c", "description": "z"}, {"id": "d", "description": "r", "execution_hint": "remote"}]'
    )
    assert [s.execution_hint for s in result.decision.steps] == ["tool", "subagent", "auto", "remote"]  # type: ignore[union-attr]


def test_clean_json_gives_no_warnings() -> None:
    result = parse_decision(json.dumps({"plan_action": "new", "steps": [{"id": "s1", "description": "x"}]}))
    assert result.warnings == []


def test_pydantic_rejection_becomes_a_parse_error() -> None:
    with pytest.raises(PlanParseError, match="does not validate"):
        parse_decision('[{"id": "s1", "description": {"text": "x"}}]')


# --------------------------------------------------------------------------- hostile input


def test_a_megabyte_of_garbage_returns_or_raises_a_parse_error() -> None:
    rng = random.Random(7)
    garbage = "".join(rng.choice("{}[]\",:ab 1\n'\\/*") for _ in range(1_000_000))
    with pytest.raises(PlanParseError):
        parse_decision(garbage)


@pytest.mark.parametrize(
    "text",
    [
        "[" * 10_000,
        '{"a":' * 10_000,
        "[{" * 5_000 + "}]" * 5_000,
        '["a"b ' * 50_000,
        "{" * 100_000,
        '{"a' * 50_000,
        "[/*" * 100_000,
        "[it's " * 50_000,
        "[\u201c" * 100_000,
        "[" + " " * 300_000,
    ],
    ids=[
        "arrays",
        "objects",
        "mixed",
        "inner-quotes",
        "open-braces",
        "open-strings",
        "open-comments",
        "apostrophes",
        "smart-quotes",
        "whitespace",
    ],
)
def test_deep_or_pathological_nesting_raises_a_parse_error_not_a_crash(text: str) -> None:
    with pytest.raises(PlanParseError):
        parse_decision(text)


def test_a_plan_after_a_lot_of_prose_is_still_found_and_a_megabyte_is_refused_unread() -> None:
    text = "word " * 80_000 + '[{"id": "s1", "description": "x"}]'  # 400 KB: under the cap
    assert [s.id for s in parse_decision(text).decision.steps] == ["s1"]  # type: ignore[union-attr]
    with pytest.raises(PlanParseError, match="over the cap"):  # no plan of 50 steps is a megabyte
        parse_decision("word " * 200_000 + '[{"id": "s1", "description": "x"}]')


# --------------------------------------------------------------------------- parse_object


def test_parse_object_reads_strings_for_numbers_and_any_case_for_enums() -> None:
    obj, warnings = parse_object(
        'Assessment:\n```json\n{"status": "Done", "goal_progress": "0.8", "confidence": "1", "summary": "ok",}\n```',
        AssessStatus,
    )
    assert obj == AssessStatus(status="done", goal_progress=0.8, confidence=1.0, summary="ok")
    assert any("trailing comma" in w for w in warnings)


def test_parse_object_drops_unknown_keys_with_a_warning() -> None:
    obj, warnings = parse_object(
        '{"action": "bootstrap", "reasoning": "one step", "score": 3}', ChooseContinuation
    )
    assert obj.action == "bootstrap"
    assert any("'score'" in w for w in warnings)


def test_parse_object_reads_string_booleans_key_case_and_a_schema_wrapper() -> None:
    obj, _ = parse_object(
        '{"ReflectOnPlan": {"Assessment": "fine", "should_revise": "False"}}', ReflectOnPlan
    )
    assert obj == ReflectOnPlan(assessment="fine", should_revise=False)


def test_parse_object_repairs_truncation_of_a_trailing_field() -> None:
    obj, warnings = parse_object('{"route": "trivial", "answer": "Paris is the cap', RouteIntake)
    assert obj.route == "trivial" and obj.answer == "Paris is the cap"
    assert any("cut off" in w for w in warnings)


def test_parse_object_picks_the_object_with_the_schema_fields() -> None:
    obj, _ = parse_object('Context: {"x": 1}. Answer: {"route": "complex"}', RouteIntake)
    assert obj.route == "complex"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ('{"status": "finished"}', "does not validate"),
        ('{"goal_progress": "lots"}', "does not validate"),
        ("The goal is done.", "no JSON object with the fields of AssessStatus"),
        ("", "no JSON object"),
    ],
)
def test_parse_object_refuses_what_still_does_not_validate(text: str, fragment: str) -> None:
    with pytest.raises(PlanParseError) as info:
        parse_object(text, AssessStatus)
    assert fragment in info.value.reason
    assert info.value.text == text


def test_parse_object_takes_a_number_where_text_belongs() -> None:
    obj, _ = parse_object('{"status": "continue", "summary": 3}', AssessStatus)
    assert obj.summary == "3"


def test_parse_object_decodes_json_encoded_twice() -> None:
    obj, warnings = parse_object(json.dumps('{"route": "simple"}'), RouteIntake)
    assert obj.route == "simple"
    assert any("JSON string" in w for w in warnings)


OBJECT_CASES = [
    json.loads(line)
    for line in (CORPUS / "objects" / "real_objects.jsonl").read_text(encoding="utf-8").splitlines()
    if line.strip()
]
SCHEMAS = {s.__name__: s for s in (AssessStatus, ChooseContinuation, ReflectOnPlan, RouteIntake)}


@pytest.mark.parametrize("case", OBJECT_CASES, ids=[c["name"] for c in OBJECT_CASES])
def test_real_small_answers_read_as_labelled(case: dict[str, Any]) -> None:
    schema = SCHEMAS[case["schema"]]
    if "error_contains" in case["expect"]:
        with pytest.raises(PlanParseError) as info:
            parse_object(case["text"], schema)
        assert case["expect"]["error_contains"] in info.value.reason
        return
    obj, _ = parse_object(case["text"], schema)
    for name, value in case["expect"]["fields"].items():
        assert getattr(obj, name) == value, name


def test_parse_object_reads_a_percentage_as_a_fraction() -> None:
    obj, _ = parse_object('{"status": "continue", "goal_progress": "40 %"}', AssessStatus)
    assert obj.goal_progress == pytest.approx(0.4)


@pytest.mark.parametrize(
    "data",
    [
        {"plan_action": "new", "steps": [{"id": "a", "description": "x", "depends_on": ["zz", "read_file"]}]},
        {"plan_action": "new", "steps": [{"id": "a", "description": "x", "tools": ["rm"]},
                                         {"id": "b", "description": "y", "tools": ["read_file"], "depends_on": ["a"]}]},
        {"plan": {"steps": {"s1": {"description": "x"}, "s2": {"description": "y", "depends_on": ["s1"]}}}},
        {"plan_action": "new", "execution_mode": "Parallel", "steps": [{"id": "a", "description": "x", "depends_on": ["old"]}]},
        {"plan_action": "keep", "steps": []},
    ],
)
def test_reading_a_parsed_plan_matches_parsing_its_text(data: dict[str, Any]) -> None:
    from soothe_planner.parsing import read_decision

    kw: dict[str, Any] = {"known_capabilities": ["read_file"], "max_steps": 5, "existing_ids": {"old"}}
    read, parsed = read_decision(data, **kw), parse_decision(json.dumps(data), **kw)
    assert (read.plan_action, read.decision, read.warnings) == (parsed.plan_action, parsed.decision, parsed.warnings)


def test_reading_a_parsed_plan_refuses_what_the_rules_refuse() -> None:
    from soothe_planner.parsing import read_decision

    cyclic = {"plan_action": "new", "steps": [{"id": "a", "description": "x", "depends_on": ["b"]},
                                              {"id": "b", "description": "y", "depends_on": ["a"]}]}
    with pytest.raises(PlanParseError, match="cycle: a -> b -> a"):
        read_decision(cyclic)
    with pytest.raises(PlanParseError, match="over max_steps=1"):
        read_decision({"steps": [{"id": "a", "description": "x"}, {"id": "b", "description": "y"}]}, max_steps=1)


def test_an_argument_holding_only_the_steps_own_output_is_dropped_unless_the_tool_declares_it() -> None:
    text = json.dumps({"plan_action": "new", "steps": [
        {"id": "s1", "description": "count the log lines", "tool": "bash",
         "args": {"command": "wc -l app.log", "output": "{{s1.output}}"}, "depends_on": []},
        {"id": "s2", "description": "keep the summary", "tool": "store",
         "args": {"text": "lines: {{s1.output}}", "output": "{{s2.output}}"}, "depends_on": ["s1"]}]})
    schemas = {"store": {"type": "object", "properties": {"text": {"type": "string"}, "output": {"type": "string"}}}}
    result = parse_decision(text, known_capabilities=["bash", "store"], tool_schemas=schemas)
    assert result.decision is not None
    s1, s2 = result.decision.steps
    assert s1.args == {"command": "wc -l app.log"}  # bash has no schema: 'output' is no argument it takes
    assert any("dropped argument 'output'" in w and "'s1'" in w for w in result.warnings)
    # store declares 'output': the reading leaves it, and the validator refuses the self-reference
    assert s2.args == {"text": "lines: {{s1.output}}", "output": "{{s2.output}}"}
