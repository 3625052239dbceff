"""plan_manager.py: the goal-wide DAG across iterations — ingest rules, renames, refresh, replace,
failure policy, outcome checks, rendering and persistence."""

from __future__ import annotations

import json
import re

import pytest

from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.errors import ConfigError, PlanValidationError
from soothe_planner.models import (
    AgentDecision,
    ExecutionMode,
    FailurePolicy,
    Plan,
    PlanResult,
    PlanStep,
    StepAction,
    StepResult,
)
from soothe_planner.wire import STEP_ID_PATTERN


def act(sid: str, *deps: str, desc: str | None = None, tools: tuple[str, ...] = ()) -> StepAction:
    return StepAction(id=sid, description=desc or f"do {sid}", depends_on=list(deps), tools=list(tools))


def decision(*steps: StepAction, mode: ExecutionMode = "dependency") -> AgentDecision:
    return AgentDecision(steps=list(steps), execution_mode=mode)


def ok(sid: str, output: str | None = None) -> StepResult:
    return StepResult(step_id=sid, success=True, output=output if output is not None else f"{sid} done")


def bad(sid: str, error: str = "boom") -> StepResult:
    return StepResult(step_id=sid, success=False, error=error, error_type="tool_error")


def ids(steps: list[PlanStep]) -> list[str]:
    return [s.id for s in steps]


def run(pm: PlanManager, *results: StepResult) -> list[StepResult]:
    """Start and finish steps one by one, as an executor does; returns the synthetic results."""
    synthetic: list[StepResult] = []
    for r in results:
        pm.mark_started(r.step_id)
        synthetic += pm.record_step_outcomes([r])
    return synthetic


# --------------------------------------------------------------------------- construction


def test_constructor_reads_the_failure_policy_string() -> None:
    assert PlanManager("g", failure_policy="retry(2)").failure_policy == FailurePolicy(
        mode="retry", max_retries=2
    )


def test_constructor_rejects_an_unknown_failure_policy_with_the_way_out() -> None:
    with pytest.raises(ConfigError, match=r"'sometimes' is not 'block' or 'retry\(n\)'"):
        PlanManager("g", failure_policy="sometimes")


def test_constructor_rejects_a_zero_step_cap() -> None:
    with pytest.raises(ConfigError, match="max_plan_steps must be >= 1, got 0"):
        PlanManager("g", max_plan_steps=0)


# --------------------------------------------------------------------------- ingest and validation


def test_ingest_keeps_the_given_ids_and_reports_them() -> None:
    pm = PlanManager("g")
    report = pm.ingest(decision(act("fetch"), act("parse", "fetch")))
    assert report.added == ["fetch", "parse"] and report.renamed == {}
    assert ids(pm.ready_steps()) == ["fetch"]
    assert pm.node("parse").status == "pending"


def test_ingest_accepts_a_plan_result_and_ignores_keep() -> None:
    pm = PlanManager("g")
    pm.ingest(PlanResult(status="continue", plan_action="new", decision=decision(act("s1"))), 1)
    assert pm.node("s1").iteration == 1
    before = pm.to_dict()
    report = pm.ingest(PlanResult(status="continue", plan_action="keep"), 2)
    assert report.empty and pm.to_dict() == before


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([act("s1"), act("s1")], "duplicate step id 's1'"),
        ([act("s1", "s1")], "step 's1' depends on itself"),
        ([act("s1", "s9")], "step 's1' depends on unknown step 's9'"),
        ([act("s1", "s3"), act("s2", "s1"), act("s3", "s2")], "cycle: s1 -> s3 -> s2 -> s1"),
        ([act(f"s{i}") for i in range(9)], "plan has 9 steps, over max_plan_steps=8"),
        ([act("s1", tools=("rm",))], "step 's1' uses tool 'rm' which is not allowed"),
    ],
)
def test_every_rule_raises_and_leaves_the_manager_unchanged(steps: list[StepAction], expected: str) -> None:
    pm = PlanManager("g", allowed_capabilities={"read_file"})
    pm.ingest(decision(act("s0")))
    before = pm.to_dict()
    assert any(e.startswith(expected) for e in pm.validate(decision(*steps)))
    with pytest.raises(PlanValidationError) as info:
        pm.ingest(decision(*steps))
    assert any(e.startswith(expected) for e in info.value.errors), info.value.errors
    assert pm.to_dict() == before


def test_step_cap_is_per_decision_not_per_goal() -> None:
    pm = PlanManager("g", max_plan_steps=2)
    pm.ingest(decision(act("a"), act("b")))
    pm.ingest(decision(act("c", "a"), act("d")))
    assert len(pm) == 4


