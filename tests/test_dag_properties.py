"""Properties of the step DAG on random graphs, each checked against an independent simple algorithm:
cycles are never accepted, every step becomes ready exactly once, ``block`` skips exactly the
descendants of failed steps, ``retry(n)`` runs a failing step n+1 times, and JSON round-trips are exact."""

from __future__ import annotations

import re
from itertools import pairwise

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.errors import PlanValidationError
from soothe_planner.models import AgentDecision, StepAction, StepResult

SETTINGS = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
Graph = dict[str, list[str]]  # step id -> the ids it depends on


@st.composite
def graphs(draw: st.DrawFn, *, acyclic: bool, max_nodes: int = 14) -> Graph:
    """Random graphs; with ``acyclic`` every edge points to an earlier node, else edges may point anywhere."""
    n = draw(st.integers(1, max_nodes))
    names = [f"s{i}" for i in draw(st.permutations(range(n)))]
    graph: Graph = {}
    for i, name in enumerate(names):
        pool = list(range(i)) if acyclic else [j for j in range(n) if j != i]
        picks = draw(st.lists(st.sampled_from(pool), max_size=3, unique=True)) if pool else []
        graph[name] = [names[j] for j in picks]
    return graph


def shuffled_steps(data: st.DataObject, graph: Graph) -> list[StepAction]:
    order = data.draw(st.permutations(list(graph)))
    return [StepAction(id=sid, description=f"do {sid}", depends_on=graph[sid]) for sid in order]


def has_cycle(graph: Graph) -> bool:
    """Independent check: peel off steps whose dependencies are all peeled; a cycle is what remains."""
    remaining = dict(graph)
    while True:
        free = [s for s, deps in remaining.items() if not any(d in remaining for d in deps)]
        if not free:
            return bool(remaining)
        for s in free:
            del remaining[s]


def descendants(graph: Graph, roots: set[str]) -> set[str]:
    """Independent check: grow the set of steps reaching a root through dependencies until it is stable."""
    found: set[str] = set()
    changed = True
    while changed:
        changed = False
        for sid, deps in graph.items():
            if sid not in found and any(d in roots or d in found for d in deps):
                found.add(sid)
                changed = True
    return found


def manager_for(graph: Graph, steps: list[StepAction], policy: str = "block") -> PlanManager:
    pm = PlanManager("g", failure_policy=policy, max_plan_steps=max(1, len(graph)))
    pm.ingest(AgentDecision(steps=steps))
    return pm


def walk(pm: PlanManager, failing: set[str], limit: int = 0) -> list[str]:
    """Repeatedly take the ready steps and finish them; returns every id handed out, in order."""
    handed: list[str] = []
    while ready := pm.ready_steps(limit):
        for node in ready:
            assert node.status == "pending"
            assert all(pm.node(d).status == "completed" for d in node.depends_on)
            handed.append(node.id)
            pm.mark_started(node.id)
        results = [
            StepResult(step_id=n.id, success=n.id not in failing, error=None if n.id not in failing else "no")
            for n in ready
        ]
        pm.record_step_outcomes(results)
        assert pm.dag.unfinished_count == sum(not n.finished for n in pm.nodes)
    return handed


# --------------------------------------------------------------------------- properties


@SETTINGS
@given(st.data())
def test_ingest_accepts_a_graph_exactly_when_it_is_acyclic(data: st.DataObject) -> None:
    graph = data.draw(graphs(acyclic=False))
    steps = shuffled_steps(data, graph)
    pm = PlanManager("g", max_plan_steps=len(steps))
    cyclic = has_cycle(graph)
    try:
        pm.ingest(AgentDecision(steps=steps))
    except PlanValidationError as exc:
        assert cyclic, exc.errors
        assert len(pm) == 0
        (message,) = [e for e in exc.errors if e.startswith("cycle: ")]
        named = re.match(r"cycle: (.*?) \(", message)
        assert named is not None
        ring = named.group(1).split(" -> ")
        assert ring[0] == ring[-1] and len(set(ring[:-1])) == len(ring) - 1
        for step, dep in pairwise(ring):  # the named cycle is made of real edges
            assert dep in graph[step]
    else:
        assert not cyclic
        assert len(pm) == len(graph)


