"""How is a plan written as Python calls read, one step per line?

A plan in the ``calls`` syntax is what a code model writes most readily, in about half the tokens
of the same plan as JSON (no key is written twice, no id is quoted)::

    s1 = search_text(pattern="TODO", path=".")
    s2 = answer(s1, task="give the TODO lines by file")
    s3 = write_file(path="TODO_REPORT.md", content=s2)

Each line is one step: the name on the left is its id, the function its tool, the keyword
arguments its ``args``. A step's name used as a value stands for that step's output
(``content=s2`` is ``"{{s2.output}}"``; ``s2.output`` is read the same), inside an f-string too
(``f"# Report\\n{s2}"``); a step named as a positional argument is a dependency without a place
in the arguments (how an ``answer`` step says what it writes from). A positional literal fills the
tool's parameters in their order when the tool's schema is known. Every step a line names is a
dependency.

The result is the compact plan shape, ``{"steps": [{id, tool, args, depends_on}]}``, which the
plan reader then judges by the same rules as a JSON plan (``reader.read_decision``). Only literals
are evaluated (``ast.literal_eval``): nothing a model writes is executed.

Refused, with the line and the rule: anything but ``name = tool(...)`` or a bare ``tool(...)``
(which gets the next free ``sN``), a name that no earlier line and no earlier plan defines, a
tool that is not offered, an expression that is not a literal, a step name or a reference. A name
written twice, or the name of an earlier plan's step, is passed on as written: the plan reader's
and the plan manager's rules on ids (a duplicate is refused; a pending step may be rewritten, a
finished one never) are the same as for a JSON plan.
Tolerated: blank lines, ``#`` comments, a code fence around the plan, and prose lines before or
after it (a warning names each line skipped). A comment that ends a step's line is what the step
does for the goal, in the model's words (``s1 = get_rate(from_="EUR")  # the euro's rate``): it is
read as the step's description; without one the description is derived from the call.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Collection, Mapping
from typing import Any

from soothe_planner.dag import free_step_id
from soothe_planner.errors import PlanParseError
from soothe_planner.models import clean_text
from soothe_planner.parsing.reader import check_reply_size, reply_byte_cap

__all__ = ["read_plan_calls"]

_FENCE = re.compile(r"^\s*```[\w-]*\s*$")
_LINE_START = re.compile(r"^\s*(?:[A-Za-z_][\w]*\s*=\s*)?[A-Za-z_][\w.]*\s*\(")


def read_plan_calls(
    text: str,
    *,
    tool_schemas: Mapping[str, Mapping[str, Any]] | None = None,
    known_tools: Collection[str] | None = None,
    existing_ids: Collection[str] = (),
    max_steps: int | None = None,
) -> tuple[dict[str, Any], list[str]]:
    """The plan ``text`` holds, as ``{"steps": [...]}``, and the warnings of what was skipped.

    ``known_tools``: the names a line may call (any name when ``None``); ``tool_schemas``: their
    argument schemas, for positional literals; ``existing_ids``: steps of earlier plans, which a
    line may name; ``max_steps`` bounds the text read (a reply far larger than such a plan is refused
    unread).
    """
    check_reply_size(text, reply_byte_cap(max_steps), f"a plan of at most {max_steps or 'a few'} steps")
    text = clean_text(text)
    warnings: list[str] = []
    lines = _plan_lines(text, warnings)
    if not lines:
        raise PlanParseError("no step was written: each step is one line, 's1 = tool(name=value, ...)'", text)
    steps: list[dict[str, Any]] = []
    defined: set[str] = set(existing_ids)
    for number, line in lines:
        step = _read_line(number, line, steps, defined, tool_schemas or {}, known_tools)
        defined.add(step["id"])
        steps.append(step)
    return {"plan_action": "new", "steps": steps}, warnings


def _plan_lines(text: str, warnings: list[str]) -> list[tuple[int, str]]:
    """The lines that hold calls, with their 1-based numbers; a call spread over lines is joined."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if pending is not None:
            pending = (pending[0], pending[1] + "\n" + line)
            if _balanced(pending[1]):
                out.append(pending)
                pending = None
            continue
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or _FENCE.match(line):
            continue
        if not _LINE_START.match(line) and not _statement(stripped):
            warnings.append(f"line {number} is not a step and was skipped: {stripped[:80]!r}")
            continue
        if _balanced(stripped):
            out.append((number, stripped))
        else:
            pending = (number, stripped)
    if pending is not None:
        out.append(pending)  # unbalanced to the end: the line reader reports it
    return out


def _statement(line: str) -> bool:
    """Python that is more than a word or a value (``s1 = 42``, ``a, b = ...``): a step written
    wrongly, reported as such, where prose (which does not parse) is skipped."""
    try:
        tree = ast.parse(line)
    except SyntaxError:
        return False
    return not (len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr)
                and isinstance(tree.body[0].value, ast.Name | ast.Constant))


def _balanced(line: str) -> bool:
    try:
        ast.parse(line)
    except SyntaxError:
        return False
    return True


