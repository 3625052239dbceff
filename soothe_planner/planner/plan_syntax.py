"""In which syntax does a model write its plan: JSON, or one Python call per step?

A plan is most of what a planning call writes, and on a small local model every written token
costs about a tenth of a second. The compact JSON plan (``{"steps": [{"id": ..., "tool": ...,
"args": {...}, "depends_on": [...]}]}``) spends half its tokens on keys, quotes and ids; the same
plan as calls (``parsing.plan_calls``) does not::

    s1 = search_text(pattern="TODO", path=".")
    s2 = answer(s1, task="give the TODO lines by file")
    s3 = write_file(path="TODO_REPORT.md", content=s2)

``planner.plan_syntax`` chooses: ``json``, ``calls``, or ``auto`` — ``calls`` when the model
declares it (its ``metadata["soothe_plan_syntax"]``) and the compact profile is in force, else
``json``. The embedded model declares ``calls``: on it a plan in calls is about 40% of the JSON
plan's tokens and written in about half the time (``bench/RESULTS.md`` §7), and the goal suite
ends the same (§6); ``plan_syntax: json`` in the config keeps JSON plans. Only the loop's
plan-generation call uses it, and only
when every capability offered is a tool named like a Python function (a subagent step, or a tool
called ``web-search``, has no call form); every other call, and a plan revised through
``revise_plan``, stays JSON.

A JSON plan is held to its shape by the server's grammar built from the JSON schema. A plan in
calls is held by a GBNF grammar (``plan_grammar``), sent in the request body's ``grammar`` field
to servers that take one (the model declares it: ``metadata["soothe_grammar"] == "gbnf"``, as the
embedded llama.cpp server does). The grammar allows only ``sN = tool(...)`` lines inside a
```` ```python ```` fence, each tool with its own parameter names and each line with an optional
``  # comment`` (what the step does, read as its description), and bounds every string, list,
comment and the number of lines, so the output always ends. The fence is there for the model's sake: held to
bare lines, the 1.5B wanted to close a fence after its last step, could not, and wrote two more
steps instead (an answer "naming the file written", another "reading" it); allowed its fence, it
closes it where the plan ends. What a grammar cannot check (a name used before it is defined, a missing required
argument) the reader and the plan's validator refuse, and the model is re-asked with the error.
A model without a grammar writes the same syntax from the prompt alone, read by the same reader.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel

from soothe_planner.models import Capability
from soothe_planner.parsing import read_plan_calls

__all__ = [
    "GRAMMAR_KEY",
    "PLAN_SYNTAX_KEY",
    "PlanSyntax",
    "calls_text_reader",
    "plan_grammar",
    "resolve_plan_syntax",
    "with_grammar",
]

PlanSyntax = Literal["json", "calls"]
PLAN_SYNTAX_KEY = "soothe_plan_syntax"
"""The key under which a chat model's ``metadata`` declares the plan syntax it wants for ``auto``."""
GRAMMAR_KEY = "soothe_grammar"
"""The key under which a chat model's ``metadata`` says its server takes a GBNF ``grammar`` field."""

STRING_CHARS = 400
"""The longest text value a grammar-held plan may write (an ``answer`` task, a pattern, a path)."""
LIST_ITEMS = 16
NOTE_CHARS = 120
"""The longest comment a grammar-held line may end with: what the step does, read as its description."""
_RULE_SAFE = re.compile(r"[^a-z0-9]+")


def resolve_plan_syntax(configured: str, model: object, profile: str) -> PlanSyntax:
    """``configured`` itself, or for ``auto`` the syntax ``model`` declares under the compact profile."""
    if configured in ("json", "calls"):
        return configured  # type: ignore[return-value]
    if configured != "auto":
        raise ValueError(f"plan syntax must be 'auto', 'json' or 'calls', got {configured!r}")
    if profile != "compact":
        return "json"
    metadata = getattr(model, "metadata", None)
    declared = metadata.get(PLAN_SYNTAX_KEY) if isinstance(metadata, Mapping) else None
    return "calls" if declared == "calls" else "json"


def takes_grammar(model: object) -> bool:
    metadata = getattr(model, "metadata", None)
    return isinstance(metadata, Mapping) and metadata.get(GRAMMAR_KEY) == "gbnf"


