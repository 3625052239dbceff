"""The hand-written parser cases, and how every case states its expected reading.

``make_corpus.py`` builds the generated families and writes all of them; the cases here are the
ones no generator makes (odd wrappers, mixed prose, refusals), each written out by hand. The
expected results use the same helpers as the generated families: derived from the steps a case
was built from, never from running the parser.
"""

from __future__ import annotations

import json
from typing import Any

Step = dict[str, Any]


def full(step: Step) -> Step:
    return {
        "id": step["id"],
        "description": step["description"],
        "depends_on": list(step.get("depends_on", [])),
        "tools": list(step.get("tools", [])),
        "subagent": step.get("subagent"),
        "tool": step.get("tool"),
        "args": dict(step.get("args", {})),
    }


def expected_steps(steps: list[Step]) -> list[Step]:
    """What each step reads as; ``tool`` and ``args`` only when set (unset: no tool, no args)."""
    out = []
    for s in steps:
        f = full(s)
        out.append({k: f[k] for k in ("id", "depends_on", "tools", "subagent")})
        out[-1].update({k: f[k] for k in ("tool", "args") if f[k]})
    return out


def ok(steps: list[Step], *warnings: str, action: str = "new") -> dict[str, Any]:
    return {"plan_action": action, "steps": expected_steps(steps), "warnings_contain": list(warnings)}


def err(text: str) -> dict[str, Any]:
    return {"error_contains": text}


def case(
    name: str,
    category: str,
    text: str,
    expect: dict[str, Any],
    *,
    known: list[str] | None = None,
    max_steps: int | None = None,
    tool_schemas: dict[str, Any] | None = None,
) -> dict[str, Any]:
    out = {
        "name": name,
        "category": category,
        "text": text,
        "known_capabilities": known,
        "max_steps": max_steps,
        "expect": expect,
    }
    if tool_schemas is not None:
        out["tool_schemas"] = tool_schemas
    return out


S2 = [{"id": "s1", "description": "look"}, {"id": "s2", "description": "tell", "depends_on": ["s1"]}]
S2_JSON = json.dumps({"steps": S2})


