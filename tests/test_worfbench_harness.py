"""The WorFBench harness: every row gets the same items and tools, says what ran, and what it cost.

Scripted models only (``FunctionChatModel``, and the bench's own ``worfbench_scripted``): the
planner, its prompts, the call records and the scoring are the production path.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bench.worfbench_score import parse_workflow

DATA = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "worfbench"
GOLD = ("Node:\n1: look up the forecast for Paris\n2: look up the hotels in Paris\n3: plan the day from both\n"
        "Edge: (START,1) (START,2) (1,3) (2,3) (3,END)")
SYSTEM = "You are a helpful task planner."
TASKS = {
    "toolbench": "Task: plan a day in Paris.\napi_list:[{'name': 'forecast_for_weather', 'description': 'Weather "
                 "forecast for a city.', 'parameters': {'type': 'object', 'properties': {'city': {'type': 'string', "
                 "'description': 'the city', 'example_value': 'Paris'}, 'days': {'type': 'integer', 'description': "
                 "''}}, 'required': ['city'], 'optional': ['days']}}, {'name': 'hotels_for_booking', 'description': "
                 "'Hotels in a city.', 'parameters': {'type': 'object', 'properties': {}, 'required': [], "
                 "'optional': []}}]",
    "seal_tools": "Task: plan a day in Paris.\nThe tool list you can select from: [{'api_name': 'getForecast', "
                  "'api_description': 'Get a forecast', 'field': 'Weather', 'parameters': {'city': {'type': 'str', "
                  "'description': 'the city'}, 'days': {'type': 'int', 'description': 'how many'}, 'detail': "
                  "{'type': 'complex', 'description': 'unknown kind'}}, 'required': ['city'], 'responses': {}}, "
                  "{'api_name': 'findHotels', 'api_description': 'Find hotels', 'field': 'Travel', 'parameters': "
                  "{}, 'required': [], 'responses': {}}]\n",
    "lumos": "Task: plan a day in Paris.\nThe api list you can use: {'QA(context, query)': 'Given context, answer "
             "the query.', 'Define(variable/number)': 'Define a variable'}",
    "os": "Now, I will start a new problem in a new OS. My problem is:\n\nPlan a day in Paris.The action list you "
          "can take: bash: execute some bash code, take bash action\nfinish: have finished the task, take finish "
          "action\nanswer: have got the answer to the question, take answer action",
}
TOOLS = {"toolbench": ["forecast_for_weather", "hotels_for_booking"], "seal_tools": ["getForecast", "findHotels"],
         "lumos": ["QA", "Define"], "os": ["bash", "finish", "answer"]}


def _item(source: str, i: int = 0, task: str | None = None) -> dict[str, Any]:
    return {"id": f"{source}_{i}", "source": source, "conversations": [
        {"role": "system", "content": SYSTEM}, {"role": "user", "content": task or TASKS[source]},
        {"role": "assistant", "content": GOLD}]}


def _base(model: Any, **settings: Any) -> Any:
    from soothe_planner.models import PlannerSettings

    return SimpleNamespace(model=model, settings=PlannerSettings(max_plan_steps=3, transport_backoff_s=0.0,
                                                                 structured_output_method="function_calling",
                                                                 **settings))


def _embedded_like(fn: Any) -> Any:
    """A function model declaring, for ``auto``, what the embedded model declares."""
    from bench.worfbench_scripted import EMBEDDED_METADATA
    from soothe_planner.testing import FunctionChatModel

    return FunctionChatModel(fn, metadata=dict(EMBEDDED_METADATA))


# --------------------------------------------------------------------------- the tools each task offers


def test_each_subsets_tool_list_becomes_capabilities_as_its_text_shows_them() -> None:
    from bench.worfbench_tools import capabilities_of

    tb = {c.name: c for c in capabilities_of(_item("toolbench"))}
    assert list(tb) == TOOLS["toolbench"]
    assert tb["forecast_for_weather"].args_schema == {
        "type": "object", "required": ["city"],
        "properties": {"city": {"type": "string", "description": "the city"}, "days": {"type": "integer"}}}
    seal = {c.name: c for c in capabilities_of(_item("seal_tools"))}
    assert list(seal) == TOOLS["seal_tools"] and seal["getForecast"].description == "Get a forecast"
    props = seal["getForecast"].args_schema["properties"]
    assert props["city"]["type"] == "string" and props["days"]["type"] == "integer"
    assert "type" not in props["detail"]  # a type the text does not name is left out, never guessed
    assert seal["getForecast"].args_schema["required"] == ["city"]
    lumos = capabilities_of(_item("lumos"))
    assert [c.name for c in lumos] == TOOLS["lumos"]
    assert lumos[0].args_schema == {"type": "object", "properties": {"context": {}, "query": {}}}
    assert list(lumos[1].args_schema["properties"]) == ["variable/number"]
    os_ = capabilities_of(_item("os"))
    assert [c.name for c in os_] == TOOLS["os"] and all(c.args_schema is None and c.kind == "tool" for c in os_)
    assert os_[0].description == "execute some bash code, take bash action"
    nothing = _item("lumos", task="Task: what is 2+2?\nThe api list you can use: []")
    assert capabilities_of(nothing) == []


@pytest.mark.skipif(not DATA.is_dir(), reason="WorFBench data not beside the repository")
def test_every_item_of_the_data_offers_tools_its_text_names() -> None:
    from bench.worfbench import load_items
    from bench.worfbench_tools import capabilities_of

    for subset, items in load_items(DATA).items():
        for item in items:
            caps = capabilities_of(item)
            text = item["conversations"][1]["content"]
            assert all(c.name in text for c in caps), item["id"]
            assert caps or subset == "lumos", item["id"]  # only a few lumos items offer nothing


# --------------------------------------------------------------------------- one run of every row


async def _run(items: list[dict[str, Any]], model: Any, **settings: Any) -> dict[str, Any]:
    from bench.worfbench_run import _run_items

    found, _ = await _run_items(items, _base(model, **settings), max_seconds=600, max_steps=10, context_tokens=8192)
    return found


def _tagged(seen: list[tuple[str, Any]]) -> Any:
    """A reply function answering every row's call with the gold plan (the bench's scripted forms),
    noting each call with the run it came from."""
    from bench.worfbench_scripted import gold_as_calls, gold_as_compact, gold_as_full
    from bench.worfbench_variants import RUNNING

    def answer(call: Any) -> Any:
        run = RUNNING.get()
        seen.append((run, call))
        wf = parse_workflow(GOLD)
        if not run:
            return "OK"
        if run == "two-shot":
            return GOLD
        if call.schema_name is None:
            return gold_as_calls(wf)
        return gold_as_compact(wf) if run == "compact" else gold_as_full(wf)

    return answer


async def test_the_planner_rows_are_shown_each_tasks_tools_and_every_row_gets_the_same_items() -> None:
    from bench.worfbench_variants import VARIANTS, task_of

    items = [_item(s, i) for i, s in enumerate(TASKS)]
    seen: list[tuple[str, Any]] = []
    found = await _run(items, _embedded_like(_tagged(seen)))
    assert list(found) == [it["id"] for it in items]
    for item in items:
        record = found[item["id"]]
        assert sorted(record["answers"]) == sorted(v.name for v in VARIANTS)  # every row, every item
        assert record["capabilities"] == TOOLS[item["source"]]
        assert all(a["ok"] for a in record["answers"].values()), record["answers"]
    planner_calls = [(run, c) for run, c in seen if run in ("compact", "full")]
    assert {run for run, _ in planner_calls} == {"compact", "full"}
    for run, call in planner_calls:
        prompt = call.prompt_text
        item = next(it for it in items if task_of(it) in prompt)  # each call is about one item, sent whole
        briefing = prompt.replace(task_of(item), "")  # the prompt without the task's own text
        for name in TOOLS[item["source"]]:  # the tools as capabilities: listed by the planner, not only in the task
            assert f"- {name}(" in briefing, (run, item["id"], name)
    two_shot = [c for run, c in seen if run == "two-shot"]
    assert len(two_shot) == len(items) and all(any(task_of(it) in c.prompt_text for it in items) for c in two_shot)


async def test_the_labels_are_what_the_planner_ran_not_what_the_row_is_called() -> None:
    from bench.worfbench_report import row_label

    # one item whose tool has no Python name: the planner writes that plan as JSON even under 'calls'
    odd = _item("toolbench", 9, task=TASKS["toolbench"].replace("hotels_for_booking", "1_3_hotels"))
    items = [_item("os", 1), odd]
    seen: list[tuple[str, Any]] = []
    found = await _run(items, _embedded_like(_tagged(seen)))
    compact = row_label("compact: planner, re-asks on", list(found.values()))
    full = row_label("full: single call", list(found.values()))
    assert (compact["profile"], compact["plan_syntax"], compact["plan_syntax_used"]) == (
        ["compact"], ["calls"], {"calls": 1, "json": 1})
    assert (full["profile"], full["plan_syntax"], full["plan_syntax_used"]) == (["full"], ["json"], {"json": 2})
    assert compact["reasks"] == "on" and full["reasks"] == "off" and compact["retries"] == [2]
    assert compact["capabilities_items"] == 2 and compact["capabilities_per_item"] == 2.5
    assert compact["prompt_budget_tokens"] == [8192 - 1024]  # the server's context less the reply's room
    # what the calls really were: a plan in calls is a plain call, a JSON plan a structured one
    first: dict[tuple[str, str], str | None] = {}
    for run, call in seen:
        if run in ("compact", "full") and call.metadata.get("soothe_phase") == "plan-generate":
            item = "odd" if "1_3_hotels" in call.prompt_text else "os"
            first.setdefault((run, item), call.schema_name)
    assert first == {("compact", "os"): None, ("compact", "odd"): "GeneratePlan",
                     ("full", "os"): "GeneratePlan", ("full", "odd"): "GeneratePlan"}
    # configured JSON plans: the compact rows say json, whatever they are called
    found = await _run([_item("os", 1)], _embedded_like(_tagged([])), plan_syntax="json")
    assert row_label("compact: single call", list(found.values()))["plan_syntax"] == ["json"]
    assert "syntax json 1" in row_label("compact: single call", list(found.values()))["text"]


async def test_the_single_call_is_the_planners_first_call_read_with_no_repair() -> None:
    from soothe_planner.testing import FunctionChatModel

    item = _item("toolbench")

    def answer(call: Any) -> Any:
        from bench.worfbench_variants import RUNNING

        if RUNNING.get() in ("", "two-shot"):
            return "OK" if not RUNNING.get() else GOLD
        # a dependency written as a string where a list belongs: the schema refuses it, the planner's
        # reader takes it (a tolerance of the lenient parser)
        return {"plan_action": "new", "steps": [
            {"id": "1", "description": "look up the hotels in Paris", "tool": "hotels_for_booking", "args": {}},
            {"id": "2", "description": "plan the day from the hotels", "depends_on": "1"}]}

    found = await _run([item], FunctionChatModel(answer))
    answers = found[item["id"]]["answers"]
    assert not answers["full: single call"]["ok"] and "does not fit" in answers["full: single call"]["error"]
    assert answers["full: single call"]["calls"] == 1
    assert answers["full: planner, re-asks off"]["ok"] and answers["full: planner, re-asks on"]["ok"]
    assert "(1,2)" in answers["full: planner, re-asks on"]["text"]
    assert not answers["compact: single call"]["ok"] and answers["compact: planner, re-asks on"]["ok"]


async def test_a_reask_is_counted_in_the_on_row_and_fails_the_off_row() -> None:
    import bench.worfbench_report as report
    from bench.worfbench_scripted import gold_as_full
    from bench.worfbench_variants import RUNNING
    from soothe_planner.testing import FunctionChatModel

    good = gold_as_full(parse_workflow(GOLD))
    cyclic = json.loads(json.dumps(good))
    cyclic["steps"][0]["depends_on"] = ["3"]  # 1 -> 3 -> 1: refused, so the planner re-asks
    replies = {"full": [cyclic, good]}

    def answer(call: Any) -> Any:
        run = RUNNING.get()
        return replies[run].pop(0) if run in replies else ("OK" if not run else GOLD)

    item = _item("lumos")
    found = await _run([item], FunctionChatModel(answer))
    run = found[item["id"]]
    off, on = run["answers"]["full: planner, re-asks off"], run["answers"]["full: planner, re-asks on"]
    assert (off["ok"], off["calls"], on["ok"], on["calls"]) == (False, 1, True, 2)
    calls = run["runs"]["full"]["calls"]
    assert [c["phase"] for c in calls] == ["plan-generate", "plan-reask"]
    assert (report.item_cost(run, "full: planner, re-asks on") or {}).get("llm_calls") == 2
    assert report.raw_of(run, "full: planner, re-asks off") == [calls[0]["text"]]
    assert run["runs"]["full"]["planner_stats"]["reask"] == 1


# --------------------------------------------------------------------------- cost and raw answers


def test_the_cost_is_computed_from_the_call_records_it_accounts_for() -> None:
    from bench.worfbench_calls import cost_of, summarise_cost

    calls = [{"prompt_tokens": 100, "completion_tokens": 10, "seconds": 1.5},
             {"prompt_tokens": 120, "completion_tokens": 30, "seconds": 2.5}]
    assert cost_of(calls) == {"llm_calls": 2, "prompt_tokens": 220, "completion_tokens": 40, "model_seconds": 4.0}
    unreported = cost_of([*calls, {"prompt_tokens": None, "completion_tokens": None, "seconds": 1.0}])
    assert unreported["prompt_tokens"] is None and unreported["llm_calls"] == 3  # never estimated
    summary = summarise_cost([cost_of(calls), cost_of(calls[:1]), unreported])
    assert summary["llm_calls_per_item"] == 2.0 and summary["prompt_tokens_per_item"] == 160.0
    assert summary["prompt_tokens_items_unreported"] == 1 and summary["model_seconds_total"] == 10.5  # 4.0 + 1.5 + 5.0


async def test_the_recorder_keeps_the_tokens_the_model_reports_and_each_calls_phase() -> None:
    from langchain_core.messages import AIMessage

    from bench.worfbench_calls import CallRecorder
    from soothe_planner.testing import ScriptedChatModel

    recorder = CallRecorder()
    reply = AIMessage("Node:\n1: a\nEdge: (START,1) (1,END)",
                      usage_metadata={"input_tokens": 11, "output_tokens": 7, "total_tokens": 18})
    model = ScriptedChatModel(responses=[reply, RuntimeError("server gone")], callbacks=[recorder])
    await model.ainvoke("plan it", config={"metadata": {"soothe_phase": "plan-generate"}})
    with pytest.raises(RuntimeError):
        await model.ainvoke("again")
    first, failed = recorder.take()
    assert (first["phase"], first["prompt_tokens"], first["completion_tokens"]) == ("plan-generate", 11, 7)
    assert first["text"] == reply.text and first["seconds"] >= 0.0
    assert failed["error"] == "RuntimeError: server gone" and failed["prompt_tokens"] is None
    assert recorder.take() == []


@pytest.mark.skipif(not DATA.is_dir(), reason="WorFBench data not beside the repository")
def test_a_scripted_run_reports_every_row_with_its_label_cost_and_raw_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench._common as common
    from bench.worfbench import main
    from bench.worfbench_variants import VARIANTS

    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    assert main(["--scripted", "--n", "4", "--data", str(DATA), "--tag", "t"]) == 0
    out = json.loads((tmp_path / "worfbench-t.json").read_text())
    saved = json.loads((tmp_path / "worfbench-t.answers.json").read_text())
    assert out["variants"] == [v.name for v in VARIANTS] and out["protocol"] == 2 and out["scripted"]
    assert set(out["provenance"]) >= {"commit", "date", "cpu_model"}
    for v in VARIANTS:
        assert out["summary"][v.name]["all"]["n"] == 4
        assert set(out["cost"][v.name]) >= {"llm_calls_per_item", "prompt_tokens_per_item",
                                            "completion_tokens_per_item", "model_seconds_per_item"}
        assert out["labels"][v.name]["text"]
    for row in out["per_item"]:
        run = saved["runs"][row["id"]]
        for v in VARIANTS:
            calls = run["runs"][v.run]["calls"][: run["answers"][v.name]["calls"]]
            assert row[v.name]["raw"] == [c["text"] for c in calls] and row[v.name]["raw"]
            assert row[v.name]["cost"]["llm_calls"] == len(calls)
            assert row[v.name]["cost"]["prompt_tokens"] == sum(c["prompt_tokens"] for c in calls)
    per_item = [row["two-shot, one call"]["cost"]["prompt_tokens"] for row in out["per_item"]]
    assert out["cost"]["two-shot, one call"]["prompt_tokens_per_item"] == sum(per_item) / 4
    # the saved answers score again without a model, to the same numbers
    assert main(["--rescore", "--n", "4", "--data", str(DATA), "--tag", "t", "--similarity", "exact"]) == 0
    assert json.loads((tmp_path / "worfbench-t.json").read_text())["summary"] == out["summary"]
    # a run cut to the items another run scored: the same items, whatever else is sampled
    picked = [row["id"] for row in out["per_item"]][1:3]
    (tmp_path / "picked.json").write_text(json.dumps({"per_item": [{"id": i} for i in picked]}))
    assert main(["--scripted", "--n", "4", "--data", str(DATA), "--tag", "u", "--items-of", "picked",
                 "--runs", "two-shot"]) == 0
    cut = json.loads((tmp_path / "worfbench-u.json").read_text())
    assert [row["id"] for row in cut["per_item"]] == picked and cut["variants"] == ["two-shot, one call"]
    with pytest.raises(SystemExit, match="holds the items of picked"):
        main(["--rescore", "--n", "4", "--data", str(DATA), "--tag", "u"])


def test_a_report_refuses_rows_scored_on_different_items(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bench.worfbench import report

    item = _item("os")
    answer = {"text": GOLD, "ok": True, "error": "", "notes": [], "steps": [], "calls": 0}
    found = {"os_0": {"subset": "os", "answers": {"two-shot, one call": answer}},
             "os_1": {"subset": "os", "answers": {"full: single call": answer}}}
    args = SimpleNamespace(seed=1, config=Path("c.yaml"), similarity="exact", merge=None, rescore=True, n_ctx=1)
    with pytest.raises(SystemExit, match="every row is scored on the same items"):
        report([item, dict(item, id="os_1")], found, 0.0, args, 2, lambda p, g: [[1.0] * len(g) for _ in p])  # type: ignore[arg-type]


# --------------------------------------------------------------------------- parts, merge, resume


def _part_runs(chosen: list[dict[str, Any]], k: int, good_rows: set[str]) -> dict[str, Any]:
    from bench.worfbench import gold_text
    from bench.worfbench_variants import VARIANTS

    out = {}
    for i, it in enumerate(chosen):
        if i % 2 != k:
            continue
        call = {"phase": "", "text": "prose", "prompt_tokens": 5, "completion_tokens": 1, "seconds": 0.5,
                "tool_calls": [], "error": ""}
        good = {"text": gold_text(it), "ok": True, "error": "", "notes": [], "steps": [], "calls": 1}
        bad = {"text": "", "ok": False, "error": "no plan", "notes": [], "steps": [], "calls": 1}
        records = {r: {"settings": {"prompt_profile": r, "plan_syntax": "json", "plan_syntax_used": "json",
                                    "retries": 2, "capabilities": 0, "capabilities_passed_as": "x", "prompt": "p"},
                       "calls": [call]} for r in ("two-shot", "compact", "full")}
        out[str(it["id"])] = {"subset": it["source"], "capabilities": [], "runs": records,
                              "answers": {v.name: good if v.name in good_rows or k == 0 else bad for v in VARIANTS}}
    return out


@pytest.mark.skipif(not DATA.is_dir(), reason="WorFBench data not beside the repository")
def test_parts_merge_into_the_run_one_process_would_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import bench._common as common
    from bench.worfbench import load_items, main, sample

    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    chosen = sample(load_items(DATA), 4, 2410)
    for k in (0, 1):
        common.write_results(f"worfbench.part-{k}-of-2", {
            "seed": 2410, "config": "default.yaml", "items_requested": 4, "protocol": 2,
            "run_names": ["two-shot", "compact", "full"], "part": [k, 2], "elapsed_s": 10.0 + k,
            "runs": _part_runs(chosen, k, {"full: planner, re-asks on"})})
    assert main(["--merge", "2", "--n", "4", "--data", str(DATA), "--similarity", "exact"]) == 0
    merged = json.loads((tmp_path / "worfbench.json").read_text())
    assert merged["items_done"] == 4 and merged["elapsed_s"] == 21.0  # 10 + 11: the parts' model time
    assert merged["summary"]["full: planner, re-asks on"]["all"]["ours_validity"] == 1.0
    assert merged["summary"]["two-shot, one call"]["all"]["ours_validity"] == 0.5
    assert merged["cost"]["two-shot, one call"]["model_seconds_per_item"] == 0.5
    assert sorted(r["id"] for r in merged["per_item"]) == sorted(str(it["id"]) for it in chosen)
    assert merged["per_item"][1]["compact: single call"]["raw"] == ["prose"]
    assert main(["--rescore", "--n", "4", "--data", str(DATA), "--similarity", "exact"]) == 0
    assert json.loads((tmp_path / "worfbench.json").read_text())["summary"] == merged["summary"]
    with pytest.raises(SystemExit, match="seed 2410, 4 items"):
        main(["--merge", "2", "--n", "6", "--data", str(DATA)])
    (tmp_path / "worfbench.part-1-of-2.json").unlink()
    with pytest.raises(SystemExit, match=r"part-1-of-2\.json is missing; run --part 1/2 first"):
        main(["--merge", "2", "--n", "4", "--data", str(DATA), "--similarity", "exact"])
    assert main(["--merge", "2", "--partial", "--n", "4", "--data", str(DATA), "--similarity", "exact"]) == 0
    part = json.loads((tmp_path / "worfbench.json").read_text())
    assert (part["items_requested"], part["items_done"]) == (4, 2)


def test_a_replay_keeps_the_first_departure_from_the_saved_calls() -> None:
    from langchain_core.messages import HumanMessage

    from bench.worfbench_replay import Replay, ReplayDiverged
    from soothe_planner.testing import ScriptedCall

    saved = [{"phase": "plan-generate", "text": "s1 = f()", "tool_calls": [], "error": ""}]
    call = ScriptedCall(index=0, messages=[HumanMessage("plan")], metadata={"soothe_phase": "plan-generate"})
    replay = Replay(saved)
    assert replay.answer(call, "d1").content == "s1 = f()" and replay.whole
    with pytest.raises(ReplayDiverged, match="call 2 was asked; the saved run made 1"):
        replay.answer(call, "d2")
    other = ScriptedCall(index=2, messages=[HumanMessage("plan")], metadata={"soothe_phase": "plan-reask"})
    with pytest.raises(ReplayDiverged, match="call 2 was asked"):  # the first departure is the one kept
        replay.answer(other, "d3")
    assert not replay.whole and replay.digests == ["d1", "d2", "d3"]
    wrong_phase = Replay(saved)
    with pytest.raises(ReplayDiverged, match="call 1 is plan-reask; the saved run's was plan-generate"):
        wrong_phase.answer(other, "d1")


@pytest.mark.skipif(not DATA.is_dir(), reason="WorFBench data not beside the repository")
def test_a_run_reads_from_saved_calls_what_this_code_would_ask_again_and_plans_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench._common as common
    import bench.worfbench as wb

    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    args = ["--scripted", "--n", "3", "--data", str(DATA), "--similarity", "exact", "--part", "0/1"]
    assert wb.main([*args, "--tag", "a"]) == 0
    saved = json.loads((tmp_path / "worfbench-a.part-0-of-1.json").read_text())
    assert wb.main([*args, "--tag", "a", "--digests"]) == 0
    digests = json.loads((tmp_path / "worfbench-a.part-0-of-1.digests.json").read_text())
    assert digests["code"] and sorted(digests["runs"]) == sorted(saved["runs"])
    assert all(len(r["digests"]) == len(saved["runs"][i]["runs"][run]["calls"])
               for i, item in digests["runs"].items() for run, r in item.items())
    # the same code asks the same: every run is read from the saved calls, rows and calls alike
    assert wb.main([*args, "--tag", "b", "--replay-from", "a"]) == 0
    again = json.loads((tmp_path / "worfbench-b.part-0-of-1.json").read_text())
    assert again["replayed_from"] == "a"
    for item_id, item in again["runs"].items():
        assert item["answers"] == saved["runs"][item_id]["answers"]
        for run, record in item["runs"].items():
            assert record["replayed_from"] == "worfbench-a" and record["calls"] == saved["runs"][item_id]["runs"][run]["calls"]
    # a planner asked anything else (here its step limit, in its prompt) plans again; the two-shot
    # prompt is unchanged and is still read from the saved call
    import bench.worfbench_run as run

    real = run.run_settings
    monkeypatch.setattr(run, "run_settings", lambda *a, **k: real(*a, **k).model_copy(
        update={"max_plan_steps": real(*a, **k).max_plan_steps + 1}))
    assert wb.main([*args, "--tag", "c", "--replay-from", "a"]) == 0
    changed = json.loads((tmp_path / "worfbench-c.part-0-of-1.json").read_text())
    for item_id, item in changed["runs"].items():
        assert item["runs"]["two-shot"]["replayed_from"] == "worfbench-a"
        assert not any("replayed_from" in item["runs"][run] for run in ("compact", "full"))
        # planned by the (scripted) model again: its calls are new, its replies the same gold
        assert item["runs"]["full"]["calls"] != saved["runs"][item_id]["runs"]["full"]["calls"]
        assert item["answers"] == saved["runs"][item_id]["answers"]
    # a saved run of another model file is never read in place of this one's model
    other_model = {**saved, "provenance": {**saved["provenance"], "model_digest": "f" * 64}}
    (tmp_path / "worfbench-e.part-0-of-1.json").write_text(json.dumps(other_model))
    (tmp_path / "worfbench-e.part-0-of-1.digests.json").write_text(
        (tmp_path / "worfbench-a.part-0-of-1.digests.json").read_text())
    with pytest.raises(SystemExit, match=r"worfbench-e.part-0-of-1.json was planned by model file sha256 ffffffffffff, "
                                         r"this run loads none \(a scripted model\)"):
        wb.main([*args, "--tag", "f", "--replay-from", "e"])
    # no digests beside a run: nothing to stand on, everything is planned
    (tmp_path / "worfbench-a.part-0-of-1.digests.json").unlink()
    assert wb.main([*args, "--tag", "d", "--replay-from", "a"]) == 0
    planned = json.loads((tmp_path / "worfbench-d.part-0-of-1.json").read_text())
    assert not any("replayed_from" in r for item in planned["runs"].values() for r in item["runs"].values())


@pytest.mark.skipif(not DATA.is_dir(), reason="WorFBench data not beside the repository")
def test_a_legacy_run_is_rescored_with_the_label_of_what_it_ran_and_no_cost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench._common as common
    from bench.worfbench import gold_text, load_items, main, sample

    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    chosen = sample(load_items(DATA), 2, 2410)
    old = ("single call (two-shot)", "structured single call", "planner, no re-ask", "planner, full")
    runs = {str(it["id"]): {"subset": it["source"], "planner_stats": {},
                            "answers": {v: {"text": gold_text(it), "ok": True, "raw": ["r"], "error": "", "notes": []}
                                        for v in old}} for it in chosen}
    common.write_results("worfbench.answers", {"seed": 2410, "config": "default.yaml", "items_requested": 2,
                                               "elapsed_s": 1.0, "runs": runs})
    assert main(["--rescore", "--n", "2", "--data", str(DATA), "--similarity", "exact"]) == 0
    out = json.loads((tmp_path / "worfbench.json").read_text())
    assert out["variants"] == list(old) and out["protocol"] == 1
    assert out["labels"]["structured single call"]["legacy"] and "full profile" in out["labels"]["structured single call"]["text"]
    assert out["cost"]["planner, full"] is None and out["per_item"][0]["planner, full"]["raw"] == ["r"]


@pytest.mark.skipif(not DATA.is_dir(), reason="WorFBench data not beside the repository")
def test_a_part_resumes_from_its_own_file_and_refuses_another_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench._common as common
    import bench.worfbench as wb

    monkeypatch.setattr(common, "RESULTS_DIR", tmp_path)
    chosen = wb.sample(wb.load_items(DATA), 4, 2410)
    first = str(chosen[0]["id"])
    head = {"seed": 2410, "config": "default.yaml", "items_requested": 4, "part": [0, 2], "elapsed_s": 30.0}
    common.write_results("worfbench.part-0-of-2", {**head, "runs": {first: {"subset": chosen[0]["source"]}}})
    with pytest.raises(SystemExit, match="protocol 1"):  # a part of the harness before records: not resumed
        wb.main(["--part", "0/2", "--resume", "--n", "4", "--data", str(DATA)])
    common.write_results("worfbench.part-0-of-2", {**head, "protocol": 2, "run_names": ["two-shot", "compact", "full"],
                                                   "runs": {first: {"subset": chosen[0]["source"]}}})
    given: dict[str, Any] = {}

    async def run_model(items: list[dict[str, Any]], *args: Any, runs: Any, done: dict[str, Any],
                        on_item: Any, reuse: Any = None) -> tuple[dict[str, Any], float]:
        given.update(ids=[it["id"] for it in items], done=dict(done), runs=runs)
        found = {**done, str(items[1]["id"]): {"subset": items[1]["source"]}}
        on_item(found, 5.0)
        return found, 7.0

    monkeypatch.setattr(wb, "run_model", run_model)
    with pytest.raises(SystemExit, match=r"part-0-of-2\.json exists: --resume to continue it"):
        wb.main(["--part", "0/2", "--n", "4", "--data", str(DATA)])  # a part's answers are never overwritten
    assert given == {}
    with pytest.raises(SystemExit, match="resume it with --runs two-shot,compact,full"):
        wb.main(["--part", "0/2", "--resume", "--runs", "full", "--n", "4", "--data", str(DATA)])
    assert wb.main(["--part", "0/2", "--resume", "--n", "4", "--data", str(DATA)]) == 0
    assert given["ids"] == [chosen[0]["id"], chosen[2]["id"]] and list(given["done"]) == [first]
    assert given["runs"] == ("two-shot", "compact", "full")
    saved = json.loads((tmp_path / "worfbench.part-0-of-2.json").read_text())
    assert sorted(saved["runs"]) == sorted([first, str(chosen[2]["id"])]) and saved["elapsed_s"] == 37.0
    assert saved["protocol"] == 2 and saved["run_names"] == ["two-shot", "compact", "full"]
    with pytest.raises(SystemExit, match="seed 2410, 4 items"):
        wb.main(["--part", "0/2", "--resume", "--n", "6", "--data", str(DATA)])
    with pytest.raises(SystemExit, match="--resume continues a part's file"):
        wb.main(["--resume", "--n", "4", "--data", str(DATA)])
    with pytest.raises(SystemExit, match="choose among two-shot, compact, full"):
        wb.main(["--runs", "compact,huge", "--n", "4", "--data", str(DATA)])


async def test_each_item_has_the_call_budget_of_one_run_not_a_share_of_one_budget() -> None:
    from bench.worfbench_run import _run_items
    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy

    items = [_item("os", i) for i in range(4)]
    model = _embedded_like(_tagged([]))
    controller = ConcurrencyController(ConcurrencyPolicy(max_total_llm_calls=5))  # 3 calls an item, 13 in all
    base = _base(controller.wrap_model(model))
    base.controller = controller
    found, _ = await _run_items(items, base, max_seconds=600, max_steps=10)
    errors = [a["error"] for r in found.values() for a in r["answers"].values() if a["error"]]
    assert errors == [] and len(model.calls) == 13 and controller.total_llm_calls == 0


async def test_a_run_reports_each_item_as_it_ends_and_skips_the_items_it_is_given() -> None:
    from bench.worfbench_run import _run_items

    items = [_item("os", i) for i in range(3)]
    model = _embedded_like(_tagged([]))
    kept = {"subset": "os", "answers": {}, "kept": True}
    seen: list[list[str]] = []
    found, _ = await _run_items(items, _base(model), max_seconds=600, max_steps=10, done={"os_1": kept},
                                runs=("two-shot",), on_item=lambda runs, seconds: seen.append(list(runs)))
    assert found["os_1"] is kept  # not planned again
    assert seen == [["os_1", "os_0"], ["os_1", "os_0", "os_2"]]
    assert list(found["os_0"]["runs"]) == ["two-shot"] and list(found["os_0"]["answers"]) == ["two-shot, one call"]
    assert len(model.calls) == 3  # the warm-up, and one two-shot call for each item not given


async def test_with_examples_from_the_two_shot_prompt_each_planner_run_shows_its_task_types_and_says_so() -> None:
    from bench.worfbench_examples import EXAMPLES_FROM, plan_examples
    from bench.worfbench_report import row_label
    from soothe_planner.planner.prompts.examples import OWN_EXAMPLES_HEAD

    items = [_item("os", 1), _item("lumos", 2)]
    seen: list[tuple[str, Any]] = []
    token = EXAMPLES_FROM.set("two-shot")
    try:
        found = await _run(items, _embedded_like(_tagged(seen)))
    finally:
        EXAMPLES_FROM.reset(token)
    for run, call in seen:
        if run in ("compact", "full") and call.metadata.get("soothe_phase") == "plan-generate":
            system = str(call.messages[0].content)
            source = "os" if "Plan a day in Paris.The action" in call.prompt_text else "lumos"
            assert OWN_EXAMPLES_HEAD in system
            assert plan_examples(source)[0].steps[0].description in system
        elif run == "two-shot":
            assert OWN_EXAMPLES_HEAD not in call.prompt_text
    label = row_label("full: planner, re-asks on", list(found.values()))
    assert label["examples_items"] == 2 and "the two-shot prompt's examples (briefing) on 2 items" in label["text"]
    plain = await _run(items[:1], _embedded_like(_tagged([])))
    assert row_label("full: planner, re-asks on", list(plain.values()))["examples_items"] == 0
