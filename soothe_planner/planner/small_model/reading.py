"""Which files did the run's searches find, and which of them did a step read?

A search returns the lines that hold its pattern, each labelled ``path:N:``; the answer a goal asks
for is often in the lines around them, or in another file the search also found. Measured on the
embedded 1.5B, answers made from search lines alone were the commonest false successes left: the
first file of several that mention a decision named as the one that records it; the owner of
another protocol, read from a file the search did not point to; a checklist written from the one
line of a runbook the search returned. So, with the small-model rules, an answer whose evidence
includes a search is not done until the files that search found, the first ``READ_AT_MOST`` in the
order found, were read with the tool that reads one file (``unread_hits``); the planner prescribes
that reading when the model's every re-plan is refused (``prescribed.prescribed_reading``). A file
is exempt: what a file is made of is often the lines themselves (a summary of TODO lines by file),
and its content meets the second reading (``crosscheck``); so are a count (what a tool counted is
checked elsewhere) and a run offered no tool that reads one file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from soothe_planner.dag import ancestors
from soothe_planner.deliverable import Deliverable
from soothe_planner.models import AgentDecision, Capability, PlanStep, StepAction, StepResult
from soothe_planner.planner.contract import LINE_LABEL, path_key

__all__ = ["READ_AT_MOST", "Searched", "reader_of", "searched", "unread_hits"]

Step = PlanStep | StepAction
READ_AT_MOST = 3
"""How many of the files a search found (in the order found) must be read, and are read when prescribed."""


def reader_of(capabilities: Mapping[str, Capability] | None) -> str | None:
    """The offered tool that reads one file by its path: read-only, counting nothing, ``path`` its one
    required argument (the built-in ``read_file``, or a user's tool of that shape); None if none is."""
    for cap in (capabilities or {}).values():
        schema = cap.args_schema or {}
        if cap.kind == "tool" and cap.read_only and not cap.counts and not cap.writes_path_arg \
                and schema.get("required") == ["path"]:
            return cap.name
    return None


class Searched(NamedTuple):
    """What the run's completed searches found and its completed reads covered."""

    found: list[str]  # the files the searches found lines in, in the order found, each once
    searches: list[str]  # the ids of the searches that found lines
    reads: list[str]  # the ids of the completed reads
    read: set[str]  # the files those reads read


def searched(
    nodes: Sequence[Step], results: Sequence[StepResult], reader: str, among: set[str] | None = None
) -> Searched:
    """The files the completed searches (``among`` those ids, if given) found, and what was read."""
    ok = {r.step_id for r in results if r.success}
    done = {n.id for n in nodes if getattr(n, "status", "completed") == "completed" and n.id in ok}
    reads = [n for n in nodes if n.tool == reader and n.id in done]
    found: dict[str, None] = {}
    searches: list[str] = []
    for r in results:
        if not r.success or r.step_id not in done or not isinstance(r.outcome.get("lines"), list):
            continue
        if among is not None and r.step_id not in among:
            continue
        hits = [path_key(m.group("path")) for m in LINE_LABEL.finditer(r.output)]
        if hits:
            searches.append(r.step_id)
        found.update(dict.fromkeys(h for h in hits if h))
    return Searched(list(found), searches, [n.id for n in reads],
                    {path_key((n.args or {}).get("path")) for n in reads})


def unread_hits(
    deliverable: Deliverable | None, decision: AgentDecision | None, nodes: Sequence[Step],
    results: Sequence[StepResult], capabilities: Mapping[str, Capability] | None,
) -> list[str]:
    """The files the answer's searches found (the first ``READ_AT_MOST``) that no step read (see the module docstring)."""
    if deliverable is None or deliverable.kind != "answer" or deliverable.every_match or decision is None:
        return []
    reader = reader_of(capabilities)
    if reader is None:
        return []
    graph = {n.id: n.depends_on for n in nodes}
    needed = {d for s in decision.steps for d in s.depends_on}
    finals = [s.id for s in decision.steps if s.id not in needed]
    evidence = set().union(*(ancestors(graph, f) for f in finals)) if finals else set()
    seen = searched(nodes, results, reader, among=evidence)
    return [f for f in seen.found[:READ_AT_MOST] if f not in seen.read]