def handwritten() -> list[dict[str, Any]]:
    h = "handwritten"
    keep = {"plan_action": "keep", "steps": [], "warnings_contain": []}
    return [
        case("keep", h, '{"plan_action": "keep", "next_action": "wait for s2"}', keep),
        case("keep_upper", h, '```json\n{"plan_action": "KEEP"}\n```', keep),
        case("keep_unquoted", h, "{plan_action: keep}", keep),
        case(
            "keep_with_steps",
            h,
            json.dumps({"plan_action": "keep", "steps": S2}),
            {"plan_action": "keep", "steps": [], "warnings_contain": ["were ignored"]},
        ),
        case(
            "keep_in_prose",
            h,
            'The plan still holds. {"plan_action":"keep","execution_mode":"dependency"} Done.',
            keep,
        ),
        case("new_without_steps", h, '{"plan_action": "new"}', err("no steps were written")),
        case("new_empty_steps", h, '{"plan_action": "new", "steps": []}', err("no steps were written")),
        case(
            "unknown_action",
            h,
            json.dumps({"plan_action": "replace", "steps": S2}),
            err("is not 'new' or 'keep'"),
        ),
        case("action_mixed_case", h, json.dumps({"plan_action": "New", "steps": S2}), ok(S2)),
        case("empty", h, "", err("no JSON plan found")),
        case("whitespace", h, "   \n\t ", err("no JSON plan found")),
        case(
            "pure_prose",
            h,
            "I think we should first look around and then tell the user.",
            err("no JSON plan found"),
        ),
        case(
            "markdown_list",
            h,
            "1. Search the web\n2. Read the results\n3. Summarise",
            err("no JSON plan found"),
        ),
        case("markdown_bullets", h, "- [ ] search the web\n- [x] summarise", err("no JSON plan")),
        case("html_list", h, "<ol><li>Search</li><li>Summarise</li></ol>", err("no JSON plan found")),
        case("xml_steps", h, '<plan><step id="s1">look</step></plan>', err("no JSON plan found")),
        case("html_wrapped_json", h, f"<plan>{S2_JSON}</plan>", ok(S2)),
        case("json_without_plan", h, '{"answer": 42, "confidence": 0.9}', err("no JSON plan found")),
        case("steps_not_list", h, '{"steps": "1. look 2. tell"}', err("must be a list of step objects")),
        case("steps_as_strings", h, '{"steps": ["look", "tell"]}', err("is a JSON string, not an object")),
        case("type_final", h, '{"type": "final", "steps": [], "reasoning": "done"}', err("'final' decision")),
        case("type_unknown", h, json.dumps({"type": "run", "steps": S2}), err("is not 'execute_steps'")),
        case(
            "runtime_shape",
            h,
            json.dumps({"type": "execute_steps", "steps": S2, "execution_mode": "sequential"}),
            ok(S2),
        ),
        case(
            "two_different_plans",
            h,
            f"Option A:\n```json\n{S2_JSON}\n```\nOption B:\n```json\n"
            + json.dumps({"steps": S2[:1]})
            + "\n```",
            err("found 2 different plans"),
        ),
        case("same_plan_twice", h, f"{S2_JSON}\nAgain: {S2_JSON}", ok(S2)),
        case("no_description", h, '[{"id": "s1", "tools": ["search"]}]', err("has no description")),
        case("blank_description", h, '[{"id": "s1", "description": "  "}]', err("has no description")),
        case("name_is_not_read", h, '[{"name": "Search", "tools": ["search"]}]', err("has no description")),
        case(
            "step_number_is_id",
            h,
            '[{"step": 1, "action": "look"}, {"step": 2, "action": "tell", "deps": [1]}]',
            ok([{"id": "1", "description": "look"}, {"id": "2", "description": "tell", "depends_on": ["1"]}]),
        ),
        case(
            "alias_next_to_canonical",
            h,
            '[{"id": "s1", "description": "look", "task": "other"}]',
            ok([S2[0]], "ignored 'task'"),
        ),
        case(
            "unknown_step_field",
            h,
            '[{"id": "s1", "description": "look", "priority": "high"}]',
            ok([S2[0]], "unknown field 'priority'"),
        ),
        case(
            "unknown_plan_field",
            h,
            json.dumps({"steps": S2, "goal_progress": 0.3}),
            ok(S2, "unknown plan field"),
        ),
        case(
            "bad_execution_mode",
            h,
            json.dumps({"steps": S2, "execution_mode": "dag"}),
            ok(S2, "using 'dependency'"),
        ),
        case("deps_null", h, '[{"id": "s1", "description": "look", "depends_on": null}]', ok([S2[0]])),
        case(
            "deps_number",
            h,
            '[{"id": 1, "description": "look"}, {"id": 2, "description": "tell", "depends_on": 1}]',
            ok([{"id": "1", "description": "look"}, {"id": "2", "description": "tell", "depends_on": ["1"]}]),
        ),
        case(
            "deps_repeated",
            h,
            '[{"id": "s1", "description": "look"}, {"id": "s2", "description": "tell", '
            '"depends_on": ["s1", "s1"]}]',
            ok(S2, "repeated dependency"),
        ),
        case(
            "deps_object",
            h,
            '[{"id": "s1", "description": "look", "depends_on": [{"id": "s0"}]}]',
            err("is not a step id"),
        ),
        case(
            "some_ids_missing",
            h,
            '[{"id": "s1", "description": "look"}, {"description": "tell", "deps": ["s1"]}]',
            ok(S2, "assigned ids"),
        ),
        case(
            "missing_id_collides",
            h,
            '[{"description": "look"}, {"id": "s1", "description": "tell"}]',
            err("duplicate step id 's1'"),
        ),
        case(
            "ids_kept_as_given",
            h,
            '[{"id": "Step.One", "description": "look"}, {"id": "S-2", "description": "tell", '
            '"depends_on": "Step.One"}]',
            ok(
                [
                    {"id": "Step.One", "description": "l"},
                    {"id": "S-2", "description": "t", "depends_on": ["Step.One"]},
                ]
            ),
        ),
        case(
            "ids_breaking_the_id_rule_rewritten_with_their_dependencies",
            h,
            '[{"id": "Step One", "description": "look"}, {"id": "s1</plan>", "description": "tell", '
            '"depends_on": "Step One"}]',
            ok(
                [
                    {"id": "Step_One", "description": "l"},
                    {"id": "s1_plan", "description": "t", "depends_on": ["Step_One"]},
                ],
                "rewrote 2 id(s)",
            ),
        ),
        case(
            "ids_rewriting_to_one_refused",
            h,
            '[{"id": "a b", "description": "look"}, {"id": "a_b", "description": "tell"}]',
            err("its rewrite 'a_b' is the id of another step"),
        ),
        case(
            "self_cycle_only",
            h,
            '[{"id": "s1", "description": "look", "depends_on": ["s1"]}]',
            ok([S2[0]], "depended on itself"),
        ),
        case(
            "cycle_2",
            h,
            '[{"id": "s1", "description": "a", "depends_on": ["s2"]}, '
            '{"id": "s2", "description": "b", "depends_on": ["s1"]}]',
            err("cycle: s1 -> s2 -> s1"),
        ),
        case(
            "cycle_3",
            h,
            '[{"id": "s1", "description": "a", "depends_on": ["s3"]}, {"id": "s2", "description": "b", '
            '"depends_on": ["s1"]}, {"id": "s3", "description": "c", "depends_on": ["s2"]}]',
            err("cycle: s1 -> s3 -> s2 -> s1"),
        ),
        case(
            "cycle_after_root",
            h,
            '[{"id": "s1", "description": "a"}, {"id": "s2", "description": "b", '
            '"depends_on": ["s1", "s3"]}, {"id": "s3", "description": "c", "depends_on": ["s2"]}]',
            err("cycle: s2 -> s3 -> s2"),
        ),
        case(
            "cycle_through_dropped_step_is_gone",
            h,
            '[{"id": "s1", "description": "a", "depends_on": ["s2"]}, '
            '{"id": "s2", "description": "b", "tool": "rm", "depends_on": ["s1"]}]',
            ok([{"id": "s1", "description": "a"}], "dropped step 's2'", "depended on dropped step"),
            known=["search"],
        ),
        case(
            "cap_counts_before_drops",
            h,
            json.dumps(
                {
                    "steps": [
                        {"id": "s1", "description": "a"},
                        {"id": "s2", "description": "b", "tools": ["rm"]},
                        {"id": "s3", "description": "c"},
                    ]
                }
            ),
            err("plan has 3 steps, over max_steps=2"),
            known=["x"],
            max_steps=2,
        ),
        case(
            "cap_counts_whole_steps_only",
            h,
            json.dumps({"steps": S2})[:-4],
            ok([S2[0]], "cut off"),
            max_steps=1,
        ),
        case(
            "unknown_subagent",
            h,
            '[{"id": "s1", "description": "a", "agent": "hacker"}, {"id": "s2", '
            '"description": "b", "subagent": "writer"}]',
            ok([{"id": "s2", "description": "b", "subagent": "writer"}], "subagent 'hacker'"),
            known=["writer"],
        ),
        case(
            "case_is_not_remapped",
            h,
            '[{"id": "s1", "description": "a", "tool": "Web_Search"}]',
            err("every step was dropped"),
            known=["web_search"],
        ),
        case(
            "mismatched_brackets",
            h,
            '{"steps": [{"id": "s1", "description": "a"}, {"id": "s2", "description": "b"]}',
            err("malformed"),
        ),
        case(
            "broken_inside_plan",
            h,
            '{"steps": [{"id": "s1", "description": "a"}, {"id": "s2", "description": @}]}',
            err("malformed"),
        ),
        case("too_deep", h, "[" * 100 + S2_JSON + "]" * 100, err("no JSON plan found")),
        case("deep_garbage", h, "[" * 10000, err("no JSON plan found")),
        case(
            "unescaped_quotes",
            h,
            '[{"id": "s1", "description": "Search for "plan repair" papers"}]',
            ok([{"id": "s1", "description": "x"}], "unescaped quote"),
        ),
        case(
            "raw_newline_in_string",
            h,
            '[{"id": "s1", "description": "line one\nline two"}]',
            ok([{"id": "s1", "description": "x"}]),
        ),
        case(
            "header_then_bare_steps",
            h,
            '{"plan_action": "new", "execution_mode": "parallel"}\n' + "\n".join(json.dumps(s) for s in S2),
            ok(S2),
        ),
        case(
            "header_keep_then_bare_steps",
            h,
            '{"plan_action": "keep"}\n' + json.dumps(S2[0]),
            {"plan_action": "keep", "steps": [], "warnings_contain": ["were ignored"]},
        ),
        case(
            "steps_keyed_by_id",
            h,
            '{"steps": {"s1": {"description": "look"}, "s2": {"task": "tell", "deps": "s1"}}}',
            ok(S2),
        ),
        case(
            "steps_keyed_stated_id_wins",
            h,
            '{"steps": {"a": {"id": "s1", "description": "look"}, "s2": {"task": "tell", "deps": "s1"}}}',
            ok(S2, "used the stated id"),
        ),
        case(
            "top_level_keyed_any_case",
            h,
            '{"Step 1": {"Task": "look"}, "Step 2": {"TASK": "tell", "Deps": "Step 1"}}',
            ok(
                [
                    {"id": "Step_1", "description": "l"},
                    {"id": "Step_2", "description": "t", "depends_on": ["Step_1"]},
                ],
                "rewrote 2 id(s)",
            ),
        ),
        case(
            "both_spellings_of_a_field",
            h,
            '[{"id": "s1", "description": "look", "Description": "other"}]',
            ok([S2[0]], "unknown field 'Description'"),
        ),
        case(
            "tool_as_call_object",
            h,
            '[{"id": "s1", "description": "look", "tools": [{"name": "search", "args": {"q": "x"}}]}]',
            ok([{**S2[0], "tool": "search", "args": {"q": "x"}}], "one-element tools list"),
        ),
        case(
            "tool_as_number",
            h,
            '[{"id": "s1", "description": "look", "tools": [3]}]',
            err("names a tool with a JSON number"),
        ),
        case(
            "subagent_as_list",
            h,
            '[{"id": "s1", "description": "look", "subagent": ["writer"]}]',
            err("names a subagent with a JSON array"),
        ),
        case("double_encoded", h, json.dumps(S2_JSON), ok(S2, "JSON string holding the JSON")),
        case("decision_wrapper", h, json.dumps({"decision": {"type": "execute_steps", "steps": S2}}), ok(S2)),
        case("plan_list_wrapper", h, json.dumps({"plan": S2, "plan_action": "new"}), ok(S2)),
        case(
            "plan_wrapper_cut_before_steps",
            h,
            '{"plan": {"plan_action": "new", "st',
            err("no steps were written"),
        ),
        case("plan_wrapper_empty", h, '{"plan": {}}', err("neither steps nor a plan_action")),
        case("plan_wrapper_keep", h, '{"decision": {"plan_action": "keep"}}', keep),
        case("think_unclosed_is_read", h, "<think>\n" + S2_JSON, ok(S2)),
        case("prose_brackets_before_plan", h, "Use [tools] and {care}; then:\n" + S2_JSON, ok(S2)),
        case(
            "prose_apostrophe_in_brackets",
            h,
            "Here's the plan [it's short]:\n```json\n" + S2_JSON + "\n```",
            ok(S2),
        ),
        case(
            "prose_apostrophe_then_cut_plan",
            h,
            "Here's the plan [it's short]:\n```json\n" + S2_JSON[:-8],
            ok(S2[:1], "cut off"),
        ),
        case(
            "numbered_deps_from_zero_are_not_positions",
            h,
            '[{"task": "look"}, {"task": "tell", "depends_on": [0]}]',
            ok([{"id": "s1", "description": "l"}, {"id": "s2", "description": "t"}], "unknown step '0'"),
        ),
        case(
            "numbered_from_zero_reads_no_positions",
            h,
            '[{"task": "a"}, {"task": "b", "deps": [0]}, {"task": "c", "deps": [0, 1]}]',
            ok(
                [
                    {"id": "s1", "description": "a"},
                    {"id": "s2", "description": "b"},
                    {"id": "s3", "description": "c"},
                ],
                "numbered from 0",
                "unknown step '1'",
            ),
        ),
        case("unclosed_fence", h, "```json\n" + json.dumps({"steps": S2}, indent=2), ok(S2)),
        case(
            "escaped_unicode",
            h,
            '[{"id": "s1", "description": "caf\\u00e9 \\ud83d\\ude00"}]',
            ok([{"id": "s1", "description": "x"}]),
        ),
        case(
            "windows_path_escape",
            h,
            '[{"id": "s1", "description": "read C:\\data\\notes.txt"}]',
            ok([{"id": "s1", "description": "x"}]),
        ),
    ]
