"""Is this set of steps a runnable DAG? The whole-batch rules ``PlanDAG`` and ``PlanManager`` apply.

``validate_steps`` checks a batch of steps whole, before anything is spawned (ids, dependencies,
cycles, caps, allow-list, and for typed tool steps their args and references: ``typed_steps``)
and returns every problem as a message that names the step, the rule and the way out; it never repairs anything — repairing a model's mistakes is the lenient parser's
job, here a malformed plan is an error. ``find_cycle`` is iterative: a 100,000-step chain must not
hit Python's recursion limit.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from soothe_planner.dag.typed_steps import ToolDescriptions, typed_step_errors
from soothe_planner.models import Capability, PlanStep, StepAction

__all__ = ["StepLike", "ancestors", "find_cycle", "listing", "validate_steps"]

StepLike = StepAction | PlanStep
LISTED = 8
_PAST = {"failed": "failed", "skipped": "was skipped"}
_END = object()


def listing(ids: Iterable[str]) -> str:
    """Ids for a message: the first ``LISTED`` of them, then an ellipsis; ``none`` when empty."""
    items = list(islice(ids, LISTED + 1))
    shown = ", ".join(items[:LISTED])
    return shown + (", …" if len(items) > LISTED else "") if items else "none"


def ancestors(depends_on: Mapping[str, Iterable[str]], step_id: str) -> set[str]:
    """Every step ``step_id`` depends on, directly or not, in the graph ``depends_on`` (id -> its
    dependencies); an id missing from the mapping has none."""
    return reachable(depends_on.get(step_id, ()), depends_on)


def reachable(start: Iterable[str], depends_on: Mapping[str, Iterable[str]]) -> set[str]:
    """``start`` and every step those depend on, directly or not, in the graph ``depends_on``."""
    seen: set[str] = set()
    stack = list(start)
    while stack:
        cur = stack.pop()
        if cur not in seen:
            seen.add(cur)
            stack.extend(depends_on.get(cur, ()))
    return seen


def find_cycle(
    adjacency: Mapping[str, Iterable[str]], roots: Iterable[str] | None = None
) -> list[str] | None:
    """One cycle of ``adjacency`` as a closed path ``[a, b, …, a]`` (edges followed as given), or None.

    Targets missing from ``adjacency`` are leaves. With ``roots`` only the part reachable from them
    is searched: enough when the rest of the graph is known to be acyclic.
    """
    done: set[str] = set()
    on_path: dict[str, int] = {}  # node -> position in ``path``, for the current DFS branch
    for root in adjacency if roots is None else roots:
        if root in done or root not in adjacency:
            continue
        path = [root]
        on_path[root] = 0
        stack: list[Iterator[str]] = [iter(adjacency[root])]
        while stack:
            nxt: Any = next(stack[-1], _END)
            if nxt is _END:
                stack.pop()
                finished = path.pop()
                del on_path[finished]
                done.add(finished)
            elif nxt in on_path:
                return [*path[on_path[nxt] :], nxt]
            elif nxt not in done and nxt in adjacency:
                on_path[nxt] = len(path)
                path.append(nxt)
                stack.append(iter(adjacency[nxt]))
    return None


class _MergedDeps(Mapping[str, Sequence[str]]):
    """Dependencies of the graph as it would be after a batch lands: the batch wins over ``existing``."""

    def __init__(self, own: Mapping[str, StepLike], existing: Mapping[str, PlanStep]) -> None:
        self._own = own
        self._existing = existing

    def __getitem__(self, key: str) -> Sequence[str]:
        step = self._own.get(key)
        if step is not None:  # self-dependencies are reported on their own, not again as a cycle
            return [d for d in step.depends_on if d != key]
        return self._existing[key].depends_on

    def __iter__(self) -> Iterator[str]:
        yield from self._own
        yield from (k for k in self._existing if k not in self._own)

    def __len__(self) -> int:
        return len(self._own) + sum(1 for k in self._existing if k not in self._own)

    def __contains__(self, key: object) -> bool:
        return key in self._own or key in self._existing


def validate_steps(
    steps: Sequence[StepLike],
    *,
    existing: Mapping[str, PlanStep] | None = None,
    max_steps: int | None = None,
    allowed_capabilities: Collection[str] | None = None,
    superseded: Collection[str] = (),
    allow_refresh: bool = True,
    aliases: Mapping[str, str] | None = None,
    capabilities: Mapping[str, Capability] | None = None,
) -> list[str]:
    """Every rule ``steps`` break when added to ``existing``; an empty list means valid. Mutates nothing.

    A dependency may name a step of the batch or a node of ``existing``. A batch step whose id is a
    pending node of ``existing`` refreshes it (``allow_refresh``); any other reuse of an existing id
    is an error. ``superseded`` ids are about to be retired, so depending on them is an error.
    ``aliases`` maps renamed ids to the ids the caller gave, for the messages. ``capabilities``
    (by name) lets typed tool steps be checked against their tools' argument schemas and every
    description against the tools' own descriptions; references in args are checked regardless.
    """
    existing = existing or {}
    aliases = aliases or {}

    def q(step_id: str) -> str:
        given = aliases.get(step_id)
        return f"'{step_id}'" + (f" (given as '{given}')" if given is not None else "")

    errors: list[str] = []
    if max_steps is not None and len(steps) > max_steps:
        errors.append(
            f"plan has {len(steps)} steps, over max_plan_steps={max_steps} "
            "(split the work across iterations, or raise max_plan_steps)"
        )
    own: dict[str, StepLike] = {}
    first_pos: dict[str, int] = {}
    reported: set[str] = set()
    for pos, step in enumerate(steps, start=1):
        if step.id in own:
            if step.id not in reported:
                reported.add(step.id)
                errors.append(
                    f"duplicate step id {q(step.id)} (steps #{first_pos[step.id]} and #{pos}; give each step its own id)"
                )
            continue
        own[step.id] = step
        first_pos[step.id] = pos
        node = existing.get(step.id)
        if node is not None and (not allow_refresh or node.status != "pending"):
            errors.append(
                f"step {q(step.id)} is already in the plan as a {node.status} step "
                "(give the new step a fresh id; only pending steps may be refreshed)"
            )
    allowed = None if allowed_capabilities is None else set(allowed_capabilities)
    # When every dependency names an earlier step of the batch (how plans are usually written), the
    # batch order is a topological order: no rule about dependencies can fire and there is no cycle.
    all_earlier = True
    for step in own.values():
        deps = step.depends_on
        pos = first_pos[step.id]
        earlier = all(first_pos.get(d, pos) < pos for d in deps)
        all_earlier = all_earlier and earlier
        pending = step.status == "pending" if isinstance(step, PlanStep) else True
        for dep in () if earlier else dict.fromkeys(deps):
            if dep == step.id:
                errors.append(f"step {q(step.id)} depends on itself (remove {q(dep)} from its depends_on)")
            elif dep in own:
                continue
            elif dep in superseded:
                errors.append(
                    f"step {q(step.id)} depends on step '{dep}', which this replan supersedes "
                    f"(list '{dep}' in the decision to keep it, or drop the dependency)"
                )
            elif dep in existing:
                status = existing[dep].status
                if pending and status in ("failed", "skipped"):
                    errors.append(
                        f"step {q(step.id)} depends on step '{dep}', which {_PAST[status]} and will never complete "
                        "(depend on a completed step, or plan a new step to redo that work)"
                    )
            else:
                errors.append(
                    f"step {q(step.id)} depends on unknown step '{dep}' "
                    f"(not in this decision nor the plan; drop the dependency or add step '{dep}')"
                )
        if allowed is not None:
            for tool in step.tools:
                if tool not in allowed:
                    errors.append(
                        f"step {q(step.id)} uses tool '{tool}' which is not allowed "
                        f"(allowed: {listing(sorted(allowed))})"
                    )
            if step.subagent is not None and step.subagent not in allowed:
                errors.append(
                    f"step {q(step.id)} uses subagent '{step.subagent}' which is not allowed "
                    f"(allowed: {listing(sorted(allowed))})"
                )
    merged = _MergedDeps(own, existing)
    descriptions = ToolDescriptions(capabilities) if capabilities else None
    for step in own.values():
        if step.tool is None and not step.args and descriptions is None:
            continue  # the common untyped step: nothing here applies
        errors.extend(
            typed_step_errors(
                step, q(step.id), known_ids=merged, deps_of=merged, allowed=allowed,
                capabilities=capabilities, tool_descriptions=descriptions,
            )
        )
    cycle = None if all_earlier else find_cycle(merged, roots=list(own))
    if cycle is not None:
        # Start the loop at its earliest step of the batch, so the same plan always gives the same message.
        ring = cycle[:-1]
        start = min(range(len(ring)), key=lambda i: first_pos.get(ring[i], len(steps) + 1))
        ring = ring[start:] + ring[:start]
        renamed = [f"'{aliases[s]}' -> '{s}'" for s in ring if s in aliases]
        note = f"; renamed: {', '.join(renamed)}" if renamed else ""
        errors.append(
            f"cycle: {' -> '.join([*ring, ring[0]])} "
            f"(each step depends on the next; remove one of these dependencies{note})"
        )
    return errors
