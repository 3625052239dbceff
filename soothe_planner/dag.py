"""Is this set of steps a runnable DAG, and which of its steps may run now?

Two halves. ``validate_steps`` checks a batch of steps whole, before anything is spawned (ids,
dependencies, cycles, caps, allow-list) and returns every problem as a message that names the
step, the rule and the way out; it never repairs anything — repairing a model's mistakes is the
lenient parser's job, here a malformed plan is an error. ``PlanDAG`` holds the graph mechanics:
nodes, child lists, a counter of unmet dependencies per node and an insertion-ordered ready set,
so that a whole run (add, take ready, complete, repeat) costs O(V+E) in total rather than a scan
of the graph per step. Failure propagation (``block``) skips exactly the unfinished descendants
of a failed step and records why. Every traversal is iterative: a 100,000-step chain must not hit
Python's recursion limit.

Goal-level policy (renaming colliding ids, refreshing pending steps, retries, history, rendering)
lives in ``plan_manager.py``; this module knows nothing about iterations.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

from soothe_planner.errors import ConfigError, PlanValidationError
from soothe_planner.models import FINISHED_STATUSES, PlanStep, StepAction, StepResult

__all__ = ["PlanDAG", "blocked_result", "find_cycle", "validate_steps"]

StepLike = StepAction | PlanStep
_LISTED = 8
_PAST = {"failed": "failed", "skipped": "was skipped"}
_END = object()


def _listing(ids: Iterable[str]) -> str:
    items = list(islice(ids, _LISTED + 1))
    shown = ", ".join(items[:_LISTED])
    return shown + (", …" if len(items) > _LISTED else "") if items else "none"


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
) -> list[str]:
    """Every rule ``steps`` break when added to ``existing``; an empty list means valid. Mutates nothing.

    A dependency may name a step of the batch or a node of ``existing``. A batch step whose id is a
    pending node of ``existing`` refreshes it (``allow_refresh``); any other reuse of an existing id
    is an error. ``superseded`` ids are about to be retired, so depending on them is an error.
    ``aliases`` maps renamed ids to the ids the caller gave, for the messages.
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
                        f"(allowed: {_listing(sorted(allowed))})"
                    )
            if step.subagent is not None and step.subagent not in allowed:
                errors.append(
                    f"step {q(step.id)} uses subagent '{step.subagent}' which is not allowed "
                    f"(allowed: {_listing(sorted(allowed))})"
                )
    cycle = None if all_earlier else find_cycle(_MergedDeps(own, existing), roots=list(own))
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


def blocked_result(step_id: str, failed_id: str, via: str) -> StepResult:
    """The result recorded for a step that can never run because ``failed_id`` failed."""
    outcome = {"blocked_by": failed_id} if via == failed_id else {"blocked_by": failed_id, "via": via}
    return StepResult(
        step_id=step_id,
        success=False,
        error=f"blocked: depends on failed step '{failed_id}'",
        error_type="blocked",
        outcome=outcome,
        attempt=0,
    )


_SETTLED = ("status", "result", "attempts")


def _set_status(node: PlanStep, status: str) -> None:
    """``node.status = status``, minus pydantic's per-assignment dispatch (it is the hot path of a run).

    Exactly what assignment does for these models (``validate_assignment`` is off): store the value
    and mark the field as set.
    """
    node.__dict__["status"] = status
    node.__pydantic_fields_set__.add("status")


def _settle(node: PlanStep, status: str, result: StepResult) -> None:
    """Record an attempt's outcome: status, result and one more attempt, as plain assignment would."""
    state = node.__dict__
    state["status"] = status
    state["result"] = result
    state["attempts"] += 1
    node.__pydantic_fields_set__.update(_SETTLED)


def _as_node(step: StepLike, iteration: int) -> PlanStep:
    if isinstance(step, PlanStep):
        # Shallow copy with fresh lists: results are never mutated after they are recorded, so they are shared.
        return step.model_copy(
            update={"depends_on": list(dict.fromkeys(step.depends_on)), "tools": list(step.tools)}
        )
    # Validating a plain dict (pydantic-core) measured faster than model_construct, and stays checked.
    # Fields left at their defaults are not passed: fewer to validate, and a smaller node (its set of
    # explicitly given fields is the largest part of it after the field values).
    fields: dict[str, Any] = {"id": step.id, "description": step.description}
    if step.depends_on:
        fields["depends_on"] = list(dict.fromkeys(step.depends_on))
    if step.tools:
        fields["tools"] = step.tools
    if step.subagent is not None:
        fields["subagent"] = step.subagent
    if step.expected_output:
        fields["expected_output"] = step.expected_output
    if step.execution_hint != "auto":
        fields["execution_hint"] = step.execution_hint
    if iteration:
        fields["iteration"] = iteration
    return PlanStep.model_validate(fields)