def _read_line(
    number: int,
    line: str,
    earlier: list[dict[str, Any]],
    defined: set[str],
    schemas: Mapping[str, Mapping[str, Any]],
    known_tools: Collection[str] | None,
) -> dict[str, Any]:
    where = f"line {number} ({line.splitlines()[0][:80]!r})"
    try:
        tree = ast.parse(line)
    except SyntaxError as exc:
        cut = " (the plan was cut off)" if exc.msg and "never closed" in exc.msg else ""
        raise PlanParseError(f"{where} is not a Python call: {exc.msg}{cut}", line) from exc
    if len(tree.body) != 1:
        raise PlanParseError(f"{where}: one step per line", line)
    statement = tree.body[0]
    if isinstance(statement, ast.Assign):
        if len(statement.targets) != 1 or not isinstance(statement.targets[0], ast.Name):
            raise PlanParseError(f"{where}: the left side must be one step name, as in 's1 = ...'", line)
        sid, call = statement.targets[0].id, statement.value
    elif isinstance(statement, ast.Expr):
        sid, call = free_step_id(defined), statement.value
    else:
        raise PlanParseError(f"{where}: a step is 's1 = tool(name=value, ...)'", line)
    if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
        raise PlanParseError(f"{where}: the right side must call a tool by its name, as in 'read_file(path=...)'", line)
    tool = call.func.id
    if known_tools is not None and tool not in known_tools:
        offered = ", ".join(sorted(known_tools))
        raise PlanParseError(f"{where}: {tool!r} is not one of the tools ({offered})", line)
    depends: list[str] = []
    args: dict[str, Any] = {}
    params = list((schemas.get(tool) or {}).get("properties", {}))
    literal_at = 0
    for node in call.args:
        ref = _reference(node, defined)
        if ref is not None:
            _add(depends, ref)
            continue
        if isinstance(node, ast.List | ast.Tuple) and node.elts and all(_reference(e, defined) for e in node.elts):
            for e in node.elts:
                _add(depends, _reference(e, defined) or "")
            continue
        while literal_at < len(params) and params[literal_at] in args:
            literal_at += 1
        if literal_at >= len(params):
            raise PlanParseError(
                f"{where}: a positional argument that is not a step name needs its parameter's name, as in path=...",
                line,
            )
        args[params[literal_at]] = _value(node, defined, depends, where, line)
    for kw in call.keywords:
        if kw.arg is None:
            raise PlanParseError(f"{where}: '**' arguments are not read; name each argument", line)
        args[kw.arg] = _value(kw.value, defined, depends, where, line)
    step: dict[str, Any] = {"id": sid, "tool": tool, "args": args, "depends_on": depends}
    note = _trailing_comment(line)
    if note:
        step["description"] = note[:DESCRIPTION_CHARS]
    return step


DESCRIPTION_CHARS = 200
"""The longest description a step's comment gives (a label, not a task)."""


def _trailing_comment(line: str) -> str:
    """The words of the ``#`` comment ending a step's ``line`` (a ``#`` inside a string is text), or ''."""
    if "#" not in line:
        return ""
    try:
        comments = [t.string for t in tokenize.generate_tokens(io.StringIO(line).readline) if t.type == tokenize.COMMENT]
    except (tokenize.TokenError, SyntaxError):
        return ""
    return " ".join(comments[-1].lstrip("#").split()) if comments else ""


def _add(names: list[str], name: str) -> None:
    if name and name not in names:
        names.append(name)


def _reference(node: ast.expr, defined: set[str]) -> str | None:
    """The step ``node`` names (``s1`` or ``s1.output``), if it names one that exists."""
    if isinstance(node, ast.Name) and node.id in defined:
        return node.id
    if (isinstance(node, ast.Attribute) and node.attr == "output" and isinstance(node.value, ast.Name)
            and node.value.id in defined):
        return node.value.id
    return None


def _value(node: ast.expr, defined: set[str], depends: list[str], where: str, line: str) -> Any:
    """An argument's value: a literal, a step's output (``{{sN.output}}``), or an f-string of both."""
    ref = _reference(node, defined)
    if ref is not None:
        _add(depends, ref)
        return "{{" + ref + ".output}}"
    if isinstance(node, ast.JoinedStr):
        parts: list[str] = []
        for piece in node.values:
            if isinstance(piece, ast.Constant) and isinstance(piece.value, str):
                parts.append(piece.value)
            elif isinstance(piece, ast.FormattedValue) and (inner := _reference(piece.value, defined)):
                _add(depends, inner)
                parts.append("{{" + inner + ".output}}")
            else:
                raise PlanParseError(f"{where}: an f-string may hold step names only, as in f\"...{{s1}}...\"", line)
        return "".join(parts)
    if isinstance(node, ast.Name | ast.Attribute):
        name = node.id if isinstance(node, ast.Name) else ast.unparse(node)
        known = ", ".join(sorted(defined)) or "none yet"
        raise PlanParseError(
            f"{where}: {name!r} is not a step defined on an earlier line (defined: {known}); "
            "a text value needs quotes", line,
        )
    if isinstance(node, ast.List | ast.Tuple) and any(_reference(e, defined) for e in node.elts):
        return [_value(e, defined, depends, where, line) for e in node.elts]
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise PlanParseError(
            f"{where}: {ast.unparse(node)[:60]!r} is not a literal (text, number, list) or a step name", line
        ) from exc