def test_a_dependency_may_name_a_node_of_an_earlier_decision() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1")))
    run(pm, ok("s1"))
    pm.ingest(decision(act("s2", "s1")), 1)
    assert ids(pm.ready_steps()) == ["s2"]


def test_depending_on_a_failed_step_is_rejected() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1")))
    run(pm, bad("s1"))
    with pytest.raises(PlanValidationError, match="depends on step 's1', which failed"):
        pm.ingest(decision(act("s2", "s1")), 1)


# --------------------------------------------------------------------------- renames


def test_an_id_colliding_with_a_finished_node_is_renamed_and_references_follow() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2", "s1")))
    run(pm, ok("s1"), ok("s2"))
    report = pm.ingest(decision(act("s1", desc="again"), act("s3", "s1"), act("s4", "s2")), 1)
    assert report.renamed == {"s1": "s1.2"}
    assert report.added == ["s1.2", "s3", "s4"]
    assert pm.node("s3").depends_on == ["s1.2"]
    assert pm.node("s4").depends_on == ["s2"]  # a finished node not re-listed is referenced as is
    assert pm.node("s1").description == "do s1" and pm.node("s1").status == "completed"
    assert pm.node("s1.2").description == "again"
    assert pm.history[-1].renamed == {"s1": "s1.2"}


def test_a_renamed_id_renames_to_the_next_of_its_family() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1")))
    run(pm, ok("s1"))
    pm.ingest(decision(act("s1")), 1)
    run(pm, ok("s1.2"))
    assert pm.ingest(decision(act("s1.2")), 2).renamed == {"s1.2": "s1.3"}
    assert pm.ingest(decision(act("s1")), 3).renamed == {"s1": "s1.4"}  # s1.3 is taken (pending)


def test_a_fresh_id_skips_ids_the_decision_itself_uses() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1")))
    run(pm, ok("s1"))
    report = pm.ingest(decision(act("s1"), act("s1.2")), 1)
    assert report.renamed == {"s1": "s1.3"} and sorted(report.added) == ["s1.2", "s1.3"]


def test_a_fresh_id_always_matches_the_wire_id_pattern() -> None:
    long_id = "x" * 32
    pm = PlanManager("g")
    pm.ingest(decision(act(long_id), act("a.b-c_9")))
    run(pm, ok(long_id), ok("a.b-c_9"))
    report = pm.ingest(decision(act(long_id), act("a.b-c_9")), 1)
    for new in report.renamed.values():
        assert re.fullmatch(STEP_ID_PATTERN, new), new
    assert len(set(report.renamed.values())) == 2


def test_an_id_colliding_with_an_in_progress_node_is_renamed() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1")))
    pm.mark_started("s1")
    assert pm.ingest(decision(act("s1", desc="other")), 1).renamed == {"s1": "s1.2"}
    assert pm.node("s1").description == "do s1"


def test_renamed_step_errors_mention_the_given_id() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1")))
    run(pm, ok("s1"))
    errors = pm.validate(decision(act("s1", "s1")))
    assert errors == [
        "step 's1.2' (given as 's1') depends on itself (remove 's1.2' (given as 's1') from its depends_on)"
    ]


# --------------------------------------------------------------------------- refresh and replace


def test_an_id_equal_to_a_pending_node_refreshes_it() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2")))
    report = pm.ingest(decision(act("s2", "s1", desc="better", tools=("grep",))), 1)
    assert report.refreshed == ["s2"] and report.added == []
    node = pm.node("s2")
    assert (node.description, node.depends_on, node.tools) == ("better", ["s1"], ["grep"])
    assert node.iteration == 0
    assert ids(pm.ready_steps()) == ["s1"]


def test_a_refresh_is_revalidated() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2", "s1")))
    before = pm.to_dict()
    with pytest.raises(PlanValidationError, match=r"cycle: s1 -> s2 -> s1"):
        pm.ingest(decision(act("s1", "s2")), 1)
    assert pm.to_dict() == before