@SETTINGS
@given(st.data())
def test_every_step_becomes_ready_exactly_once_in_a_full_walk(data: st.DataObject) -> None:
    graph = data.draw(graphs(acyclic=True))
    pm = manager_for(graph, shuffled_steps(data, graph))
    handed = walk(pm, failing=set(), limit=data.draw(st.integers(0, 3)))
    assert sorted(handed) == sorted(graph)
    assert not pm.has_unfinished() and all(n.status == "completed" for n in pm.nodes)


@SETTINGS
@given(st.data())
def test_block_skips_exactly_the_descendants_of_failed_steps(data: st.DataObject) -> None:
    graph = data.draw(graphs(acyclic=True))
    failing = set(data.draw(st.lists(st.sampled_from(list(graph)), max_size=3)))
    pm = manager_for(graph, shuffled_steps(data, graph))
    walk(pm, failing)
    failed = {n.id for n in pm.nodes if n.status == "failed"}
    skipped = {n.id for n in pm.nodes if n.status == "skipped"}
    assert failed <= failing
    assert skipped == descendants(graph, failed)
    assert failed | skipped | {n.id for n in pm.nodes if n.status == "completed"} == set(graph)
    for sid in skipped:
        result = pm.node(sid).result
        assert result is not None and result.error_type == "blocked"
        blamed = re.fullmatch(r"blocked: depends on failed step '(.+)'", result.error or "")
        assert blamed is not None and blamed.group(1) in failed
        assert sid in descendants(graph, {blamed.group(1)})


@SETTINGS
@given(st.data())
def test_retry_n_runs_a_failing_step_n_plus_one_times_then_blocks(data: st.DataObject) -> None:
    graph = data.draw(graphs(acyclic=True, max_nodes=8))
    retries = data.draw(st.integers(0, 3))
    failing = set(data.draw(st.lists(st.sampled_from(list(graph)), max_size=2)))
    pm = manager_for(graph, shuffled_steps(data, graph), policy=f"retry({retries})")
    handed = walk(pm, failing)
    failed = {n.id for n in pm.nodes if n.status == "failed"}
    for sid in failed:
        assert handed.count(sid) == retries + 1 and pm.node(sid).attempts == retries + 1
    assert {n.id for n in pm.nodes if n.status == "skipped"} == descendants(graph, failed)


@SETTINGS
@given(st.data())
def test_json_round_trip_is_exact_at_any_point_of_a_run(data: st.DataObject) -> None:
    graph = data.draw(graphs(acyclic=True, max_nodes=10))
    policy = data.draw(st.sampled_from(["block", "retry(1)"]))
    pm = manager_for(graph, shuffled_steps(data, graph), policy=policy)
    failing = set(data.draw(st.lists(st.sampled_from(list(graph)), max_size=2)))
    for _ in range(data.draw(st.integers(0, 4))):  # a partial run, then maybe a replan
        ready = pm.ready_steps(1)
        if not ready:
            break
        sid = ready[0].id
        pm.mark_started(sid)
        if data.draw(st.booleans()):
            pm.record_step_outcomes([StepResult(step_id=sid, success=sid not in failing, output="o")])
    if data.draw(st.booleans()):
        again_ids = data.draw(st.lists(st.sampled_from(list(graph)), max_size=3, unique=True))
        steps = [StepAction(id=s, description="again") for s in again_ids] or [
            StepAction(id="new", description="n")
        ]
        pm.ingest(AgentDecision(steps=steps), 1, replace=data.draw(st.booleans()))

    copy = PlanManager.from_json(pm.to_json())
    assert copy.to_dict() == pm.to_dict()
    assert [n.id for n in copy.ready_steps()] == [n.id for n in pm.ready_steps()]
    # Both continue identically: same handed-out order, same final state.
    assert walk(copy, failing) == walk(pm, failing)
    assert copy.to_dict() == pm.to_dict()


