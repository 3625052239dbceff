"""How is a step DAG shown to a model (compact text) and to a person (a Mermaid diagram)?

Text for prompts is one line per step, ``s2 [completed] Read the config <- s1`` (a typed tool
step adds its call: ``via read_file {"path": "a.toml"}``, so a replan sees which arguments failed),
with a short result excerpt under finished steps (the error for failed and skipped ones, and the last error of
a step waiting for a retry). Step outputs are
folded onto one line so that an output can never pose as another step's line. When a budget is
given, the text gives way in an order that keeps what the planner decides with: the longest
excerpts are cut first (all cut to one common length), then excerpts go, then finished steps are
folded into one line, then descriptions of unfinished steps are shortened (a typed step's call goes with the last
of its description), then the folded line loses its list of ids. The ids and statuses
of unfinished steps are never dropped, even if that leaves the text over budget: a planner that
cannot see what is still pending plans it again.

Mermaid labels are escaped with ``#code;`` entities, so a description holding quotes or brackets
cannot break the diagram; statuses become style classes.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

from soothe_planner.models import PlanStep

__all__ = ["dag_prompt", "mermaid"]

EXCERPT = 160
LABEL = 60
CALL = 120
"""Characters of a typed step's args shown on its line."""
_MIN_USEFUL_EXCERPT = 12

_STYLES = {
    "pending": "fill:#f4f4f4,stroke:#999,color:#333",
    "in_progress": "fill:#fff3cd,stroke:#d39e00,color:#333",
    "completed": "fill:#d4edda,stroke:#28a745,color:#155724",
    "failed": "fill:#f8d7da,stroke:#dc3545,color:#721c24",
    "skipped": "fill:#e2e3e5,stroke:#6c757d,color:#383d41,stroke-dasharray:4 2",
}
# Mermaid reads ``#code;`` entities inside quoted labels; '#' itself is encoded too, so codes survive.
_ESCAPES = str.maketrans({ch: f"#{ord(ch)};" for ch in '#"[](){}<>|`'})


def one_line(text: str) -> str:
    return " ".join(text.split())


def cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: limit - 1] + "…" if limit > 0 else ""


def call_text(node: PlanStep) -> str:
    """A typed step's call on one line, ``read_file {"path": "a.toml"}``; empty for any other step."""
    if node.tool is None:
        return ""
    return f"{node.tool} {cut(one_line(json.dumps(node.args, ensure_ascii=False, default=str)), CALL)}"


def _head(node: PlanStep, description: str, *, with_call: bool = True) -> str:
    deps = f" <- {', '.join(node.depends_on)}" if node.depends_on else ""
    desc = one_line(description)
    call = call_text(node) if with_call else ""
    return f"{node.id} [{node.status}]{' ' + desc if desc else ''}{' via ' + call if call else ''}{deps}"


def _excerpt(node: PlanStep) -> str:
    r = node.result
    if r is None:
        return ""
    if r.success:
        shown = r.output or (json.dumps(r.outcome, default=str) if r.outcome else "(no output)")
        return "result: " + one_line(shown)
    return "error: " + one_line(r.error or r.error_type or "failed")


def _render(order: Sequence[PlanStep], heads: dict[str, str], excerpts: dict[str, str], limit: int) -> str:
    lines = []
    for n in order:
        lines.append(heads[n.id])
        ex = excerpts.get(n.id)
        if ex and limit > 0:
            lines.append("    " + cut(ex, limit))
    return "\n".join(lines)


def dag_prompt(
    order: Sequence[PlanStep], max_chars: int | None = None, *, shown_elsewhere: Collection[str] = ()
) -> str:
    """``order`` (dependencies first) as prompt text, within ``max_chars`` where the rules above allow.

    Steps in ``shown_elsewhere`` get no excerpt: the prompt carries their results in full elsewhere.
    """
    if not order:
        return "(no steps yet)"
    heads = {n.id: _head(n, n.description) for n in order}
    # A pending step that holds a result is waiting for a retry: its last error is worth showing.
    excerpts = {
        n.id: ex if n.finished else f"previous attempt {ex}"
        for n in order
        if n.id not in shown_elsewhere and (ex := _excerpt(n))
    }
    text = _render(order, heads, excerpts, EXCERPT)
    if max_chars is None or len(text) <= max_chars:
        return text
    # Water-fill: the largest common excerpt length that fits; only excerpts longer than it are cut.
    lo, hi = 0, EXCERPT
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(_render(order, heads, excerpts, mid)) <= max_chars:
            lo = mid
        else:
            hi = mid - 1
    if lo >= _MIN_USEFUL_EXCERPT:
        return _render(order, heads, excerpts, lo)
    text = _render(order, heads, {}, 0)
    if len(text) <= max_chars:
        return text
    unfinished = [n for n in order if not n.finished]
    done = [n.id for n in order if n.finished]
    fold = f"({len(done)} finished steps omitted: {', '.join(done)})" if done else ""
    if len(fold) > max_chars // 3:
        fold = f"({len(done)} finished steps omitted)"
    limit = LABEL * 2
    while True:
        lines = [_head(n, cut(one_line(n.description), limit), with_call=limit > 0) for n in unfinished]
        text = "\n".join([fold, *lines] if fold else lines)
        if len(text) <= max_chars:
            return text
        if limit == 0:
            if done and fold != (short := f"({len(done)} finished steps omitted)"):
                fold = short  # the ids of finished steps are the last thing worth keeping
                continue
            return text
        limit //= 2


def mermaid(nodes: Sequence[PlanStep]) -> str:
    """A ``flowchart TD``; edges point from a dependency to its dependent."""
    ids = {n.id: f"n{i}" for i, n in enumerate(nodes)}
    lines = ["flowchart TD"]
    for n in nodes:
        label = f"{n.id}: {cut(one_line(n.description), LABEL)}".translate(_ESCAPES)
        lines.append(f'    {ids[n.id]}["{label}"]:::{n.status}')
    for n in nodes:
        lines.extend(f"    {ids[dep]} --> {ids[n.id]}" for dep in n.depends_on)
    lines.extend(f"    classDef {status} {style}" for status, style in _STYLES.items())
    return "\n".join(lines)