class PlanDAG:
    """The step graph with an incremental ready set.

    Invariants: ``_unmet[n]`` counts dependencies of ``n`` that are not completed; ``_ready`` holds,
    in the order they became ready, exactly the pending nodes whose ``_unmet`` is 0. Nodes are live
    objects: read them, change them only through these methods.
    """

    def __init__(self, steps: Sequence[StepLike] = ()) -> None:
        self.nodes: dict[str, PlanStep] = {}
        self._children: dict[str, list[str]] = {}  # dependents, in the order they were linked
        self._unmet: dict[str, int] = {}
        self._ready: dict[str, None] = {}
        self._unfinished = 0
        if steps:
            self.add(steps)

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, step_id: object) -> bool:
        return step_id in self.nodes

    def node(self, step_id: str) -> PlanStep:
        try:
            return self.nodes[step_id]
        except KeyError:
            raise KeyError(
                f"no step '{step_id}' in the plan (known: {_listing(self.nodes)}); ids are case-sensitive"
            ) from None

    @property
    def unfinished_count(self) -> int:
        return self._unfinished

    def waiting_count(self, step_id: str) -> int:
        """How many dependencies of ``step_id`` have not completed (0: it may run, if pending)."""
        return self._unmet[step_id]

    # ------------------------------------------------------------------ structure

    def add(
        self, steps: Sequence[StepLike], *, iteration: int = 0, validate: bool = True, adopt: bool = False
    ) -> list[PlanStep]:
        """Add new nodes (dependencies may point inside the batch). Raises ``PlanValidationError``, unchanged.

        ``adopt`` takes ``PlanStep`` objects as the live nodes instead of copying them (for loading).
        """
        if validate:
            errors = validate_steps(steps, existing=self.nodes, allow_refresh=False)
            if errors:
                raise PlanValidationError(errors)
        added = [s if adopt and isinstance(s, PlanStep) else _as_node(s, iteration) for s in steps]
        nodes, children = self.nodes, self._children
        for node in added:
            if adopt:  # a repeated dependency would be counted twice as unmet and never released
                node.depends_on = list(dict.fromkeys(node.depends_on))
            nodes[node.id] = node
            children[node.id] = []
        self._unfinished += sum(1 for node in added if node.status not in FINISHED_STATUSES)
        unmet_of, ready = self._unmet, self._ready
        for node in added:  # _link, inlined: this loop runs once per step of every plan
            sid = node.id
            unmet = 0
            for dep in node.depends_on:
                children[dep].append(sid)
                if nodes[dep].status != "completed":
                    unmet += 1
            unmet_of[sid] = unmet
            if not unmet and node.status == "pending":
                ready[sid] = None
        return added

    def _link(self, node: PlanStep) -> None:
        unmet = 0
        for dep in node.depends_on:
            self._children[dep].append(node.id)
            if self.nodes[dep].status != "completed":
                unmet += 1
        self._unmet[node.id] = unmet
        if node.status == "pending" and unmet == 0:
            self._ready[node.id] = None

    def refresh(self, step: StepLike) -> PlanStep:
        """Replace what a pending node does and needs; keeps its place in the ready order if still ready."""
        node = self.node(step.id)
        if node.status != "pending":
            raise PlanValidationError(
                [f"step '{node.id}' is {node.status} and cannot be refreshed (only pending steps can)"]
            )
        for dep in node.depends_on:
            dependents = self._children[dep]
            if node.id in dependents:
                dependents.remove(node.id)
        node.description = step.description
        node.depends_on = list(dict.fromkeys(step.depends_on))
        node.tools = list(step.tools)
        node.subagent = step.subagent
        node.expected_output = step.expected_output
        node.execution_hint = step.execution_hint
        was_ready = node.id in self._ready
        self._link(node)
        if was_ready and self._unmet[node.id]:
            del self._ready[node.id]
        return node

    def supersede(self, step_ids: Collection[str], reason: str) -> list[str]:
        """Retire pending nodes as ``skipped`` with a ``superseded`` result.

        They stay in the graph rather than being deleted: a finished node may still name one as a
        dependency (a step skipped because another of its dependencies failed), and an id that
        stays taken can never be reused for different work.
        """
        ids = list(dict.fromkeys(step_ids))
        errors = [
            f"step '{sid}' is {self.node(sid).status}; only pending steps can be superseded"
            for sid in ids
            if self.node(sid).status != "pending"
        ]
        if errors:
            raise PlanValidationError(errors)
        for sid in ids:
            node = self.nodes[sid]
            node.status = "skipped"
            node.result = StepResult(
                step_id=sid, success=False, error=reason, error_type="superseded", attempt=0
            )
            self._ready.pop(sid, None)
            self._unfinished -= 1
        return ids

    # ------------------------------------------------------------------ running

    def ready(self, limit: int | None = None) -> list[PlanStep]:
        """Pending nodes whose dependencies all completed, oldest first; ``limit`` 0 or None means all."""
        if limit is not None and limit < 0:
            raise ConfigError(f"ready-step limit must be >= 0, got {limit} (0 or None means all)")
        ids = islice(self._ready, limit) if limit else self._ready
        return [self.nodes[i] for i in ids]

    def _runnable(self, step_id: str, verb: str) -> PlanStep:
        node = self.nodes.get(step_id)
        if node is None:
            return self.node(step_id)  # raises the KeyError that lists the known ids
        status = node.status
        if status != "pending" and status != "in_progress":
            raise PlanValidationError([f"cannot {verb} step '{step_id}': it is already {status}"])
        if self._unmet[step_id]:
            waiting = [d for d in node.depends_on if self.nodes[d].status != "completed"]
            raise PlanValidationError(
                [f"cannot {verb} step '{step_id}': waiting on {_listing(waiting)} (take steps from ready())"]
            )
        return node

    def mark_in_progress(self, step_id: str) -> PlanStep:
        node = self._runnable(step_id, "start")
        if node.status == "in_progress":
            raise PlanValidationError([f"cannot start step '{step_id}': it is already in_progress"])
        _set_status(node, "in_progress")
        del self._ready[step_id]
        return node

    def complete(self, step_id: str, result: StepResult) -> list[str]:
        """Mark a node completed; returns the ids that became ready because of it."""
        return self._complete_runnable(self._runnable(step_id, "complete"), result)

    def _complete_runnable(self, node: PlanStep, result: StepResult) -> list[str]:
        """``complete`` for a node the caller has already checked is runnable (pending or in progress,
        every dependency completed): a batch of outcomes is checked whole before any is recorded."""
        ready, unmet, nodes = self._ready, self._unmet, self.nodes
        step_id = node.id
        if node.status == "pending":
            del ready[step_id]
        _settle(node, "completed", result)
        self._unfinished -= 1
        became_ready = []
        for child in self._children[step_id]:
            left = unmet[child] - 1
            unmet[child] = left
            if not left and nodes[child].status == "pending":
                ready[child] = None
                became_ready.append(child)
        return became_ready

    def retry(self, step_id: str, result: StepResult) -> PlanStep:
        """Record a failed attempt and put the node back at the end of the ready order."""
        node = self._runnable(step_id, "retry")
        _settle(node, "pending", result)
        self._ready.pop(step_id, None)
        self._ready[step_id] = None
        return node

    def fail(self, step_id: str, result: StepResult) -> list[str]:
        """Mark a node failed and skip every unfinished descendant with a ``blocked`` result; returns their ids."""
        node = self._runnable(step_id, "fail")
        _settle(node, "failed", result)
        self._ready.pop(step_id, None)
        self._unfinished -= 1
        skipped: list[str] = []
        queue: deque[tuple[str, str]] = deque((c, step_id) for c in self._children[step_id])
        while queue:
            sid, via = queue.popleft()
            child = self.nodes[sid]
            # A finished descendant's own descendants were settled when it finished: stop there.
            if child.finished:
                continue
            child.status, child.result = "skipped", blocked_result(sid, step_id, via)
            self._ready.pop(sid, None)
            self._unfinished -= 1
            skipped.append(sid)
            queue.extend((c, sid) for c in self._children[sid])
        return skipped

    def requeue_in_progress(self) -> list[str]:
        """Put nodes left in_progress (a run that died mid-step) back to pending and ready."""
        stuck = [sid for sid, n in self.nodes.items() if n.status == "in_progress"]
        for sid in stuck:
            self.nodes[sid].status = "pending"
            self._ready[sid] = None
        return stuck

    # ------------------------------------------------------------------ graph queries

    def descendants(self, step_id: str) -> list[str]:
        """Every node reachable through dependents of ``step_id``, breadth-first."""
        self.node(step_id)
        seen: dict[str, None] = {}
        queue = deque(self._children[step_id])
        while queue:
            sid = queue.popleft()
            if sid not in seen:
                seen[sid] = None
                queue.extend(self._children[sid])
        return list(seen)

    def topological_order(self) -> list[str]:
        """All ids, each after its dependencies; ties keep insertion order (Kahn's algorithm)."""
        indegree = {sid: len(n.depends_on) for sid, n in self.nodes.items()}
        queue = deque(sid for sid, d in indegree.items() if d == 0)
        order: list[str] = []
        while queue:
            sid = queue.popleft()
            order.append(sid)
            for child in self._children[sid]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    queue.append(child)
        return order

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [n.model_dump(mode="json") for n in self.nodes.values()],
            "ready": list(self._ready),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanDAG:
        """Rebuild from ``to_dict()``; derived state is recomputed and checked against the stored ready order."""
        dag = cls()
        dag.add([PlanStep.model_validate(n) for n in data.get("nodes", [])], adopt=True)
        ready = list(data.get("ready", []))
        if set(ready) != set(dag._ready) or len(ready) != len(dag._ready):
            raise PlanValidationError(
                [f"stored ready set {_listing(ready)} does not match the graph's {_listing(dag._ready)}"],
                what="stored plan",
            )
        dag._ready = dict.fromkeys(ready)
        return dag
