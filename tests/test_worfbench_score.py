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


async def test_one_planner_run_gives_the_no_reask_and_the_full_answers() -> None:
    from bench.worfbench import workflow_as_generate_plan
    from bench.worfbench_variants import RawRecorder, planner_answers
    from soothe_planner.models import PlannerSettings
    from soothe_planner.testing import ScriptedChatModel

    gold = parse_workflow(GOLD_DIAMOND)
    good = workflow_as_generate_plan(gold)
    cyclic = json.loads(json.dumps(good))
    cyclic["steps"][0]["depends_on"] = ["3"]  # 1 -> 3 -> 1: refused, so the full path re-asks
    item = {"conversations": [{}, {"content": "plan a trip"}, {"content": GOLD_DIAMOND}]}
    settings = PlannerSettings(max_plan_steps=8, transport_backoff_s=0.0)

    def lexical(answer: object) -> tuple[bool, float]:
        s = score(parse_workflow(answer.text), gold) if answer.ok else None  # type: ignore[attr-defined]
        return (s.valid, s.node_f1) if s else (False, 0.0)

    no_reask, full, _ = await planner_answers(ScriptedChatModel(responses=[good]), settings, item, RawRecorder())
    assert lexical(no_reask) == lexical(full) == (True, 1.0)
    model = ScriptedChatModel(responses=[cyclic, good])
    no_reask, full, stats = await planner_answers(model, settings, item, RawRecorder())
    assert len(model.calls) == 2 and stats["reask"] == 1
    assert lexical(no_reask) == (False, 0.0)  # retries=0 would have stopped at the cycle
    assert lexical(full) == (True, 1.0)


@pytest.mark.skipif(not DATA.is_dir(), reason="WorFBench data not beside the repository")
def test_parts_merge_into_the_run_one_process_would_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import bench._common as common
    from bench.worfbench import VARIANTS, gold_text, load_items, main, sample

    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    chosen = sample(load_items(DATA), 4, 2410)
    for k in (0, 1):
        runs = {}
        for i, it in enumerate(chosen):
            if i % 2 != k:
                continue
            good = {"text": gold_text(it), "ok": True, "raw": [], "error": "", "notes": []}
            bad = {"text": "", "ok": False, "raw": ["prose"], "error": "no plan", "notes": []}
            runs[str(it["id"])] = {"subset": it["source"], "planner_stats": {},
                                   "answers": {v: good if v == "planner, full" or k == 0 else bad for v in VARIANTS}}
        common.write_results(f"worfbench.part-{k}-of-2", {"seed": 2410, "config": "default.yaml",
                                                          "items_requested": 4, "part": [k, 2],
                                                          "elapsed_s": 10.0 + k, "runs": runs})
    assert main(["--merge", "2", "--n", "4", "--data", str(DATA), "--similarity", "exact"]) == 0
    merged = json.loads((tmp_path / "worfbench.json").read_text())
    assert merged["items_done"] == 4 and merged["elapsed_s"] == 21.0  # 10 + 11: the parts' model time
    assert merged["summary"]["planner, full"]["all"]["ours_validity"] == 1.0
    assert merged["summary"]["single call (two-shot)"]["all"]["ours_validity"] == 0.5
    assert merged["summary"]["single call (two-shot)"]["all"]["f1_chain_corrected"] == 0.5
    assert sorted(r["id"] for r in merged["per_item"]) == sorted(str(it["id"]) for it in chosen)
    saved = json.loads((tmp_path / "worfbench.answers.json").read_text())
    assert saved["runs"][str(chosen[1]["id"])]["answers"]["structured single call"]["raw"] == ["prose"]
    # the saved answers score again without a model, to the same numbers
    assert main(["--rescore", "--n", "4", "--data", str(DATA), "--similarity", "exact"]) == 0
    assert json.loads((tmp_path / "worfbench.json").read_text())["summary"] == merged["summary"]
    # a part from another run is refused, naming the mismatch
    with pytest.raises(SystemExit, match="seed 2410, 4 items"):
        main(["--merge", "2", "--n", "6", "--data", str(DATA)])
    # a missing part is refused, unless the report is asked for the parts written so far
    (tmp_path / "worfbench.part-1-of-2.json").unlink()
    with pytest.raises(SystemExit, match=r"part-1-of-2\.json is missing; run --part 1/2 first"):
        main(["--merge", "2", "--n", "4", "--data", str(DATA), "--similarity", "exact"])
    assert main(["--merge", "2", "--partial", "--n", "4", "--data", str(DATA), "--similarity", "exact"]) == 0
    part = json.loads((tmp_path / "worfbench.json").read_text())
    assert (part["items_requested"], part["items_done"]) == (4, 2)
    assert sorted(r["id"] for r in part["per_item"]) == sorted(str(it["id"]) for it in chosen[0::2])


