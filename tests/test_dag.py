"""dag.py: validation messages, cycle finding, and the graph mechanics of ``PlanDAG``."""

from __future__ import annotations

import pytest

from soothe_planner.dag import PlanDAG, find_cycle, validate_steps
from soothe_planner.errors import ConfigError, PlanValidationError
from soothe_planner.models import PlanStep, StepAction, StepResult


def act(sid: str, *deps: str, tools: tuple[str, ...] = (), subagent: str | None = None) -> StepAction:
    return StepAction(
        id=sid, description=f"do {sid}", depends_on=list(deps), tools=list(tools), subagent=subagent
    )


def ok(sid: str) -> StepResult:
    return StepResult(step_id=sid, success=True, output=f"{sid} done")


def bad(sid: str) -> StepResult:
    return StepResult(step_id=sid, success=False, error=f"{sid} broke", error_type="tool_error")


# --------------------------------------------------------------------------- find_cycle


def test_find_cycle_returns_none_for_a_dag() -> None:
    assert find_cycle({"a": [], "b": ["a"], "c": ["a", "b"]}) is None


def test_find_cycle_returns_the_closed_path() -> None:
    cycle = find_cycle({"a": ["b"], "b": ["c"], "c": ["a"]})
    assert cycle is not None
    assert cycle[0] == cycle[-1]
    assert set(cycle) == {"a", "b", "c"} and len(cycle) == 4


def test_find_cycle_treats_missing_targets_as_leaves() -> None:
    assert find_cycle({"a": ["zz"], "b": ["a", "yy"]}) is None


def test_find_cycle_only_searches_from_roots_when_given() -> None:
    graph = {"a": ["b"], "b": ["a"], "c": []}
    assert find_cycle(graph, roots=["c"]) is None
    assert find_cycle(graph, roots=["a"]) is not None


def test_find_cycle_handles_a_chain_deeper_than_the_recursion_limit() -> None:
    n = 20_000
    graph = {f"s{i}": [f"s{i + 1}"] for i in range(n)}
    graph[f"s{n}"] = []
    assert find_cycle(graph) is None
    graph[f"s{n}"] = ["s0"]
    cycle = find_cycle(graph)
    assert cycle is not None and len(cycle) == n + 2


# --------------------------------------------------------------------------- validate_steps messages


def test_validate_accepts_a_valid_batch() -> None:
    assert validate_steps([act("s1"), act("s2", "s1"), act("s3", "s1", "s2")]) == []


def test_validate_names_duplicate_ids_with_positions() -> None:
    errors = validate_steps([act("s1"), act("s2"), act("s2")])
    assert errors == ["duplicate step id 's2' (steps #2 and #3; give each step its own id)"]


def test_validate_names_a_self_dependency() -> None:
    errors = validate_steps([act("s4", "s4")])
    assert errors == ["step 's4' depends on itself (remove 's4' from its depends_on)"]


def test_validate_names_an_unknown_dependency_and_the_way_out() -> None:
    (error,) = validate_steps([act("s1"), act("s3", "s9")])
    assert error.startswith("step 's3' depends on unknown step 's9'")
    assert "drop the dependency or add step 's9'" in error


def test_validate_names_the_cycle_in_order_from_its_first_step() -> None:
    errors = validate_steps([act("s1", "s2"), act("s2", "s3"), act("s3", "s1")])
    assert len(errors) == 1
    assert errors[0].startswith("cycle: s1 -> s2 -> s3 -> s1 ")
    assert "remove one of these dependencies" in errors[0]


def test_validate_rotates_the_cycle_to_the_earliest_step_of_the_batch() -> None:
    errors = validate_steps([act("x"), act("b", "c"), act("c", "b")])
    assert errors[0].startswith("cycle: b -> c -> b ")


def test_validate_reports_a_self_dependency_once_not_also_as_a_cycle() -> None:
    errors = validate_steps([act("s1", "s1")])
    assert len(errors) == 1 and "itself" in errors[0]


def test_validate_names_the_step_count_over_the_cap() -> None:
    errors = validate_steps([act(f"s{i}") for i in range(12)], max_steps=8)
    assert errors == [
        "plan has 12 steps, over max_plan_steps=8 (split the work across iterations, or raise max_plan_steps)"
    ]


def test_validate_names_tools_and_subagents_outside_the_allow_list() -> None:
    errors = validate_steps(
        [act("s1", tools=("read_file",)), act("s2", tools=("rm",)), act("s3", subagent="hacker")],
        allowed_capabilities={"read_file", "researcher"},
    )
    assert errors == [
        "step 's2' uses tool 'rm' which is not allowed (allowed: read_file, researcher)",
        "step 's3' uses subagent 'hacker' which is not allowed (allowed: read_file, researcher)",
    ]