def _literal(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _params(schema: Mapping[str, Any] | None) -> list[str] | None:
    """A tool's parameter names, or None when it declares no schema at all (its arguments are
    unknown, so any name may be written; a schema with no properties takes none)."""
    if schema is None:
        return None
    props = schema.get("properties") or {}
    return [name for name in props if isinstance(name, str) and name.isidentifier()]


def plan_grammar(tools: Sequence[tuple[str, Sequence[str] | None]], max_steps: int, existing_ids: Collection[str] = (),
                 *, ends_with: str | None = None) -> str:
    """A GBNF grammar for a plan of 1..``max_steps`` lines ``sN = tool(...)`` over ``tools``
    (``(name, parameter names)`` pairs, the model step's ``answer`` among them; ``None`` for a tool
    that declares no schema, which may then take any keyword); a step may also name an earlier
    plan's step (``existing_ids``, those written as identifiers).

    ``ends_with`` (one of ``tools``): the last line must call it. The planner asks for the write
    tool when the goal names a file that nothing has written yet (``plan_rules.write_owed``): the
    plan rules refuse a plan without that write anyway, and each refusal costs a re-ask."""
    earlier = sorted(i for i in existing_ids if i.isidentifier() and not re.fullmatch(r"s[1-9][0-9]?", i))
    rules = [f"t-{_RULE_SAFE.sub('-', name.lower())}-{i}" for i, (name, _) in enumerate(tools)]
    names = [name for name, _ in tools]
    n = max(1, max_steps)
    if ends_with is not None and ends_with not in names:
        raise ValueError(f"plan_grammar: ends_with {ends_with!r} is not among the tools {sorted(names)}")
    root = (f'root ::= "```python\\n" step{{0,{n - 1}}} last "```"' if ends_with is not None
            else f'root ::= "```python\\n" step{{1,{n}}} "```"')
    lines = [
        root,
        *([f'last ::= sid " = " {rules[names.index(ends_with)]} note? "\\n"'] if ends_with is not None else []),
        'step ::= sid " = " call note? "\\n"',
        f'note ::= "  # " [^\\n]{{1,{NOTE_CHARS}}}',
        'sid ::= "s" [1-9] [0-9]?' + "".join(f" | {_literal(i)}" for i in earlier),
        "call ::= " + " | ".join(rules),
        'deps ::= sid (", " sid){0,7}',
        'value ::= string | fstring | number | "True" | "False" | "None" | sid | list',
        f'list ::= "[" (value (", " value){{0,{LIST_ITEMS - 1}}})? "]"',
        f'string ::= "\\"" char{{0,{STRING_CHARS}}} "\\""',
        'char ::= [^"\\\\\\n] | "\\\\" ["\\\\nt]',
        f'fstring ::= "f\\"" (fchar | "{{" sid "}}"){{0,{STRING_CHARS}}} "\\""',
        'fchar ::= [^"\\\\\\n{}] | "\\\\" ["\\\\nt]',
        'number ::= "-"? [0-9]{1,9} ("." [0-9]{1,6})?',
    ]
    if any(params is None for _, params in tools):
        lines.append("ident ::= [a-zA-Z_] [a-zA-Z0-9_]{0,31}")
    for rule, (name, params) in zip(rules, tools, strict=True):
        if params is None or params:
            kw = f"{rule}-kw"
            keys = "ident" if params is None else "(" + " | ".join(_literal(p) for p in params) + ")"
            lines.append(f'{kw} ::= {keys} "=" value')
            body = f'(deps (", " {kw})* | {kw} (", " {kw})*)?'
        else:
            body = "deps?"
        lines.append(f"{rule} ::= {_literal(name + '(')} {body} \")\"")
    return "\n".join(lines) + "\n"


def grammar_tools(capabilities: Sequence[Capability], model_step: str) -> list[tuple[str, list[str] | None]]:
    """The (name, parameters) pairs a plan's grammar offers: every tool, and the model step."""
    out = [(c.name, _params(c.args_schema)) for c in capabilities if c.kind == "tool" and c.name.isidentifier()]
    if all(name != model_step for name, _ in out):
        out.append((model_step, ["task"]))
    return out


_GRAMMAR_COPIES: dict[tuple[int, str], tuple[BaseChatModel, BaseChatModel]] = {}
_MAX_COPIES = 32


def with_grammar(model: BaseChatModel, grammar: str) -> BaseChatModel:
    """``model`` sending ``grammar`` in its request body (for a model that declares it takes one);
    a copy made once per (model, grammar) and reused."""
    if not takes_grammar(model):
        return model
    key = (id(model), grammar)
    hit = _GRAMMAR_COPIES.get(key)
    if hit is not None and hit[0] is model:
        return hit[1]
    extra = getattr(model, "extra_body", None)
    copy = model.model_copy(update={"extra_body": {**(extra if isinstance(extra, dict) else {}), "grammar": grammar}})
    if len(_GRAMMAR_COPIES) >= _MAX_COPIES:
        _GRAMMAR_COPIES.clear()
    _GRAMMAR_COPIES[key] = (model, copy)
    return copy


def calls_text_reader(
    read_json: Callable[[Mapping[str, Any], list[str]], Any],
    *,
    tool_schemas: Mapping[str, Mapping[str, Any]],
    known_tools: Collection[str] | None,
    existing_ids: Collection[str],
    max_steps: int,
) -> Callable[[str], Any]:
    """A reader of plan text in the calls syntax: the lines read into the compact JSON shape, then
    ``read_json`` (the JSON plan's own reader and repairs), with the lines' warnings carried on."""

    def read(text: str) -> Any:
        data, warnings = read_plan_calls(text, tool_schemas=tool_schemas, known_tools=known_tools,
                                         existing_ids=existing_ids, max_steps=max_steps)
        return read_json(data, warnings)

    return read