# --------------------------------------------------------------------------- the four variants


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


async def test_every_variant_answers_with_its_raw_output_saved() -> None:
    from bench.worfbench import gold_of, workflow_as_generate_plan
    from bench.worfbench_variants import RawRecorder, planner_answers, single_call, structured_single_call
    from soothe_planner.models import PlannerSettings
    from soothe_planner.testing import FunctionChatModel

    item = _tool_item()
    plan = workflow_as_generate_plan(gold_of(item))  # type: ignore[arg-type]
    bold = "Sure!\n```\n**Node:**\n1. search flights to Paris\n**Edge:** (START,1) (1,END)\n```"
    seen: list[str] = []

    def answer(call: object) -> object:
        text = "\n".join(m.text for m in call.messages)  # type: ignore[attr-defined]
        seen.append(text)
        return bold if call.schema_name is None else plan  # type: ignore[attr-defined]

    model, recorder = FunctionChatModel(answer), RawRecorder()
    model.callbacks = [recorder]
    settings = PlannerSettings(max_plan_steps=10, transport_backoff_s=0.0)
    one = await single_call(model, item, recorder)
    structured = await structured_single_call(model, settings, item, recorder)
    no_reask, full, _ = await planner_answers(model, settings, item, recorder)
    assert one.text == bold and one.raw == [bold]
    assert structured.ok and structured.text == full.text == no_reask.text
    assert "book a hotel in Paris" in structured.raw[0]  # the tool call's arguments, as JSON
    assert full.text.startswith("Node:\n1: search flights to Paris") and "(1,3) (2,3)" in full.text
    whole = ("with many details " * 300).strip()
    assert len(seen) == 3 and all(whole in text for text in seen)  # the task is never cut


async def test_the_structured_single_call_takes_no_repair() -> None:
    from bench.worfbench_variants import RawRecorder, structured_single_call
    from soothe_planner.models import PlannerSettings
    from soothe_planner.testing import FunctionChatModel

    # A dependency on a made-up id would be dropped by the planner's repairs; here it fails the schema
    # only if malformed, so send a reply that does not fit the schema at all.
    model = FunctionChatModel(lambda call: {"plan_action": "new", "steps": "not a list"})
    out = await structured_single_call(model, PlannerSettings(transport_backoff_s=0.0), _tool_item(), RawRecorder())
    assert not out.ok and "does not fit the schema" in out.error


def test_a_plan_becomes_answer_text_with_start_end_and_its_dangling_edges_noted() -> None:
    from bench.worfbench_variants import plan_answer

    text, notes = plan_answer([("a", "first", []), ("b", "second", ["a", "zz"]), ("c", "third", [])])
    assert text == "Node:\n1: first\n2: second\n3: third\nEdge: (START,1) (START,3) (1,2) (2,END) (3,END)"
    assert notes == ["step 'b' depends on 'zz', which is not a step: edge dropped"]


async def test_a_model_run_saves_every_variant_of_every_item() -> None:
    from types import SimpleNamespace

    from bench.worfbench import _run_items, gold_of, workflow_as_generate_plan
    from soothe_planner.models import PlannerSettings
    from soothe_planner.testing import FunctionChatModel

    items = [dict(_tool_item(), id=f"x_{i}") for i in range(2)]
    plan = workflow_as_generate_plan(gold_of(items[0]))  # type: ignore[arg-type]
    model = FunctionChatModel(lambda call: "OK" if call.schema_name is None else plan)
    base = SimpleNamespace(model=model, settings=PlannerSettings(max_plan_steps=3, transport_backoff_s=0.0))
    runs, _ = await _run_items(items, base, max_seconds=600, max_steps=10)
    assert list(runs) == ["x_0", "x_1"]
    for run in runs.values():
        assert run["answers"]["single call (two-shot)"]["raw"] == ["OK"]
        assert all(a["ok"] for v, a in run["answers"].items() if v != "single call (two-shot)")
        assert run["answers"]["planner, full"]["text"].startswith("Node:\n1: search flights to Paris")