def test_validate_ignores_capabilities_when_no_allow_list_is_given() -> None:
    assert validate_steps([act("s1", tools=("anything",))]) == []


def test_validate_lets_a_dependency_name_an_existing_node() -> None:
    existing = {"s1": PlanStep(id="s1", description="x", status="completed")}
    assert validate_steps([act("s2", "s1")], existing=existing) == []


def test_validate_rejects_a_pending_step_depending_on_a_failed_node() -> None:
    existing = {"s1": PlanStep(id="s1", description="x", status="failed")}
    (error,) = validate_steps([act("s2", "s1")], existing=existing)
    assert error.startswith("step 's2' depends on step 's1', which failed and will never complete")


def test_validate_finds_a_cycle_through_a_refreshed_existing_node() -> None:
    existing = {
        "s1": PlanStep(id="s1", description="x"),
        "s2": PlanStep(id="s2", description="y", depends_on=["s1"]),
    }
    errors = validate_steps([act("s1", "s2")], existing=existing)
    assert len(errors) == 1 and errors[0].startswith("cycle: s1 -> s2 -> s1")


def test_validate_finds_a_cycle_among_new_steps_that_also_use_existing_ones() -> None:
    existing = {"s1": PlanStep(id="s1", description="x", status="completed")}
    steps = [act("a", "s1", "c"), act("b", "a"), act("c", "b"), act("d", "s1")]
    errors = validate_steps(steps, existing=existing)
    assert errors == [
        "cycle: a -> c -> b -> a (each step depends on the next; remove one of these dependencies)"
    ]
    assert validate_steps([act("a", "s1"), act("b", "a"), act("c", "b", "s1")], existing=existing) == []


def test_validate_rejects_reusing_a_finished_id() -> None:
    existing = {"s1": PlanStep(id="s1", description="x", status="completed")}
    (error,) = validate_steps([act("s1")], existing=existing)
    assert "already in the plan as a completed step" in error and "fresh id" in error


def test_validate_rejects_depending_on_a_superseded_step() -> None:
    existing = {"s3": PlanStep(id="s3", description="x")}
    (error,) = validate_steps([act("s5", "s3")], existing=existing, superseded={"s3"})
    assert error == (
        "step 's5' depends on step 's3', which this replan supersedes "
        "(list 's3' in the decision to keep it, or drop the dependency)"
    )


def test_validate_mentions_the_given_id_of_a_renamed_step() -> None:
    (error,) = validate_steps([act("s1.2", "s1.2")], aliases={"s1.2": "s1"})
    assert error.startswith("step 's1.2' (given as 's1') depends on itself")


def test_validate_reports_every_problem_at_once() -> None:
    errors = validate_steps([act("a", "a"), act("b", "zz"), act("b")], max_steps=2)
    assert len(errors) == 4


# --------------------------------------------------------------------------- PlanDAG


def test_ready_set_follows_completions_in_insertion_order() -> None:
    dag = PlanDAG([act("a"), act("b"), act("c", "a", "b"), act("d", "a")])
    assert [n.id for n in dag.ready()] == ["a", "b"]
    assert dag.complete("a", ok("a")) == ["d"]
    assert [n.id for n in dag.ready()] == ["b", "d"]
    dag.complete("b", ok("b"))
    assert [n.id for n in dag.ready()] == ["d", "c"]


def test_ready_limit_zero_and_none_mean_all() -> None:
    dag = PlanDAG([act("a"), act("b"), act("c")])
    assert len(dag.ready(0)) == len(dag.ready(None)) == 3
    assert [n.id for n in dag.ready(2)] == ["a", "b"]


def test_a_negative_ready_limit_is_a_usage_error() -> None:
    with pytest.raises(ConfigError, match="ready-step limit must be >= 0, got -1"):
        PlanDAG([act("a")]).ready(-1)


def test_started_step_leaves_the_ready_set_and_cannot_start_twice() -> None:
    dag = PlanDAG([act("a")])
    dag.mark_in_progress("a")
    assert dag.ready() == [] and dag.node("a").status == "in_progress"
    with pytest.raises(PlanValidationError, match="already in_progress"):
        dag.mark_in_progress("a")


def test_starting_a_step_with_unmet_dependencies_is_an_error() -> None:
    dag = PlanDAG([act("a"), act("b", "a")])
    with pytest.raises(PlanValidationError, match=r"cannot start step 'b': waiting on a"):
        dag.mark_in_progress("b")


