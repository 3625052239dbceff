"""Writes the parser corpus: plan texts the way models really write them, with the expected reading.

Run ``python tests/data/parser_corpus/make_corpus.py`` to regenerate (the hand-written cases and
the expected-result helpers are in ``corpus_cases.py``, the typed-step family in
``typed_cases.py``) the ``*.jsonl`` files next to it; ``tests/test_parsing.py`` checks that the files on disk are what this script produces.

``real_model.jsonl`` is not generated: it holds answers the embedded 0.5B model gave to planning
prompts, kept verbatim, each labelled by hand from reading the text (what its ids, dependencies,
tools and mistakes are), never from the parser's output. ``objects/real_objects.jsonl`` does the
same for the small answers (status, route, continuation, reflection) read by ``parse_object``.

Every expected result is derived from how the case was built — the seed plan's own steps, the
change that was made to them — and never from running the parser. A case is one JSON line::

    {"name", "category", "text", "known_capabilities": [...] | null, "max_steps": int | null,
     "tool_schemas": {name: schema} (optional),
     "expect": {"plan_action", "steps": [{"id", "depends_on", "tools", "subagent", "tool"?, "args"?}],
                "warnings_contain": [...]}
               | {"error_contains": "..."}}
"""

from __future__ import annotations

import importlib.util
import json
import random
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).parent


