"""The typed-step family of the parser corpus: tool steps with arguments, written the ways models write them.

Each case starts from a typed seed plan (steps naming one ``tool`` with ``args``, model steps with
neither, references such as ``{{s2.output}}`` feeding a later argument) and changes one thing the
way a model does: an alias, args as a JSON string, a schema keyword leaking into the args, another
spelling of a reference, a missing dependency. The expected reading is the seed itself (plus the
warning the repair must record), never the parser's output.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

Step = dict[str, Any]

SCHEMAS: dict[str, Any] = {
    "get_forecast": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "day": {"type": "string"}},
        "required": ["city"],
    },
    "send_message": {
        "type": "object",
        "properties": {"to": {"type": "string"}, "text": {"type": "string"}},
        "required": ["to", "text"],
    },
    "search_text": {
        "type": "object",
        "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
        "required": ["pattern"],
    },
    "write_file": {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
}
KNOWN = sorted(SCHEMAS)

SEEDS: dict[str, list[Step]] = {
    "forecast": [
        {"id": "s1", "description": "get tomorrow's forecast for Lima", "tool": "get_forecast",
         "args": {"city": "Lima", "day": "tomorrow"}},
        {"id": "s2", "description": "summarise the forecast in one line", "depends_on": ["s1"]},
        {"id": "s3", "description": "send the summary to Dana", "tool": "send_message",
         "args": {"to": "Dana", "text": "Tomorrow: {{s2.output}}"}, "depends_on": ["s2"]},
    ],
    "report": [
        {"id": "find", "description": "find the TODO lines", "tool": "search_text", "args": {"pattern": "TODO"}},
        {"id": "write", "description": "save the lines found", "tool": "write_file",
         "args": {"path": "TODO_REPORT.md", "content": "{{find.output}}"}, "depends_on": ["find"]},
        {"id": "tell", "description": "say how many lines were saved", "depends_on": ["find", "write"]},
    ],
}


def wire(steps: list[Step]) -> list[Step]:
    """Steps as the wire schema writes them: every field present."""
    return [
        {"id": s["id"], "description": s["description"], "tool": s.get("tool"), "args": dict(s.get("args", {})),
         "depends_on": list(s.get("depends_on", []))}
        for s in steps
    ]


def text_of(steps: list[Step]) -> str:
    return json.dumps({"plan_action": "new", "steps": steps}, indent=1)


def _typed(steps: list[Step]) -> list[Step]:
    return [s for s in steps if s["tool"]]


def _rename(key: str, alias: str) -> Callable[[list[Step]], list[Step]]:
    def change(steps: list[Step]) -> list[Step]:
        return [{(alias if k == key else k): v for k, v in s.items()} for s in steps]
    return change


def _each_typed(edit: Callable[[Step], Step]) -> Callable[[list[Step]], list[Step]]:
    def change(steps: list[Step]) -> list[Step]:
        return [edit(dict(s)) if s["tool"] else s for s in steps]
    return change


def _args_json(s: Step) -> Step:
    return {**s, "args": json.dumps(s["args"])}


def _keywords(s: Step) -> Step:
    return {**s, "args": {"additionalProperties": False, **s["args"], "type": "object"}}


def _leak_only_additional(s: Step) -> Step:
    return {**s, "args": {**s["args"], "additionalProperties": False}}


def _own_output(s: Step) -> Step:
    # The step names where its output goes, as an argument no tool takes.
    return {**s, "args": {**s["args"], "output": "{{" + s["id"] + ".output}}"}}


def _as_schema(s: Step) -> Step:
    return {**s, "args": {"type": "object", "properties": s["args"]}}


def _tools_list(s: Step) -> Step:
    out = {k: v for k, v in s.items() if k != "tool"}
    return {**out, "tools": [s["tool"]]}


def _tool_list(s: Step) -> Step:
    return {**s, "tool": [s["tool"]]}


def _call_object(s: Step) -> Step:
    out = {k: v for k, v in s.items() if k not in ("tool", "args")}
    return {**out, "tool": {"name": s["tool"], "arguments": json.dumps(s["args"])}}


def _no_tool_word(steps: list[Step]) -> list[Step]:
    return [s if s["tool"] else {**s, "tool": "none"} for s in steps]


def _drop_ref_deps(steps: list[Step]) -> list[Step]:
    # The typed steps' dependencies are exactly the steps their args refer to: written without them.
    return [{**s, "depends_on": []} if s["tool"] and s["depends_on"] else s for s in steps]


def _model_step_args(steps: list[Step]) -> list[Step]:
    # The model step writes its dependencies as args referring to them, and no depends_on.
    out = []
    for s in steps:
        if not s["tool"] and s["depends_on"]:
            s = {**s, "args": {d: "{{" + d + ".output}}" for d in s["depends_on"]}, "depends_on": []}
        out.append(s)
    return out


SPELLINGS: dict[str, Callable[[str], str]] = {
    "bare": lambda i: "{{" + i + "}}",
    "spaced": lambda i: "{{ " + i + ".output }}",
    "result": lambda i: "{{" + i + ".result}}",
    "single_brace": lambda i: "{" + i + ".output}",
    "dollar": lambda i: "$" + i + ".output",
    "dollar_brace": lambda i: "${" + i + ".output}",
    "steps_prefix": lambda i: "{{steps." + i + ".output}}",
    "step_prefix": lambda i: "{{step_" + i + ".output}}",
}


def _spelled(spell: Callable[[str], str]) -> Callable[[list[Step]], list[Step]]:
    ids = None

    def change(steps: list[Step]) -> list[Step]:
        nonlocal ids
        ids = [s["id"] for s in steps]

        def respell(value: Any) -> Any:
            if not isinstance(value, str):
                return value
            for i in ids or ():
                value = value.replace("{{" + i + ".output}}", spell(i))
            return value

        return [{**s, "args": {k: respell(v) for k, v in s["args"].items()}} for s in steps]

    return change


VARIANTS: dict[str, tuple[Callable[[list[Step]], list[Step]], list[str], bool]] = {
    # name: (change to the wire steps, warnings the reading records, pass the tools' schemas)
    "canonical": (lambda s: s, [], True),
    "args_json_string": (_each_typed(_args_json), ["args were a JSON string"], True),
    "args_alias_arguments": (_rename("args", "arguments"), [], True),
    "args_alias_parameters": (_rename("args", "parameters"), [], True),
    "args_alias_params": (_rename("args", "params"), [], True),
    "args_alias_input": (_rename("args", "input"), [], True),
    "tool_alias_tool_name": (_rename("tool", "tool_name"), [], True),
    "tool_alias_function": (_rename("tool", "function"), [], True),
    "schema_keywords": (_each_typed(_keywords), ["dropped schema keyword"], True),
    "additional_properties_without_schemas": (_each_typed(_leak_only_additional), ["dropped schema keyword"], False),
    "own_output_argument": (_each_typed(_own_output), ["the step's own output is no input"], True),
    "own_output_argument_without_schemas": (_each_typed(_own_output), ["the step's own output is no input"], False),
    "args_written_as_schema": (_each_typed(_as_schema), ["written as a schema"], True),
    "tool_as_tools_list": (_each_typed(_tools_list), ["one-element tools list"], True),
    "tool_as_one_element_list": (_each_typed(_tool_list), [], True),
    "tool_as_call_object": (_each_typed(_call_object), ["call object", "args were a JSON string"], True),
    "no_tool_word": (_no_tool_word, ["read as no tool"], True),
    "reference_without_dependency": (_drop_ref_deps, ["so it now depends on"], True),
    "model_step_with_reference_args": (_model_step_args, ["dropped args", "so it now depends on"], True),
    **{f"reference_{name}": (_spelled(spell), ["in its args read as '{{"], True) for name, spell in SPELLINGS.items()},
}


def typed_family(case: Callable[..., dict[str, Any]], ok: Callable[..., dict[str, Any]],
                 err: Callable[[str], dict[str, Any]]) -> list[dict[str, Any]]:
    cases = []
    for seed, steps in SEEDS.items():
        for name, (change, warnings, schemas) in VARIANTS.items():
            changed = change(wire(steps))
            if changed == wire(steps) and name != "canonical":
                continue  # the seed has nothing this variant changes
            cases.append(case(f"{seed}/{name}", "typed", text_of(changed), ok(steps, *warnings), known=KNOWN,
                              tool_schemas=SCHEMAS if schemas else None))
        written = wire(steps)
        first = written[0]  # each seed opens with a typed tool step
        others = written[1:]
        # A number where the tool takes text: written as the text the model meant.
        numbered = [{**first, "args": {**first["args"], next(iter(first["args"])): 2024}}, *others]
        expect = [{**steps[0], "args": {**steps[0]["args"], next(iter(first["args"])): "2024"}}, *steps[1:]]
        cases.append(case(f"{seed}/number_for_text", "typed", text_of(numbered), ok(expect, "written as text"),
                          known=KNOWN, tool_schemas=SCHEMAS))
        # A reference to a step nobody wrote is left as written, for the validator to refuse.
        literal = [{**first, "args": {**first["args"], "extra": "{{sN.output}}"}}, *others]
        expect = [{**steps[0], "args": {**steps[0]["args"], "extra": "{{sN.output}}"}}, *steps[1:]]
        cases.append(case(f"{seed}/unknown_reference_kept", "typed", text_of(literal), ok(expect),
                          known=KNOWN, tool_schemas=SCHEMAS))
        # Args that are prose, not an object: dropped, and said so.
        prose = [{**first, "args": "look it up"}, *others]
        expect = [{**steps[0], "args": {}}, *steps[1:]]
        cases.append(case(f"{seed}/args_as_prose", "typed", text_of(prose), ok(expect, "not an object of arguments"),
                          known=KNOWN, tool_schemas=SCHEMAS))
        # A tool nobody offered, named under "tool": the step is dropped, never remapped.
        unknown = [{**first, "tool": first["tool"] + "_v2"}, *others]
        cases.append(case(f"{seed}/unknown_typed_tool", "typed", text_of(unknown), err_or_ok(steps, first, ok, err),
                          known=KNOWN, tool_schemas=SCHEMAS))
        cases.append(case(f"{seed}/tool_as_number", "typed", text_of([{**first, "tool": 7}, *others]),
                          err("names a tool with a JSON number"), known=KNOWN))
    return cases


def err_or_ok(steps: list[Step], dropped: Step, ok: Callable[..., dict[str, Any]],
              err: Callable[[str], dict[str, Any]]) -> dict[str, Any]:
    """The plan without the dropped step (its dependents lose that dependency), or an error if none is left."""
    kept = [
        {**s, "depends_on": [d for d in s.get("depends_on", []) if d != dropped["id"]]}
        for s in steps if s["id"] != dropped["id"]
    ]
    return ok(kept, "not a known capability") if kept else err("every step was dropped")