@SETTINGS
@given(st.data())
def test_a_second_decision_is_all_or_nothing_and_keeps_the_ready_set_exact(data: st.DataObject) -> None:
    graph = data.draw(graphs(acyclic=True, max_nodes=8))
    pm = manager_for(
        graph, shuffled_steps(data, graph), policy=data.draw(st.sampled_from(["block", "retry(1)"]))
    )
    for _ in range(data.draw(st.integers(0, 5))):
        ready = pm.ready_steps(1)
        if not ready:
            break
        pm.mark_started(ready[0].id)
        pm.record_step_outcomes([StepResult(step_id=ready[0].id, success=data.draw(st.booleans()))])
    # The next decision re-lists old ids, adds new ones, and may reference anything, even ids that do not exist.
    pool = [*graph, "n1", "n2", "n3", "ghost"]
    new_ids = data.draw(st.lists(st.sampled_from(pool[:-1]), min_size=1, max_size=4, unique=True))
    steps = [
        StepAction(
            id=sid, description="next", depends_on=data.draw(st.lists(st.sampled_from(pool), max_size=2))
        )
        for sid in new_ids
    ]
    replace = data.draw(st.booleans())
    before = pm.to_dict()
    errors = pm.validate(AgentDecision(steps=steps), replace=replace)
    try:
        pm.ingest(AgentDecision(steps=steps), 1, replace=replace)
    except PlanValidationError as exc:
        assert exc.errors == errors and errors
        assert pm.to_dict() == before
        return
    assert errors == []
    now: Graph = {n.id: n.depends_on for n in pm.nodes}
    assert not has_cycle(now) and all(d in now for deps in now.values() for d in deps)
    expected = {
        n.id
        for n in pm.nodes
        if n.status == "pending" and all(pm.node(d).status == "completed" for d in n.depends_on)
    }
    assert {n.id for n in pm.ready_steps()} == expected
    assert pm.dag.unfinished_count == sum(not n.finished for n in pm.nodes)
    walk(pm, failing=set())
    assert not any(
        n.status == "pending" for n in pm.nodes if all(pm.node(d).status == "completed" for d in n.depends_on)
    )


@SETTINGS
@given(st.data())
def test_dag_prompt_keeps_every_unfinished_id_and_status_and_fits_when_it_can(
    data: st.DataObject,
) -> None:
    graph = data.draw(graphs(acyclic=True, max_nodes=10))
    steps = [
        StepAction(id=s.id, description=data.draw(st.text(max_size=80)), depends_on=s.depends_on)
        for s in shuffled_steps(data, graph)
    ]
    pm = manager_for(graph, steps)
    for _ in range(data.draw(st.integers(0, len(graph)))):
        ready = pm.ready_steps(1)
        if not ready:
            break
        pm.mark_started(ready[0].id)
        output = data.draw(st.text(max_size=300))
        pm.record_step_outcomes(
            [StepResult(step_id=ready[0].id, success=data.draw(st.booleans()), output=output)]
        )
    budget = data.draw(st.integers(0, 3000))
    text = pm.dag_prompt(max_chars=budget)
    lines = text.splitlines()
    unfinished = [n for n in pm.nodes if not n.finished]
    for n in unfinished:
        assert any(line.startswith(f"{n.id} [{n.status}]") for line in lines)
    bare = "\n".join(
        f"{n.id} [{n.status}]" + (f" <- {', '.join(n.depends_on)}" if n.depends_on else "")
        for n in unfinished
    )
    if len(bare) + len(f"({len(pm.nodes) - len(unfinished)} finished steps omitted)") + 1 <= budget:
        assert len(text) <= budget
    assert pm.dag_prompt(max_chars=None).count("\n") >= len(pm.nodes) - 1


@SETTINGS
@given(st.data())
def test_a_batch_of_outcomes_is_all_or_nothing(data: st.DataObject) -> None:
    graph = data.draw(graphs(acyclic=True, max_nodes=8))
    pm = manager_for(
        graph, shuffled_steps(data, graph), policy=data.draw(st.sampled_from(["block", "retry(1)"]))
    )
    for _ in range(data.draw(st.integers(0, 3))):
        if ready := pm.ready_steps(1):
            pm.mark_started(ready[0].id)
            pm.record_step_outcomes([StepResult(step_id=ready[0].id, success=data.draw(st.booleans()))])
    ids = [*graph, "ghost"]
    batch = [
        StepResult(step_id=data.draw(st.sampled_from(ids)), success=data.draw(st.booleans()), output="x")
        for _ in range(data.draw(st.integers(1, 4)))
    ]
    before = pm.to_dict()
    try:
        synthetic = pm.record_step_outcomes(batch)
    except PlanValidationError as exc:
        assert exc.errors and pm.to_dict() == before
        return
    assert "ghost" not in {r.step_id for r in batch}
    for r in synthetic:
        assert pm.node(r.step_id).status == "skipped" and pm.node(r.step_id).result == r
    assert {n.id for n in pm.ready_steps()} == {
        n.id
        for n in pm.nodes
        if n.status == "pending" and all(pm.node(d).status == "completed" for d in n.depends_on)
    }