def test_replace_supersedes_unlisted_pending_nodes_and_records_them() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2"), act("s3", "s2"), act("s4")))
    run(pm, ok("s1"))
    pm.mark_started("s4")
    report = pm.ingest(decision(act("s5", "s1")), 1, replace=True)
    assert report.superseded == ["s2", "s3"]
    for sid in ("s2", "s3"):
        result = pm.node(sid).result
        assert pm.node(sid).status == "skipped" and result is not None
        assert (result.error_type, result.error) == (
            "superseded",
            "superseded: the plan was replaced at iteration 1",
        )
    assert pm.node("s4").status == "in_progress" and pm.node("s1").status == "completed"
    assert ids(pm.ready_steps()) == ["s5"]
    rev = pm.history[-1]
    assert rev.action == "replace" and rev.superseded == ["s2", "s3"] and rev.iteration == 1
    assert pm.progress() == pytest.approx(1 / 3)  # s1 of s1, s4, s5: the superseded s2, s3 count for nothing


def test_replace_keeps_a_skipped_step_that_names_a_superseded_dependency() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s0"), act("s1"), act("s5", "s0", "s1")))
    run(pm, bad("s0"))  # s5 is skipped (blocked by s0) while s1 is still pending
    report = pm.ingest(decision(act("s0")), 1, replace=True)
    assert report.superseded == ["s1"] and report.renamed == {"s0": "s0.2"}
    assert pm.node("s5").depends_on == ["s0", "s1"] and pm.node("s5").status == "skipped"
    assert "s5" in [s.id for s in pm.to_plan().steps]
    assert PlanManager.from_json(pm.to_json()).to_dict() == pm.to_dict()


def test_a_plan_whose_leftovers_were_superseded_counts_as_completed() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2")))
    pm.ingest(decision(act("s1")), 1, replace=True)
    run(pm, ok("s1"))
    assert pm.to_plan().status == "completed"


def test_replace_rejects_a_new_step_depending_on_a_superseded_node() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2")))
    before = pm.to_dict()
    with pytest.raises(PlanValidationError) as info:
        pm.ingest(decision(act("s3", "s2")), 1, replace=True)
    assert info.value.errors == [
        "step 's3' depends on step 's2', which this replan supersedes "
        "(list 's2' in the decision to keep it, or drop the dependency)"
    ]
    assert pm.to_dict() == before


def test_replace_supersedes_a_node_that_a_relisted_step_no_longer_depends_on() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s0"), act("s2", "s0")))
    report = pm.ingest(decision(act("s2")), 1, replace=True)
    assert report.superseded == ["s0"] and report.refreshed == ["s2"]
    assert pm.node("s2").depends_on == [] and ids(pm.ready_steps()) == ["s2"]


def test_a_superseded_id_is_never_reused_for_other_work() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2")))
    pm.ingest(decision(act("s1")), 1, replace=True)
    assert pm.ingest(decision(act("s2", desc="different")), 2).renamed == {"s2": "s2.2"}


def test_extend_keeps_unlisted_pending_nodes() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2")))
    pm.ingest(decision(act("s3")), 1)
    assert ids(pm.nodes) == ["s1", "s2", "s3"]


# --------------------------------------------------------------------------- outcomes and failure policy


def test_success_completes_and_unlocks_dependents() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2", "s1")))
    pm.mark_started("s1")
    assert pm.node("s1").status == "in_progress"
    assert pm.record_step_outcomes([ok("s1")]) == []
    assert pm.node("s1").status == "completed" and pm.node("s1").result == ok("s1")
    assert ids(pm.ready_steps()) == ["s2"]


def test_block_skips_every_unfinished_descendant_and_returns_their_results() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2", "s1"), act("s3", "s2"), act("s4")))
    synthetic = run(pm, bad("s1"))
    assert [r.step_id for r in synthetic] == ["s2", "s3"]
    for r in synthetic:
        assert (r.success, r.error_type, r.error) == (
            False,
            "blocked",
            "blocked: depends on failed step 's1'",
        )
        assert pm.node(r.step_id).status == "skipped" and pm.node(r.step_id).result == r
    assert pm.node("s1").status == "failed" and pm.node("s4").status == "pending"
    assert pm.results()["s3"].error_type == "blocked"


def test_retry_n_returns_to_pending_until_n_plus_one_failures_then_blocks() -> None:
    pm = PlanManager("g", failure_policy="retry(2)")
    pm.ingest(decision(act("s1"), act("s2", "s1")))
    for attempt in (1, 2):
        assert run(pm, bad("s1", f"try {attempt}")) == []
        assert pm.node("s1").status == "pending" and pm.node("s1").attempts == attempt
        assert ids(pm.ready_steps()) == ["s1"]
    synthetic = run(pm, bad("s1", "try 3"))
    assert pm.node("s1").status == "failed" and pm.node("s1").attempts == 3
    assert [r.step_id for r in synthetic] == ["s2"]