def test_fail_skips_exactly_the_unfinished_descendants_with_blocked_results() -> None:
    dag = PlanDAG([act("a"), act("b", "a"), act("c", "b"), act("d"), act("e", "d", "c")])
    skipped = dag.fail("a", bad("a"))
    assert skipped == ["b", "c", "e"]
    assert dag.node("d").status == "pending"
    e = dag.node("e")
    assert e.status == "skipped" and e.result is not None
    assert e.result.error == "blocked: depends on failed step 'a'"
    assert e.result.error_type == "blocked" and e.result.outcome == {"blocked_by": "a", "via": "c"}
    assert [n.id for n in dag.ready()] == ["d"]


def test_fail_does_not_visit_already_skipped_nodes_twice() -> None:
    dag = PlanDAG([act("a"), act("b"), act("c", "a", "b")])
    assert dag.fail("a", bad("a")) == ["c"]
    assert dag.fail("b", bad("b")) == []
    blocked = dag.node("c").result
    assert blocked is not None and blocked.error == "blocked: depends on failed step 'a'"


def test_retry_puts_a_step_back_at_the_end_of_the_ready_order() -> None:
    dag = PlanDAG([act("a"), act("b")])
    dag.mark_in_progress("a")
    dag.retry("a", bad("a"))
    node = dag.node("a")
    assert node.status == "pending" and node.attempts == 1
    assert [n.id for n in dag.ready()] == ["b", "a"]


def test_refresh_changes_a_pending_node_and_its_readiness() -> None:
    dag = PlanDAG([act("a"), act("b")])
    dag.refresh(StepAction(id="b", description="new text", depends_on=["a"], tools=["t"]))
    b = dag.node("b")
    assert (b.description, b.depends_on, b.tools) == ("new text", ["a"], ["t"])
    assert [n.id for n in dag.ready()] == ["a"]
    assert dag.complete("a", ok("a")) == ["b"]


def test_refresh_of_a_finished_node_is_refused_and_changes_nothing() -> None:
    dag = PlanDAG([act("a")])
    dag.complete("a", ok("a"))
    with pytest.raises(PlanValidationError, match="completed and cannot be refreshed"):
        dag.refresh(StepAction(id="a", description="rewrite history"))
    assert dag.node("a").description == "do a"


def test_supersede_retires_pending_nodes_as_skipped_with_the_reason() -> None:
    dag = PlanDAG([act("a"), act("b", "a"), act("c")])
    assert dag.supersede(["a", "b"], "superseded: replanned") == ["a", "b"]
    a = dag.node("a")
    assert a.status == "skipped" and a.result is not None
    assert (a.result.error_type, a.result.error) == ("superseded", "superseded: replanned")
    assert [n.id for n in dag.ready()] == ["c"] and dag.unfinished_count == 1


def test_supersede_refuses_a_finished_node_and_changes_nothing() -> None:
    dag = PlanDAG([act("a"), act("b")])
    dag.complete("a", ok("a"))
    with pytest.raises(
        PlanValidationError, match="step 'a' is completed; only pending steps can be superseded"
    ):
        dag.supersede(["b", "a"], "x")
    assert dag.node("b").status == "pending"


def test_add_validates_and_leaves_the_graph_unchanged_on_error() -> None:
    dag = PlanDAG([act("a")])
    with pytest.raises(PlanValidationError) as info:
        dag.add([act("b", "a"), act("c", "nope")])
    assert info.value.errors == [
        "step 'c' depends on unknown step 'nope' (not in this decision nor the plan; drop the dependency or add step 'nope')"
    ]
    assert list(dag.nodes) == ["a"]


def test_descendants_and_topological_order() -> None:
    dag = PlanDAG([act("c", "b"), act("b", "a"), act("a"), act("d")])
    assert dag.descendants("a") == ["b", "c"]
    order = dag.topological_order()
    assert sorted(order) == ["a", "b", "c", "d"]
    assert order.index("a") < order.index("b") < order.index("c")


def test_topological_order_is_the_written_order_whenever_that_is_one() -> None:
    dag = PlanDAG([act("a"), act("b", "a"), act("c", "b"), act("d"), act("e", "d")])
    assert dag.topological_order() == ["a", "b", "c", "d", "e"]
    # breadth-first (the order prompts show): each step behind the whole layer before it
    assert dag.layered_order() == ["a", "d", "b", "e", "c"]
    # written out of order: each step moves only as far as its dependencies make it
    dag = PlanDAG([act("c", "b"), act("d"), act("b", "a"), act("a")])
    assert dag.topological_order() == ["d", "a", "b", "c"]


