"""Which steps of the goal's DAG may run now, and what happens to the rest when one finishes?

``PlanDAG`` holds the graph mechanics: nodes, dependent lists, a counter of unmet dependencies per
node and an insertion-ordered ready set, so that a whole run (add, take ready, complete, repeat)
costs O(V+E) in total rather than a scan of the graph per step. The ready set is an
``OrderedDict``, not a ``dict``: a plain dict keeps a hole for every deleted key and its iterator
walks the holes, so taking the oldest ready step after k others were taken costs O(k) and a
one-at-a-time walk of a wide plan is quadratic (measured: 32,000 steps 3.3 s against 0.15 s).
A consumer that orders ready steps its own way (the executor's priority queue) follows the set
through a ``ReadyFeed`` — the ids as they enter it — instead of re-reading all of it after every
completion, which made a run O(ready²) on wide plans. A batch is checked whole first
(``validate_steps``, in ``_dag_validation.py``, re-exported here). Failure propagation (``block``)
skips exactly the unfinished descendants of a failed step and records why. Every traversal is
iterative: a 100,000-step chain must not hit Python's recursion limit.

Goal-level policy (renaming colliding ids, refreshing pending steps, retries, history, rendering)
lives in ``plan_manager.py``; this module knows nothing about iterations.
"""

from __future__ import annotations

import heapq
from collections import OrderedDict, deque
from collections.abc import Collection, Iterable, Mapping, Sequence
from itertools import islice
from typing import Any

from soothe_planner.dag.validation import StepLike, find_cycle, validate_steps
from soothe_planner.dag.validation import listing as _listing
from soothe_planner.errors import ConfigError, PlanValidationError
from soothe_planner.models import FINISHED_STATUSES, PlanStep, StepResult

__all__ = ["PlanDAG", "ReadyFeed", "blocked_result", "find_cycle", "latest_results", "validate_steps"]


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


def latest_results(results: Iterable[StepResult]) -> list[StepResult]:
    """One result per step, its latest attempt, in the order those latest attempts arrived.

    The one definition: the planner reduces a ``LoopState``'s results with it, reflection overlays
    new results on a plan's with it, and ``PlanManager.step_results()`` keeps its record in the
    same order, so every reader sees the same list.
    """
    by_id: dict[str, StepResult] = {}
    for r in results:
        by_id.pop(r.step_id, None)
        by_id[r.step_id] = r
    return list(by_id.values())


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
            update={
                "depends_on": list(dict.fromkeys(step.depends_on)),
                "tools": list(step.tools),
                "args": dict(step.args),
            }
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
    tool = getattr(step, "tool", None)
    if tool is not None:
        fields["tool"] = tool
        fields["args"] = dict(getattr(step, "args", None) or {})
    if iteration:
        fields["iteration"] = iteration
    return PlanStep.model_validate(fields)


class ReadyFeed:
    """The ids entering a DAG's ready set, in order, from the moment the feed was opened.

    Opened with the ids already ready, so draining it once gives the whole ready set and every
    later drain only what is new: O(new ids) a drain, where ``ready()`` costs O(all ready steps).
    An id can arrive twice (a retried step re-enters the ready set, a refreshed one is re-linked):
    whoever takes a step checks ``PlanDAG.is_ready`` first. Close it (or use it as a context
    manager) so the DAG stops feeding it.
    """

    def __init__(self, dag: PlanDAG) -> None:
        self._dag = dag
        self._ids: deque[str] = deque(dag._ready)
        dag._feeds.append(self._ids)

    def drain(self) -> list[str]:
        """The ids that entered the ready set since the last drain, oldest first."""
        out = list(self._ids)
        self._ids.clear()
        return out

    def close(self) -> None:
        feeds = self._dag._feeds
        for i, ids in enumerate(feeds):
            if ids is self._ids:
                del feeds[i]
                break

    def __enter__(self) -> ReadyFeed:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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
        self._ready: OrderedDict[str, None] = OrderedDict()
        self._feeds: list[deque[str]] = []  # one per open ReadyFeed
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
        unmet_of, ready, feeds = self._unmet, self._ready, self._feeds
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
                for feed in feeds:
                    feed.append(sid)
        return added

    def _enter_ready(self, step_id: str) -> None:
        self._ready[step_id] = None
        for feed in self._feeds:
            feed.append(step_id)

    def _link(self, node: PlanStep) -> None:
        unmet = 0
        for dep in node.depends_on:
            self._children[dep].append(node.id)
            if self.nodes[dep].status != "completed":
                unmet += 1
        self._unmet[node.id] = unmet
        if node.status == "pending" and unmet == 0:
            self._enter_ready(node.id)

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
        node.tool = getattr(step, "tool", None)
        node.args = dict(getattr(step, "args", None) or {})
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

    def is_ready(self, step_id: str) -> bool:
        """Whether ``step_id`` is pending with every dependency completed (O(1))."""
        return step_id in self._ready

    def watch_ready(self) -> ReadyFeed:
        """A feed of the ids entering the ready set from now on, primed with the current ones."""
        return ReadyFeed(self)

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
        ready, unmet, nodes, feeds = self._ready, self._unmet, self.nodes, self._feeds
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
                for feed in feeds:
                    feed.append(child)
        return became_ready

    def retry(self, step_id: str, result: StepResult) -> PlanStep:
        """Record a failed attempt and put the node back at the end of the ready order."""
        node = self._runnable(step_id, "retry")
        _settle(node, "pending", result)
        self._ready.pop(step_id, None)
        self._enter_ready(step_id)
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
            self._enter_ready(sid)
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

    def layered_order(self) -> list[str]:
        """All ids, each after its dependencies, breadth-first: every step with no dependency, then
        those they release, in the order released (ties in insertion order; Kahn's algorithm with a
        queue). The order the prompts show a plan in (``PlanManager.dag_prompt``): given the written
        order there instead, the 1.5B re-planned two goals of the tuning suites differently and failed
        them (bench/RESULTS.md §6), so the prompts keep this one until a measure says otherwise."""
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

    def topological_order(self) -> list[str]:
        """All ids, each after its dependencies, and otherwise in insertion order: the insertion order
        itself whenever it is one (a plan reads in the order its steps were written), else, at each
        place, the earliest-inserted step whose dependencies are all placed (Kahn's algorithm with
        the ready steps taken by insertion index, not first come: a breadth-first order would move a
        written step behind every step of the layer before it)."""
        position = {sid: i for i, sid in enumerate(self.nodes)}
        indegree = {sid: len(n.depends_on) for sid, n in self.nodes.items()}
        ready = [position[sid] for sid, d in indegree.items() if d == 0]
        heapq.heapify(ready)
        ids = list(self.nodes)
        order: list[str] = []
        while ready:
            sid = ids[heapq.heappop(ready)]
            order.append(sid)
            for child in self._children[sid]:
                indegree[child] -= 1
                if indegree[child] == 0:
                    heapq.heappush(ready, position[child])
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
        dag._ready = OrderedDict.fromkeys(ready)
        return dag