def test_retry_then_success_completes() -> None:
    pm = PlanManager("g", failure_policy="retry(1)")
    pm.ingest(decision(act("s1")))
    run(pm, bad("s1"))
    run(pm, ok("s1"))
    assert pm.node("s1").status == "completed" and not pm.has_unfinished()


def test_a_result_for_an_unknown_step_is_an_error_naming_it_and_records_nothing() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1")))
    with pytest.raises(PlanValidationError) as info:
        pm.record_step_outcomes([ok("s1"), ok("ghost")])
    assert len(info.value.errors) == 1 and info.value.errors[0].startswith("result for unknown step 'ghost'")
    assert pm.node("s1").status == "pending"


def test_an_identical_repeat_for_a_finished_step_is_ignored() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1")))
    run(pm, ok("s1"))
    assert pm.record_step_outcomes([ok("s1")]) == []
    assert pm.node("s1").attempts == 1


def test_a_different_result_for_a_finished_step_is_rejected() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1")))
    run(pm, ok("s1"))
    with pytest.raises(PlanValidationError, match="step 's1' is already completed; a different result"):
        pm.record_step_outcomes([ok("s1", "other output")])
    assert pm.node("s1").result == ok("s1")


def test_two_different_results_for_one_step_in_a_batch_are_rejected() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1")))
    with pytest.raises(PlanValidationError, match="two different results for step 's1'"):
        pm.record_step_outcomes([ok("s1"), bad("s1")])


def test_a_result_before_its_dependencies_completed_is_rejected() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2", "s1")))
    with pytest.raises(
        PlanValidationError, match="result for step 's2' arrived before its dependencies completed: s1"
    ):
        pm.record_step_outcomes([ok("s2")])
    pm.record_step_outcomes([ok("s1"), ok("s2")])  # in completion order within one batch: fine
    assert not pm.has_unfinished()


def test_ready_steps_limit() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("a"), act("b"), act("c")))
    assert ids(pm.ready_steps(2)) == ["a", "b"]
    assert ids(pm.ready_steps(0)) == ids(pm.ready_steps()) == ["a", "b", "c"]


def test_requeue_interrupted_after_a_resume() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("a")))
    pm.mark_started("a")
    again = PlanManager.from_json(pm.to_json())
    assert again.requeue_interrupted() == ["a"] and ids(again.ready_steps()) == ["a"]


# --------------------------------------------------------------------------- views


def test_dag_prompt_lines_and_excerpts() -> None:
    pm = PlanManager("g")
    pm.ingest(
        decision(act("s1", desc="Fetch the page"), act("s2", "s1", desc="Read the config"), act("s3", "s2"))
    )
    run(pm, ok("s1", "line one\nline two"))
    run(pm, bad("s2", "no such file"))
    assert pm.dag_prompt() == "\n".join(
        [
            "s1 [completed] Fetch the page",
            "    result: line one line two",
            "s2 [failed] Read the config <- s1",
            "    error: no such file",
            "s3 [skipped] do s3 <- s2",
            "    error: blocked: depends on failed step 's2'",
        ]
    )


def test_dag_prompt_shows_the_last_error_of_a_step_waiting_for_a_retry() -> None:
    pm = PlanManager("g", failure_policy="retry(1)")
    pm.ingest(decision(act("s1", desc="Call the API")))
    run(pm, bad("s1", "HTTP 503"))
    assert pm.dag_prompt() == "s1 [pending] Call the API\n    previous attempt error: HTTP 503"


def test_dag_prompt_trims_the_longest_excerpts_first() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("a"), act("b")))
    run(pm, ok("a", "x" * 150), ok("b", "short result"))
    full = pm.dag_prompt()
    text = pm.dag_prompt(max_chars=len(full) - 60)
    assert len(text) <= len(full) - 60
    assert "short result" in text and "x" * 150 not in text and "xxxx" in text


def test_dag_prompt_never_drops_unfinished_ids_or_statuses() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(*[act(f"s{i}", desc="a fairly long description " * 3) for i in range(6)]), 0)
    run(pm, ok("s0", "y" * 500))
    text = pm.dag_prompt(max_chars=40)
    for i in range(1, 6):
        assert f"s{i} [pending]" in text
    assert "y" * 20 not in text


def test_dag_prompt_folds_finished_steps_when_short_of_room() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(*[act(f"s{i}", desc="describe " * 5) for i in range(8)]))
    run(pm, *[ok(f"s{i}") for i in range(6)])
    text = pm.dag_prompt(max_chars=160)
    assert text.startswith("(6 finished steps omitted")
    assert "s6 [pending]" in text and "s7 [pending]" in text
    assert len(text) <= 160