def _sibling(name: str) -> ModuleType:
    """A module beside this file, loaded by path (this script is run directly and loaded by path)."""
    spec = importlib.util.spec_from_file_location(f"parser_corpus_{name}", HERE / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_cases = _sibling("corpus_cases")
case, err, full, handwritten, ok = _cases.case, _cases.err, _cases.full, _cases.handwritten, _cases.ok
_typed = _sibling("typed_cases")

Step = dict[str, Any]

# --------------------------------------------------------------------------- seed plans
# Dependencies always point at earlier steps, so no step depends on the last one.

SEEDS: dict[str, list[Step]] = {
    "research": [
        {
            "id": "s1",
            "description": "Search the web for recent papers on plan repair",
            "tools": ["web_search"],
        },
        {
            "id": "s2",
            "description": "Read the three most cited papers",
            "tools": ["read_url"],
            "depends_on": ["s1"],
        },
        {"id": "s3", "description": "Summarise the findings in five bullet points", "depends_on": ["s2"]},
    ],
    "fanout": [
        {"id": "fetch_a", "description": "Fetch the sales report for Q1", "tools": ["read_file"]},
        {"id": "fetch_b", "description": "Fetch the sales report for Q2", "tools": ["read_file"]},
        {"id": "merge", "description": "Compare both quarters", "depends_on": ["fetch_a", "fetch_b"]},
    ],
    "single": [
        {"id": "s1", "description": "Answer the question directly from memory"},
    ],
    "delegate": [
        {"id": "s1", "description": "Collect background on the competitor", "subagent": "researcher"},
        {"id": "s2", "description": "Draft a one-page brief", "subagent": "writer", "depends_on": ["s1"]},
    ],
    "diamond": [
        {"id": "step-1", "description": "List the files in the repository", "tools": ["list_dir"]},
        {"id": "step-2", "description": "Read the README", "tools": ["read_file"], "depends_on": ["step-1"]},
        {
            "id": "step-3",
            "description": "Read the changelog",
            "tools": ["read_file"],
            "depends_on": ["step-1"],
        },
        {"id": "step-4", "description": "Write release notes", "depends_on": ["step-2", "step-3"]},
    ],
    "pipeline": [
        {"id": "s1", "description": "Download the CSV export", "tools": ["http_get"]},
        {
            "id": "s2",
            "description": "Clean rows with missing dates",
            "tools": ["python"],
            "depends_on": ["s1"],
        },
        {"id": "s3", "description": "Compute monthly totals", "tools": ["python"], "depends_on": ["s2"]},
        {"id": "s4", "description": "Plot the totals", "tools": ["python", "plot"], "depends_on": ["s3"]},
        {"id": "s5", "description": "Write a short report", "subagent": "writer", "depends_on": ["s3", "s4"]},
    ],
    "quoted": [
        {
            "id": "s1",
            "description": 'Find the "getting started" page — in Ünïcode too',
            "tools": ["web_search"],
        },
        {"id": "s2", "description": "Quote it: 'step {1}' [sic], then stop", "depends_on": ["s1"]},
    ],
    "pair": [
        {"id": "a1", "description": "Check the build status", "tools": ["ci_status"]},
        {
            "id": "a2",
            "description": "Report it on the ticket",
            "tools": ["ticket_comment"],
            "depends_on": ["a1"],
        },
    ],
}


def drop(steps: list[Step], ids: set[str]) -> list[Step]:
    """The steps not in ``ids``, with their dependencies on those removed."""
    return [
        {**s, "depends_on": [d for d in s.get("depends_on", []) if d not in ids]}
        for s in steps
        if s["id"] not in ids
    ]


# --------------------------------------------------------------------------- rendering


def wire_step(step: Step) -> Step:
    s = full(step)
    out: Step = {
        "id": s["id"],
        "description": s["description"],
        "depends_on": s["depends_on"],
        "tools": s["tools"],
    }
    if s["subagent"]:
        out["subagent"] = s["subagent"]
    return out


def shape(name: str, steps: list[Step]) -> str:
    ws = [wire_step(s) for s in steps]
    if name == "wire":
        return json.dumps(
            {"plan_action": "new", "execution_mode": "dependency", "next_action": "Start.", "steps": ws},
            indent=2,
        )
    if name == "wire_compact":
        return json.dumps({"plan_action": "new", "steps": ws}, ensure_ascii=False)
    if name == "no_action":
        return json.dumps({"steps": ws}, indent=1)
    if name == "runtime":
        return json.dumps(
            {"type": "execute_steps", "steps": ws, "execution_mode": "parallel", "reasoning": "r"}
        )
    if name == "array":
        return json.dumps(ws, indent=2)
    if name == "bare_lines":
        return "\n".join(json.dumps(s) for s in ws)
    if name == "bare_commas":
        return ",\n".join(json.dumps(s, indent=2) for s in ws)
    if name == "plan_wrapper":
        return json.dumps({"plan": {"plan_action": "new", "steps": ws}})
    if name == "tasks_key":
        return json.dumps({"execution_mode": "sequential", "tasks": ws}, indent=4)
    raise ValueError(name)


SHAPES = (
    "wire",
    "wire_compact",
    "no_action",
    "runtime",
    "array",
    "bare_lines",
    "bare_commas",
    "plan_wrapper",
    "tasks_key",
)


def wrap(name: str, body: str) -> str:
    if name == "raw":
        return body
    if name == "fence_json":
        return f"```json\n{body}\n```"
    if name == "fence":
        return f"```\n{body}\n```"
    if name == "prose":
        return f"Sure! Here is the plan you asked for:\n\n{body}\n\nLet me know if you want changes."
    if name == "prose_fence":
        return f"I will break this down.\n\n```json\n{body}\n```\n\nThe steps run in dependency order."
    if name == "think":
        draft = '{"steps": [{"id": "x", "description": "draft"}]}'
        return f"<think>\nFirst idea: {draft} - no, too vague.\n</think>\n```json\n{body}\n```"
    if name == "two_fences":
        return f"Run this first:\n```bash\nls -la [dir]\n```\nThen the plan:\n```json\n{body}\n```"
    if name == "html":
        return f"<p>Plan:</p>\n<pre><code>{body}</code></pre>"
    raise ValueError(name)


WRAPS = ("raw", "fence_json", "fence", "prose", "prose_fence", "think", "two_fences", "html")


def lax(value: Any, *, key: Callable[[str], str], trailing: bool, sep: str, lit: dict[Any, str]) -> str:
    """A small JSON writer that makes the mistakes models make (iterative for lists, not needed deep)."""
    if isinstance(value, dict):
        items = [
            f"{key(k)}: {lax(v, key=key, trailing=trailing, sep=sep, lit=lit)}" for k, v in value.items()
        ]
        return "{" + sep.join(items) + ("," if trailing and items else "") + "}"
    if isinstance(value, list):
        items = [lax(v, key=key, trailing=trailing, sep=sep, lit=lit) for v in value]
        return "[" + sep.join(items) + ("," if trailing and items else "") + "]"
    if value is None or isinstance(value, bool):
        return lit[value]
    return json.dumps(value, ensure_ascii=False)


JSON_LIT = {None: "null", True: "true", False: "false"}
PY_LIT = {None: "None", True: "True", False: "False"}


def repaired(name: str, steps: list[Step]) -> str:
    steps_out = [{**wire_step(s), "subagent": full(s)["subagent"]} for s in steps]
    plan = {"plan_action": "new", "next_action": None, "steps": steps_out}
    if name == "trailing_commas":
        return lax(plan, key=json.dumps, trailing=True, sep=", ", lit=JSON_LIT)
    if name == "python_literals":
        return lax(plan, key=json.dumps, trailing=False, sep=", ", lit=PY_LIT)
    if name == "python_repr":
        return repr(plan)
    if name == "unquoted_keys":
        return lax(plan, key=str, trailing=False, sep=", ", lit=JSON_LIT)
    if name == "smart_quote_keys":
        return lax(plan, key=lambda k: f"\u201c{k}\u201d", trailing=False, sep=", ", lit=JSON_LIT)
    if name == "missing_commas":
        return lax(plan, key=json.dumps, trailing=False, sep="\n", lit=JSON_LIT)
    if name == "comments":
        body = json.dumps(plan, indent=2, ensure_ascii=False)
        return body.replace('"steps": [', '"steps": [ // the plan\n/* one step per line */', 1)
    if name == "everything":
        return lax(plan, key=str, trailing=True, sep="\n", lit=PY_LIT)
    raise ValueError(name)


REPAIRS = (
    "trailing_commas",
    "python_literals",
    "python_repr",
    "unquoted_keys",
    "smart_quote_keys",
    "missing_commas",
    "comments",
    "everything",
)


# --------------------------------------------------------------------------- families


def family_shapes() -> list[dict[str, Any]]:
    rng = random.Random(3)
    cases = []
    for seed, steps in SEEDS.items():
        for sh in SHAPES:
            wraps = ["raw", "prose_fence", rng.choice(WRAPS[1:])]
            for wr in dict.fromkeys(wraps):
                cases.append(case(f"{seed}/{sh}/{wr}", "shapes", wrap(wr, shape(sh, steps)), ok(steps)))
    return cases


def family_repairs() -> list[dict[str, Any]]:
    cases = []
    for seed, steps in SEEDS.items():
        for rp in REPAIRS:
            cases.append(
                case(
                    f"{seed}/{rp}", "repairs", wrap("prose", repaired(rp, steps)), ok(steps, "repaired JSON")
                )
            )
    return cases


ALIASES = {
    "depends_on": ("dependencies", "deps", "depends", "dependsOn"),
    "description": ("task", "action", "desc", "instruction", "step"),
    "id": ("step_id", "stepId"),
}


def aliased(step: Step, i: int) -> Step:
    s = full(step)
    out: Step = {}
    out[ALIASES["id"][i % 2]] = s["id"]
    out[ALIASES["description"][i % 5]] = s["description"]
    deps = s["depends_on"]
    # A string where a list belongs, or null for none: both are how models write it.
    out[ALIASES["depends_on"][i % 4]] = ", ".join(deps) if (deps and i % 2) else (deps or None)
    if s["tools"]:
        # a string where a list belongs ("tool" is not an alias: it names a typed tool step's one tool)
        out["tools"] = ", ".join(s["tools"])
    if s["subagent"]:
        out["agent"] = s["subagent"]
    return out


def family_aliases() -> list[dict[str, Any]]:
    cases = []
    for seed, steps in SEEDS.items():
        for offset in range(3):
            body = json.dumps({"steps": [aliased(s, i + offset) for i, s in enumerate(steps)]}, indent=2)
            cases.append(case(f"{seed}/aliases{offset}", "aliases", wrap("fence_json", body), ok(steps)))
        # numbers for ids, in ids and in dependencies
        numbered = [{**s, "id": str(i + 1)} for i, s in enumerate(steps)]
        index = {s["id"]: str(i + 1) for i, s in enumerate(steps)}
        for s in numbered:
            s["depends_on"] = [index[d] for d in s.get("depends_on", [])]
        raw = [
            {**wire_step(s), "id": int(s["id"]), "depends_on": [int(d) for d in s["depends_on"]]}
            for s in numbered
        ]
        cases.append(case(f"{seed}/numeric_ids", "aliases", json.dumps(raw), ok(numbered)))
        # no ids at all: assigned s1..sn, numbered dependencies read positionally
        positional = [
            {**s, "id": f"s{i + 1}", "depends_on": [f"s{index[d]}" for d in s.get("depends_on", [])]}
            for i, s in enumerate(steps)
        ]
        raw = [
            {k: v for k, v in wire_step(s).items() if k != "id"}
            | {"depends_on": [int(index[d]) for d in s.get("depends_on", [])]}
            for s in steps
        ]
        cases.append(
            case(f"{seed}/no_ids", "aliases", json.dumps({"steps": raw}), ok(positional, "assigned ids"))
        )
        # ids padded with whitespace are stripped, nothing else
        padded = [{**wire_step(s), "id": f"  {s['id']} "} for s in steps]
        cases.append(case(f"{seed}/padded_ids", "aliases", json.dumps(padded), ok(steps)))
    return cases


def cut_points(step_text: str) -> dict[str, int]:
    points = {
        "after_brace": 1,
        "mid_key": step_text.index('"description"') + 5,
        "mid_description": step_text.index('"description": "') + 20,
        "before_close": len(step_text) - 1,
    }
    if '"depends_on": ["' in step_text:
        points["mid_deps"] = step_text.index('"depends_on": ["') + 17
    return points


def family_truncated() -> list[dict[str, Any]]:
    cases = []
    for seed, steps in SEEDS.items():
        ws = [wire_step(s) for s in steps]
        for layout in ("wire", "bare_lines"):
            text = (
                json.dumps({"plan_action": "new", "steps": ws})
                if layout == "wire"
                else "\n".join(json.dumps(s) for s in ws)
            )
            last = json.dumps(ws[-1])
            start = text.rindex(last)
            for where, offset in cut_points(last).items():
                cut = "```json\n" + text[: start + offset]
                expect = ok(steps[:-1], "cut off") if len(steps) > 1 else err("cut off")
                cases.append(case(f"{seed}/{layout}/cut_{where}", "truncated", cut, expect))
            if layout == "wire":
                whole = text[: start + len(last)]
                cases.append(case(f"{seed}/cut_after_last_step", "truncated", whole, ok(steps, "cut off")))
                if len(steps) > 1:
                    cases.append(
                        case(
                            f"{seed}/cut_after_comma",
                            "truncated",
                            text[: text.rindex(", {") + 2],
                            ok(steps[:-1], "cut off"),
                        )
                    )
        cases.append(
            case(
                f"{seed}/cut_before_steps",
                "truncated",
                '{"plan_action": "new", "execution_mode": "depend',
                err("no steps were written"),
            )
        )
    return cases


def family_capabilities() -> list[dict[str, Any]]:
    cases = []
    for seed, steps in SEEDS.items():
        names = sorted(
            {t for s in steps for t in full(s)["tools"]}
            | {full(s)["subagent"] for s in steps if full(s)["subagent"]}
        )
        text = wrap("fence_json", shape("wire", steps))
        cases.append(case(f"{seed}/all_known", "capabilities", text, ok(steps), known=names))
        for missing in names:
            uses = {s["id"] for s in steps if missing in full(s)["tools"] or full(s)["subagent"] == missing}
            kept = drop(steps, uses)
            lost_dep = any(d in uses for s in steps if s["id"] not in uses for d in s.get("depends_on", []))
            warns = ["not a known capability"] + (["depended on dropped step"] if lost_dep else [])
            expect = ok(kept, *warns) if kept else err("every step was dropped")
            known = [n for n in names if n != missing] + [missing + "_v2"]  # a near name is not a match
            cases.append(case(f"{seed}/unknown_{missing}", "capabilities", text, expect, known=known))
        if names:
            users = {s["id"] for s in steps if full(s)["tools"] or full(s)["subagent"]}
            kept = drop(steps, users)
            expect = ok(kept, "not a known capability") if kept else err("every step was dropped")
            cases.append(case(f"{seed}/nothing_known", "capabilities", text, expect, known=[]))
    return cases


def family_structure() -> list[dict[str, Any]]:
    cases = []
    for seed, steps in SEEDS.items():
        n = len(steps)
        text = shape("wire", steps)
        cases.append(case(f"{seed}/at_cap", "structure", text, ok(steps), max_steps=n))
        cases.append(
            case(
                f"{seed}/over_cap",
                "structure",
                text,
                err(f"plan has {n} steps, over max_steps={n - 1}"),
                max_steps=n - 1,
            )
        )
        # a self-dependency is removed
        selfdep = [dict(s) for s in steps]
        selfdep[-1] = {**selfdep[-1], "depends_on": [*selfdep[-1].get("depends_on", []), selfdep[-1]["id"]]}
        cases.append(
            case(
                f"{seed}/self_dependency",
                "structure",
                shape("array", selfdep),
                ok(steps, "depended on itself"),
            )
        )
        # a dependency on a step nobody wrote is removed
        dangling = [dict(s) for s in steps]
        dangling[0] = {**dangling[0], "depends_on": ["s99"]}
        cases.append(
            case(f"{seed}/dangling", "structure", shape("wire", dangling), ok(steps, "unknown step 's99'"))
        )
        if n >= 2:
            dup = [dict(s) for s in steps]
            dup[-1] = {**dup[-1], "id": dup[0]["id"], "depends_on": []}
            cases.append(
                case(
                    f"{seed}/duplicate_id",
                    "structure",
                    shape("wire", dup),
                    err(f"duplicate step id {dup[0]['id']!r}"),
                )
            )
            # Close a cycle through the first step: it now waits for the last one. The walk starts at
            # the first step and follows each step's first dependency back to it.
            cyc = [dict(s) for s in steps]
            cyc[0] = {**cyc[0], "depends_on": [cyc[-1]["id"]]}
            path = [cyc[0]["id"]]
            node: Step | None = cyc[-1]
            while node is not None and node["id"] != cyc[0]["id"]:
                path.append(node["id"])
                first = (node.get("depends_on") or [None])[0]
                node = next((s for s in cyc if s["id"] == first), None)
            path.append(cyc[0]["id"])
            if node is not None:  # the first-dependency walk got back to the start
                cases.append(
                    case(
                        f"{seed}/cycle_{len(path) - 1}",
                        "structure",
                        shape("wire", cyc),
                        err("cycle: " + " -> ".join(path)),
                    )
                )
    return cases


FAMILIES: dict[str, Callable[[], list[dict[str, Any]]]] = {
    "shapes": family_shapes,
    "repairs": family_repairs,
    "aliases": family_aliases,
    "truncated": family_truncated,
    "capabilities": family_capabilities,
    "structure": family_structure,
    "handwritten": handwritten,
    "typed": lambda: _typed.typed_family(case, ok, err),
}


def build() -> dict[str, str]:
    """File name -> file text, one JSON case per line."""
    out = {}
    for name, make in FAMILIES.items():
        cases = make()
        out[f"{name}.jsonl"] = "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in cases)
    return out


if __name__ == "__main__":
    for fname, body in build().items():
        (HERE / fname).write_text(body, encoding="utf-8")
        print(f"{fname}: {body.count(chr(10))} cases")
