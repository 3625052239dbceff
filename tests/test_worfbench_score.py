"""The WorFBench scorer: parsing, validity, one-to-one node matching, edge F1 on reductions."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

import bench.worfbench_score as wscore
from bench.worfbench_score import (
    END,
    START,
    match_nodes,
    parse_workflow,
    score,
    transitive_reduction,
    validity_errors,
)

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "worfbench"

GOLD_DIAMOND = (
    "Node:\n1: search flights to Paris\n2: book a hotel in Paris\n3: summarise the trip plan\n"
    "Edge: (START,1) (START,2) (1,3) (2,3) (3,END)"
)


def test_gold_scores_one_against_itself() -> None:
    wf = parse_workflow(GOLD_DIAMOND)
    s = score(wf, wf)
    assert s.valid and (s.node_f1, s.edge_f1) == (1.0, 1.0)


def test_prose_after_graph_header_is_ignored_but_its_edges_count() -> None:
    text = (
        "Node:\n1: look up the price (e.g., AAPL)\n2: report it\nGraph:\n"
        "Here is the topology, as follows:\n- **Edge:** (START, 1) [begin]\n- **Edge:** (1, 2)\n(2,END)"
    )
    wf = parse_workflow(text)
    assert wf.nodes == {"1": "look up the price (e.g., AAPL)", "2": "report it"}
    assert wf.edges == [(START, "1"), ("1", "2"), ("2", END)]
    assert validity_errors(wf) == []


def test_cycle_dangling_edge_and_duplicate_id_make_a_graph_invalid() -> None:
    cyc = parse_workflow("Node:\n1: a\n2: b\nEdge: (START,1) (1,2) (2,1) (2,END)")
    assert any(e.startswith("cycle") for e in validity_errors(cyc))
    dangling = parse_workflow("Node:\n1: a\nEdge: (START,1) (1,7) (1,END)")
    assert any("unknown node '7'" in e for e in validity_errors(dangling))
    dup = parse_workflow("Node:\n1: a\n1: b\nEdge: (START,1) (1,END)")
    assert any("duplicate node id" in e for e in validity_errors(dup))
    assert validity_errors(parse_workflow("no plan here")) == ["no nodes"]


def test_invalid_prediction_scores_zero_on_edges_but_keeps_node_credit() -> None:
    gold = parse_workflow(GOLD_DIAMOND)
    pred = parse_workflow(GOLD_DIAMOND.replace("(3,END)", "(3,1) (3,END)"))
    s = score(pred, gold)
    assert not s.valid and s.edge_f1 == 0.0 and s.node_f1 == 1.0


def test_matching_is_one_to_one_and_maximises_total_similarity(monkeypatch: pytest.MonkeyPatch) -> None:
    # Greedy on the best pair (a-x, 0.9) would leave b only y, under the threshold: one match.
    # The maximum-weight matching takes a-y and b-x: two matches.
    sims = {("a", "x"): 0.9, ("a", "y"): 0.8, ("b", "x"): 0.7, ("b", "y"): 0.3}
    monkeypatch.setattr(wscore, "similarity", lambda p, g: sims[(p, g)])
    assert match_nodes({"a": "a", "b": "b"}, {"x": "x", "y": "y"}) == {"a": "y", "b": "x"}
    # More predictions than gold nodes: still one-to-one.
    sims.update({("c", "x"): 0.95, ("c", "y"): 0.1})
    mapping = match_nodes({"a": "a", "b": "b", "c": "c"}, {"x": "x", "y": "y"})
    assert mapping == {"c": "x", "a": "y"}


def test_pairs_below_the_threshold_never_match() -> None:
    assert match_nodes({"1": "bake a cake"}, {"1": "file the tax return"}) == {}
    assert match_nodes({"1": "bake a cake"}, {"1": "file the tax return"}, threshold=0.0) == {"1": "1"}


def test_transitive_reduction_drops_implied_edges_only() -> None:
    red = transitive_reduction(["1", "2", "3"], [("1", "2"), ("2", "3"), ("1", "3")])
    assert red == {("1", "2"), ("2", "3")}


def test_edge_f1_compares_meaning_not_spelling() -> None:
    gold = parse_workflow("Node:\n1: fetch data\n2: plot data\nEdge: (START,1) (1,2) (2,END)")
    # Same graph with a redundant edge, renumbered, and with START/END left implicit.
    pred = parse_workflow("Node:\n7: plot data\n4: fetch data\nEdge: (4,7) (START,7)")
    s = score(pred, gold)
    assert (s.node_f1, s.edge_f1) == (1.0, 1.0)


def test_reordered_chain_loses_edge_credit() -> None:
    gold = parse_workflow("Node:\n1: fetch data\n2: plot data\nEdge: (START,1) (1,2) (2,END)")
    pred = parse_workflow("Node:\n1: plot data\n2: fetch data\nEdge: (START,1) (1,2) (2,END)")
    s = score(pred, gold)
    assert s.node_f1 == 1.0 and s.edge_f1 < 0.5


@pytest.mark.skipif(not DATA.is_dir(), reason="WorFBench data not beside the repository")
def test_every_gold_item_of_each_subset_is_valid_and_scores_one() -> None:
    for subset in ("toolbench", "seal_tools", "lumos", "os"):
        items = json.loads((DATA / subset / "graph_eval.json").read_text())
        for item in random.Random(7).sample(items, min(40, len(items))):
            wf = parse_workflow(item["conversations"][2]["content"])
            assert validity_errors(wf) == [], item["id"]
            s = score(wf, wf)
            assert (s.node_f1, s.edge_f1) == (1.0, 1.0), item["id"]


GOLD_SAMPLES = [
    GOLD_DIAMOND,
    "Node:\n1: Identify the activity the men are engaged in.\n2: Answer what the two men just did.\n"
    "3: Select the choice from the four answer choices.\nEdge: (START,1) (1,2) (2,3) (3,END)",
    "Node:\n1: fetch data\n2: plot data\n3: write the caption\nGraph:\nprose here\nEdge: (START,1) (1,2) (1,3) (START,3) (2,END) (3,END)",
]


async def test_gold_plans_fed_through_the_planner_score_one() -> None:
    from bench.worfbench import plan_as_workflow, run_sanity, sample, workflow_as_generate_plan
    from soothe_planner.models import PlanContext, PlannerSettings
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import ScriptedChatModel

    for text in GOLD_SAMPLES:
        gold = parse_workflow(text)
        planner = LLMPlanner(
            ScriptedChatModel(responses=[workflow_as_generate_plan(gold)]),
            settings=PlannerSettings(max_plan_steps=8),
        )
        plan = await planner.create_plan("the task", PlanContext())
        s = score(plan_as_workflow(plan), gold)
        assert s.valid and (s.node_f1, s.edge_f1) == (1.0, 1.0), text
    if DATA.is_dir():
        from bench.worfbench import gold_of, load_items

        chosen = sample(load_items(DATA), 12, seed=3)
        answers = await run_sanity(chosen)
        scores = [score(parse_workflow(a), gold_of(it)) for a, it in zip(answers, chosen, strict=True)]
        assert len(scores) == 12 and all(s.valid and s.node_f1 == s.edge_f1 == 1.0 for s in scores)


# --------------------------------------------------------------------------- the two-shot prompt and the answer text


def _tool_item(source: str = "seal_tools") -> dict[str, object]:
    return {
        "id": "x_1",
        "source": source,
        "conversations": [
            {"role": "system", "content": "You are a helpful task planner."},
            {"role": "user", "content": "Task: plan a trip " + "with many details " * 300},
            {"role": "assistant", "content": GOLD_DIAMOND},
        ],
    }


def test_the_two_shot_prompt_is_system_examples_then_the_whole_task() -> None:
    from bench.worfbench_variants import two_shot_messages

    item = _tool_item()
    msgs = two_shot_messages(item)
    assert [m.type for m in msgs] == ["system", "human", "ai", "human", "ai", "human"]
    assert msgs[-1].content == "Now it's your turn.\n" + item["conversations"][1]["content"]  # type: ignore[index]
    assert msgs[1].content == two_shot_messages(_tool_item("toolbench"))[1].content  # seal_tools borrows toolbench's
    assert "(START,1)" in msgs[2].content


def test_a_plan_becomes_answer_text_with_start_end_and_its_dangling_edges_noted() -> None:
    from bench.worfbench_variants import plan_answer

    text, notes = plan_answer([("a", "first", []), ("b", "second", ["a", "zz"]), ("c", "third", [])])
    assert text == "Node:\n1: first\n2: second\n3: third\nEdge: (START,1) (START,3) (1,2) (2,END) (3,END)"
    assert notes == ["step 'b' depends on 'zz', which is not a step: edge dropped"]


@pytest.mark.parametrize(("spec", "alias_part"), [("local", "0.5b"), ("local:1.5b", "1.5b")])
async def test_the_benchmark_serves_the_configured_embedded_model_with_its_long_context(
    spec: str, alias_part: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.worfbench_run as wb
    import soothe_planner.local as local

    started: list[dict[str, object]] = []

    class FakeServer:
        def __init__(self, **kwargs: object) -> None:
            started.append(kwargs)

        def start(self) -> str:
            return "http://127.0.0.1:1/v1"

        def stop(self) -> None:
            pass

    async def run_items(*args: object, **kwargs: object) -> tuple[dict[str, object], float]:
        return {}, 0.0

    monkeypatch.delenv("SOOTHE_LOCAL_LLM_URL", raising=False)
    monkeypatch.setattr(local, "LocalModelServer", FakeServer)
    monkeypatch.setattr(wb, "_run_items", run_items)
    config = tmp_path / "c.yaml"
    config.write_text(f"models:\n  default: {spec}\n")
    assert await wb.run_model([], config, 1.0, 12288, 10) == ({}, 0.0)
    assert len(started) == 1 and started[0]["n_ctx"] == 12288
    assert alias_part in started[0]["model"].alias  # type: ignore[attr-defined]