async def test_a_run_reports_each_item_as_it_ends_and_skips_the_items_it_is_given() -> None:
    from types import SimpleNamespace

    from bench.worfbench import _run_items, gold_of, workflow_as_generate_plan
    from soothe_planner.models import PlannerSettings
    from soothe_planner.testing import FunctionChatModel

    items = [dict(_tool_item(), id=f"x_{i}") for i in range(3)]
    plan = workflow_as_generate_plan(gold_of(items[0]))
    model = FunctionChatModel(lambda call: "OK" if call.schema_name is None else plan)
    base = SimpleNamespace(model=model, settings=PlannerSettings(max_plan_steps=3, transport_backoff_s=0.0))
    kept = {"subset": "seal_tools", "answers": {}, "planner_stats": {}, "kept": True}
    seen: list[list[str]] = []
    runs, _ = await _run_items(items, base, max_seconds=600, max_steps=10, done={"x_1": kept},
                               on_item=lambda runs, seconds: seen.append(list(runs)))
    assert runs["x_1"] is kept  # not planned again
    assert seen == [["x_1", "x_0"], ["x_1", "x_0", "x_2"]]
    planned = [c for c in model.calls if c.schema_name is None and "Say OK" not in str(c.messages)]
    assert len(planned) == 2  # one two-shot call for each item not given


@pytest.mark.skipif(not DATA.is_dir(), reason="WorFBench data not beside the repository")
def test_a_part_resumes_from_its_own_file_and_refuses_another_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench._common as common
    import bench.worfbench as wb

    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    chosen = wb.sample(wb.load_items(DATA), 4, 2410)
    first = str(chosen[0]["id"])
    common.write_results("worfbench.part-0-of-2", {"seed": 2410, "config": "default.yaml", "items_requested": 4,
                                                   "part": [0, 2], "elapsed_s": 30.0,
                                                   "runs": {first: {"subset": chosen[0]["source"]}}})
    given: dict[str, object] = {}

    async def run_model(items: list[dict[str, object]], *args: object, done: dict[str, object],
                        on_item: object) -> tuple[dict[str, object], float]:
        given.update(ids=[it["id"] for it in items], done=dict(done))
        runs = {**done, str(items[1]["id"]): {"subset": items[1]["source"]}}
        on_item(runs, 5.0)  # type: ignore[operator]
        return runs, 7.0

    monkeypatch.setattr(wb, "run_model", run_model)
    with pytest.raises(SystemExit, match=r"part-0-of-2\.json exists: --resume to continue it"):
        wb.main(["--part", "0/2", "--n", "4", "--data", str(DATA)])  # a part's answers are never overwritten
    assert given == {}
    assert wb.main(["--part", "0/2", "--resume", "--n", "4", "--data", str(DATA)]) == 0
    assert given["ids"] == [chosen[0]["id"], chosen[2]["id"]] and list(given["done"]) == [first]  # type: ignore[call-overload]
    saved = json.loads((tmp_path / "worfbench.part-0-of-2.json").read_text())
    assert sorted(saved["runs"]) == sorted([first, str(chosen[2]["id"])]) and saved["elapsed_s"] == 37.0
    with pytest.raises(SystemExit, match="seed 2410, 4 items"):
        wb.main(["--part", "0/2", "--resume", "--n", "6", "--data", str(DATA)])
    with pytest.raises(SystemExit, match="--resume continues a part's file"):
        wb.main(["--resume", "--n", "4", "--data", str(DATA)])


async def test_each_item_has_the_call_budget_of_one_run_not_a_share_of_one_budget() -> None:
    from types import SimpleNamespace

    from bench.worfbench import _run_items, gold_of, workflow_as_generate_plan
    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
    from soothe_planner.models import PlannerSettings
    from soothe_planner.testing import FunctionChatModel

    items = [dict(_tool_item(), id=f"x_{i}") for i in range(4)]
    plan = workflow_as_generate_plan(gold_of(items[0]))  # type: ignore[arg-type]
    model = FunctionChatModel(lambda call: "OK" if call.schema_name is None else plan)
    controller = ConcurrencyController(ConcurrencyPolicy(max_total_llm_calls=5))  # 3 calls an item, 13 in all
    base = SimpleNamespace(model=controller.wrap_model(model), controller=controller,
                           settings=PlannerSettings(max_plan_steps=3, transport_backoff_s=0.0))
    runs, _ = await _run_items(items, base, max_seconds=600, max_steps=10)
    errors = [a["error"] for r in runs.values() for a in r["answers"].values() if a["error"]]
    assert errors == [] and all(a["ok"] for r in runs.values() for a in r["answers"].values())
    assert len(model.calls) == 13 and controller.total_llm_calls == 0  # the runs' budgets, not the base's


@pytest.mark.parametrize(("spec", "alias_part"), [("local", "0.5b"), ("local:1.5b", "1.5b")])
async def test_the_benchmark_serves_the_configured_embedded_model_with_its_long_context(
    spec: str, alias_part: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import bench.worfbench as wb
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