def test_unfinished_count_tracks_every_transition() -> None:
    dag = PlanDAG([act("a"), act("b", "a"), act("c")])
    assert dag.unfinished_count == 3
    dag.complete("c", ok("c"))
    dag.fail("a", bad("a"))
    assert dag.unfinished_count == 0


def test_requeue_in_progress_makes_a_dead_runs_steps_ready_again() -> None:
    dag = PlanDAG([act("a"), act("b")])
    dag.mark_in_progress("a")
    assert dag.requeue_in_progress() == ["a"]
    assert dag.node("a").status == "pending" and [n.id for n in dag.ready()] == ["b", "a"]


def test_dict_round_trip_keeps_statuses_results_and_ready_order() -> None:
    dag = PlanDAG([act("a"), act("b"), act("c"), act("d", "a")])
    dag.mark_in_progress("a")
    dag.retry("a", bad("a"))
    dag.complete("b", ok("b"))
    again = PlanDAG.from_dict(dag.to_dict())
    assert again.to_dict() == dag.to_dict()
    assert [n.id for n in again.ready()] == ["c", "a"]
    assert again.node("a").result == bad("a")


def test_from_dict_rejects_a_ready_list_that_contradicts_the_graph() -> None:
    data = PlanDAG([act("a"), act("b", "a")]).to_dict()
    data["ready"] = ["a", "b"]
    with pytest.raises(PlanValidationError, match="stored ready set"):
        PlanDAG.from_dict(data)


def test_unknown_node_lookup_names_the_id() -> None:
    with pytest.raises(KeyError, match="no step 'zz'"):
        PlanDAG([act("a")]).node("zz")


def test_added_nodes_copy_every_field_of_the_action_and_share_no_lists() -> None:
    step = StepAction(
        id="a",
        description="d",
        tools=["t"],
        subagent="sub",
        expected_output="out",
        depends_on=[],
        execution_hint="subagent",
    )
    (node,) = PlanDAG().add([step], iteration=3)
    assert node.to_action() == step and node.iteration == 3 and node.status == "pending"
    assert node.tools is not step.tools and node.depends_on is not step.depends_on
    (plain,) = PlanDAG().add([StepAction(id="b", description="e", depends_on=[])])
    assert plain == PlanStep(id="b", description="e")


def test_validate_accepts_dependencies_listed_after_their_dependents() -> None:
    assert validate_steps([act("c", "b", "a"), act("b", "a"), act("a")]) == []
    errors = validate_steps([act("c", "b"), act("b", "a"), act("a", "c")])
    assert errors == [
        "cycle: c -> b -> a -> c (each step depends on the next; remove one of these dependencies)"
    ]


def test_state_changes_read_back_like_plain_assignment() -> None:
    dag = PlanDAG([act("a"), act("b", "a")])
    assert dag.waiting_count("a") == 0 and dag.waiting_count("b") == 1
    dag.mark_in_progress("a")
    result = StepResult(step_id="a", success=True, output="ok")
    assert dag.complete("a", result) == ["b"]
    node = dag.node("a")
    expected = PlanStep(id="a", description="do a")
    expected.status, expected.result, expected.attempts = "completed", result, 1
    assert node == expected and node.model_fields_set >= {"status", "result", "attempts"}
    assert dag.waiting_count("b") == 0
    assert PlanStep.model_validate(node.model_dump(mode="json")) == node


# --------------------------------------------------------------------------- ReadyFeed


def test_ready_feed_starts_with_the_ready_set_then_gives_only_what_became_ready() -> None:
    dag = PlanDAG([act("a"), act("b"), act("c", "a"), act("d", "a", "b")])
    with dag.watch_ready() as feed:
        assert feed.drain() == ["a", "b"]
        assert feed.drain() == []
        dag.mark_in_progress("a")
        dag.complete("a", ok("a"))
        assert feed.drain() == ["c"]  # d still waits on b
        dag.mark_in_progress("b")
        dag.retry("b", bad("b"))
        assert feed.drain() == ["b"]  # a retried step enters the ready set again
        dag.mark_in_progress("b")
        dag.complete("b", ok("b"))
        dag.add([act("e", "b")])
        assert feed.drain() == ["d", "e"]


def test_a_closed_ready_feed_is_no_longer_fed() -> None:
    dag = PlanDAG([act("a"), act("b", "a")])
    feed = dag.watch_ready()
    other = dag.watch_ready()
    feed.close()
    dag.mark_in_progress("a")
    dag.complete("a", ok("a"))
    assert feed.drain() == ["a"] and other.drain() == ["a", "b"]
    assert dag.is_ready("b") and not dag.is_ready("a")
