"""The benchmark harness itself: the entry point, the schedule simulations and the scenario generator.

Benchmarks are not run here (they measure time); these pin the pieces their numbers rest on.
"""

from __future__ import annotations

import pytest

from bench.__main__ import BENCHMARKS, main
from bench._dags import bottom_levels, list_schedule, path_lengths, random_dag, with_costs


def test_entry_point_lists_every_benchmark_and_rejects_unknown_names(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main([]) == 0
    listed = capsys.readouterr().out
    assert all(name in listed for name in BENCHMARKS)
    assert main(["nope"]) == 2


@pytest.mark.parametrize("seed", range(5))
def test_list_schedules_respect_the_lower_bound_and_its_extremes(seed: int) -> None:
    dag = random_dag(60, layers=6, seed=seed)
    assert list_schedule(dag, None) == pytest.approx(dag.critical_path())
    assert list_schedule(dag, 1) == pytest.approx(dag.total_work())
    for p in (2, 4, 8):
        for critical in (False, True):
            assert list_schedule(dag, p, critical_first=critical) >= dag.bound(p) - 1e-9
        assert list_schedule(dag, p, critical_first=True, by_step_count=True) >= dag.bound(p) - 1e-9
    assert max(bottom_levels(dag)) == pytest.approx(dag.critical_path())


def test_step_count_priority_is_the_longest_chain_in_steps_and_matches_the_executor() -> None:
    from soothe_planner.dag.plan_manager import PlanManager
    from soothe_planner.execution.ordering import remaining_path_lengths

    dag = random_dag(40, layers=8, seed=3)
    pm = PlanManager("g", max_plan_steps=dag.n)
    pm.ingest(dag.decision())
    lengths = remaining_path_lengths(pm.nodes)
    assert path_lengths(dag) == [lengths[f"s{i}"] for i in range(dag.n)]
    assert max(path_lengths(dag)) == len(dag.levels())
    # With every step costing 1, the step-count order is the duration order.
    unit = with_costs(dag, [1.0] * dag.n)
    assert list_schedule(unit, 3, critical_first=True, by_step_count=True) == pytest.approx(
        list_schedule(unit, 3, critical_first=True)
    )
    with pytest.raises(ValueError, match="one cost per step"):
        with_costs(dag, [1.0])


def test_dag_levels_are_a_topological_layering() -> None:
    dag = random_dag(100, layers=10, seed=1)
    level = {i: k for k, ids in enumerate(dag.levels()) for i in ids}
    assert all(level[d] < level[i] for i in range(dag.n) for d in dag.deps[i])


def test_economy_scenarios_need_one_to_six_iterations_and_include_failures() -> None:
    from bench.economy import make_scenarios

    scenarios = make_scenarios(24, seed=11)
    assert len(scenarios) >= 20
    assert {s.stages for s in scenarios} == {1, 2, 3, 4}
    assert sum(bool(s.fail_attempts) for s in scenarios) >= 10
    assert all(1 <= s.stages + len(s.fail_attempts) <= 6 for s in scenarios)


def test_the_economy_oracle_plans_only_from_facts_in_the_prompt_and_re_reads_what_it_cannot_see() -> None:
    from bench.economy_world import GtStep, Scenario, World

    sc = Scenario("t", "goal", [GtStep("g0", "find", "search", [], 0), GtStep("g1", "use", "compute", ["g0"], 1)], set())
    world = World(sc)
    out = world.run("[[g0]] find")
    assert world.fact("g0") in out
    # The fact is in the prompt: the next step is planned with it written into its task.
    (step,) = world.next_round(f"evidence: {out}")
    assert step.id == "g1" and world.fact("g0") in step.text
    # Cut from the prompt: a re-read of g0 instead, and g1 waits.
    (reread,) = world.next_round("evidence: (an excerpt without the fact)")
    assert reread.text.startswith("[[r:g0]]") and world.fact("g0") in world.run(reread.text)
    assert world.rereads == 1
    with pytest.raises(RuntimeError, match="missing input for g1"):
        world.run("[[g1]] use")  # the tool refuses a task without its input


async def test_ours_is_counted_with_the_intake_and_synthesis_calls_the_shipped_config_makes() -> None:
    from bench.economy import run_ours
    from bench.economy_world import make_scenarios

    sc = next(s for s in make_scenarios(8, seed=11) if s.stages == 1 and not s.fail_attempts)
    tally = await run_ours(sc)
    assert tally.completed
    assert tally.kinds[0] == "RouteIntake" and tally.kinds[-1] == "text"  # intake first, synthesis last
    assert tally.kinds.count("GeneratePlan") >= 1


def test_compaction_keeps_new_entries_whole_and_older_ones_as_an_excerpt() -> None:
    from bench.economy_baselines import EXCERPT, _compacted

    old, new = "x" * 500, "y" * 500
    shown = _compacted([old, new], 1)
    assert shown[1] == new and len(shown[0]) == EXCERPT and shown[0].endswith("…")


def test_every_benchmark_module_is_reachable_from_the_entry_point() -> None:
    """``python -m bench <name>`` runs ``bench/<name>.py``: a module with a ``main`` must be listed."""
    import ast
    from pathlib import Path

    from bench.__main__ import BENCHMARKS

    folder = Path(__file__).resolve().parents[1] / "bench"
    with_main = {
        p.stem for p in folder.glob("*.py")
        if not p.stem.startswith("_")
        and any(isinstance(n, ast.FunctionDef) and n.name == "main" for n in ast.parse(p.read_text()).body)
    }
    # python -m bench.results_md checks RESULTS.md, and python -m bench.guard_replay replays the
    # checks over kept run ends: tools of the benchmarks, measuring nothing themselves
    tools = {"results_md", "guard_replay"}
    assert with_main - set(BENCHMARKS) - tools == set(), "a benchmark module the entry point does not list"
    assert set(BENCHMARKS) <= with_main