def test_mermaid_escapes_labels_and_styles_statuses() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1", desc='Say "hi" [now]'), act("s2", "s1", desc="a|b <c>")))
    run(pm, ok("s1"))
    text = pm.to_mermaid()
    assert text.startswith("flowchart TD\n")
    assert 'n0["s1: Say #34;hi#34; #91;now#93;"]:::completed' in text
    assert 'n1["s2: a#124;b #60;c#62;"]:::pending' in text
    assert "n0 --> n1" in text
    for status in ("pending", "in_progress", "completed", "failed", "skipped"):
        assert f"classDef {status} " in text
    labels = re.findall(r'\["(.*?)"\]', text)
    assert all('"' not in label and "[" not in label and "]" not in label for label in labels)


def test_to_plan_and_in_flight_decision() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2", "s1"), act("s3"), mode="sequential"))
    run(pm, ok("s1"))
    plan = pm.to_plan()
    assert isinstance(plan, Plan) and plan.goal == "g" and plan.status == "active"
    assert [s.id for s in plan.steps] == ["s1", "s2", "s3"]  # as written: that order puts dependencies first
    flight = pm.in_flight_decision()
    assert flight is not None and flight.execution_mode == "sequential"
    assert [s.id for s in flight.steps] == ["s2", "s3"]
    run(pm, ok("s2"), ok("s3"))
    assert pm.in_flight_decision() is None and pm.to_plan().status == "completed"


def test_to_plan_status_is_failed_when_anything_failed_and_nothing_is_left() -> None:
    pm = PlanManager("g")
    pm.ingest(decision(act("s1"), act("s2")))
    run(pm, ok("s1"), bad("s2"))
    assert pm.to_plan().status == "failed"


def test_from_plan_keeps_statuses_and_results() -> None:
    plan = Plan(
        goal="g",
        steps=[
            PlanStep(id="a", description="x", status="completed", result=ok("a"), attempts=1),
            PlanStep(id="b", description="y", depends_on=["a"]),
        ],
    )
    pm = PlanManager.from_plan(plan)
    assert pm.node("a").result == ok("a") and ids(pm.ready_steps()) == ["b"]
    pm.ingest(decision(act("c", "b")), 1)
    revised = pm.to_plan()
    assert (revised.id, revised.revision) == (plan.id, plan.revision + 1)
    assert pm.to_plan().id == revised.id


def test_an_empty_manager_is_an_active_plan_with_nothing_in_flight() -> None:
    pm = PlanManager("g")
    assert pm.to_plan().status == "active" and pm.in_flight_decision() is None
    assert not pm.has_unfinished() and pm.ready_steps() == [] and pm.dag_prompt() == "(no steps yet)"


# --------------------------------------------------------------------------- persistence


def test_json_round_trip_is_exact() -> None:
    pm = PlanManager("goal ✓", failure_policy="retry(1)", max_plan_steps=5, allowed_capabilities=["t1", "t2"])
    pm.ingest(decision(act("s1", tools=("t1",)), act("s2"), act("s3", "s1"), mode="parallel"))
    run(pm, ok("s1"), bad("s2"))
    pm.ingest(decision(act("s1"), act("s4", "s1")), 1, replace=True)
    data = pm.to_dict()
    json.dumps(data)  # plain data only
    again = PlanManager.from_json(pm.to_json())
    assert again.to_dict() == data
    assert ids(again.ready_steps()) == ids(pm.ready_steps())
    assert again.history == pm.history and again.failure_policy == pm.failure_policy
    assert again.ingest(decision(act("s1")), 2).renamed == pm.ingest(decision(act("s1")), 2).renamed


def test_from_dict_rejects_an_unknown_format() -> None:
    data = PlanManager("g").to_dict()
    data["format"] = 99
    with pytest.raises(PlanValidationError, match="format 99"):
        PlanManager.from_dict(data)


def test_state_survives_the_langgraph_checkpoint_serializer_unchanged() -> None:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    pm = PlanManager("g", failure_policy="retry(1)")
    pm.ingest(decision(act("s1"), act("s2", "s1"), act("s3")))
    run(pm, ok("s1"), bad("s3"))
    serde = JsonPlusSerializer()
    data = pm.to_dict()
    stored = serde.loads_typed(serde.dumps_typed(data))
    assert stored == data
    assert PlanManager.from_dict(stored).to_dict() == data
