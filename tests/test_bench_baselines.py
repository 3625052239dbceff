"""The goal suites' baselines and peer are run on equal terms: the same tools, a way to fail, the scaffold.

No model runs here: scripted chat models play each strategy's protocol on the tiny suite of
``test_bench_goals.py``. What is checked could fail: a baseline offered fewer tools than ours (the
counting tools left out), a ``FAILED:`` answer scored as a claim of success, a scaffold variant
whose prompt lacks the files or the examples ours' prompt has, a peer that runs without its
package instead of saying which extra brings it, a new strategy the repeats or the results file
do not know.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from bench_goals_support import CONFIG, write_suite
from langchain_core.messages import AIMessage

from bench import goals as goals_bench
from bench.goals_baselines import AGENT_PROMPT, FAIL_RULE, failed_reason
from bench.goals_peers import EXTRA, MissingExtra
from bench.goals_strategies import STRATEGIES, goal_env, unavailable
from bench.goals_suite import load_suite
from soothe_planner.config import load_config
from soothe_planner.testing import FunctionChatModel

BASELINES = ["react", "react-scaffold", "plan-execute", "plan-execute-scaffold", "deep-agents"]
NEW = ["react-scaffold", "plan-execute-scaffold", "deep-agents"]
TOOLS = "[builtin:list_dir, builtin:read_file, builtin:search_text, builtin:write_file, builtin:count_files, builtin:count_lines]"
DEEP_AGENT_HARNESS = {"write_todos", "task"}  # its planning tool and its subagent tool
DEEP_AGENT_FILE_TOOLS = {"ls", "edit_file", "glob", "grep", "execute", "delete"}


def runnable(strategy: str) -> None:
    if unavailable(strategy):
        pytest.skip(f"{strategy}: the deepagents package (extra {EXTRA!r}) is not installed")


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    return write_suite(tmp_path)


@pytest.fixture
def config_path(tmp_path: Path) -> Path:
    (tmp_path / "unused.json").write_text("[]")
    path = tmp_path / "bench.yaml"
    path.write_text(CONFIG.replace("[builtin:list_dir, builtin:read_file, builtin:search_text, builtin:write_file]",
                                   TOOLS))
    return path


def scripted(answer: str, tool_call: dict[str, Any] | None = None) -> FunctionChatModel:
    """Plays every baseline's protocol: plan one step, make ``tool_call`` once (if given), answer ``answer``."""
    def reply(call: Any) -> Any:
        if call.schema_name == "PlanSteps":
            return {"steps": ["look in the workspace"]}
        if call.schema_name == "Replan":
            return {"response": answer, "steps": []}
        acted = any(m.type == "tool" for m in call.messages)
        if tool_call is not None and not acted:
            return AIMessage("", tool_calls=[{**tool_call, "id": f"c{call.index}", "type": "tool_call"}])
        return AIMessage(answer)

    return FunctionChatModel(reply)


def run(suite_dir: Path, config_path: Path, goal_id: str, strategy: str, model: Any) -> dict[str, Any]:
    suite = load_suite(suite_dir)
    (goal,) = suite.select([goal_id])
    return asyncio.run(goals_bench.run_goal(goal, suite, strategy, load_config(config_path), model))


def agent_calls(model: FunctionChatModel) -> list[Any]:
    return [c for c in model.calls if c.method == "tools"]


# --------------------------------------------------------------------------- the same tools


@pytest.mark.parametrize("strategy", BASELINES)
def test_every_baseline_is_offered_the_tools_ours_is_offered(suite_dir: Path, config_path: Path, strategy: str) -> None:
    from soothe_planner.graph import offered_context

    runnable(strategy)
    config = load_config(config_path)
    ours = {c.name for c in offered_context(goal_env("g", config, scripted("x")).resolved.executor).available_capabilities}
    assert {"count_files", "count_lines", "write_file"} <= ours
    model = scripted("8443", {"name": "count_files", "args": {"path": "."}})
    record = run(suite_dir, config_path, "port", strategy, model)
    assert record["outcome"] == "success", record
    offered = {frozenset(c.tools) for c in agent_calls(model)}
    assert len(offered) == 1, offered  # every turn of the agent is offered the same tools
    (tools,) = offered
    if strategy == "deep-agents":
        assert tools >= DEEP_AGENT_HARNESS
        assert not tools & DEEP_AGENT_FILE_TOOLS  # its own file system is not a second way to the files
        tools -= DEEP_AGENT_HARNESS
    assert tools == ours
    calls = record["detail"]["steps"][0]["tool_calls"] if "steps" in record["detail"] else record["detail"]["tool_calls"]
    assert calls and calls[0].startswith("count_files(")


# --------------------------------------------------------------------------- a way to fail


@pytest.mark.parametrize(
    ("answer", "reason"),
    [("FAILED: no channel is named", "no channel is named"), ("**FAILED:** not there", "not there"),
     ("failed: nothing", "nothing"), ("FAILED:", "(no reason given)"), ("The run FAILED: no", None),
     ("8443", None), ("FAILED without a colon", None)],
)
def test_failed_reason_reads_only_an_answer_that_starts_with_failed(answer: str, reason: str | None) -> None:
    assert failed_reason(answer) == reason


@pytest.mark.parametrize("strategy", BASELINES)
def test_a_final_answer_starting_failed_ends_the_run_failed_with_its_reason(
    suite_dir: Path, config_path: Path, strategy: str
) -> None:
    runnable(strategy)
    refusal = "FAILED: the workspace names no chat channel"
    plain = run(suite_dir, config_path, "port", strategy, scripted(refusal))
    assert (plain["status"], plain["outcome"], plain["raised"]) == ("failed", "failure", False), plain
    assert "the workspace names no chat channel" in plain["reason"]
    assert plain["answer"] == refusal
    expect = run(suite_dir, config_path, "channel", strategy, scripted(refusal))
    assert (expect["status"], expect["outcome"]) == ("failed", "success"), expect  # the correct failed
    assert "the agent reported failure: the workspace names no chat channel" in expect["reason"]
    claim = run(suite_dir, config_path, "port", strategy, scripted("It is 8443; nothing FAILED: all good"))
    assert (claim["status"], claim["outcome"]) == ("done", "success")  # FAILED: counts only at the start


@pytest.mark.parametrize("strategy", BASELINES)
def test_every_baseline_is_told_how_to_fail_in_the_same_words(suite_dir: Path, config_path: Path, strategy: str) -> None:
    runnable(strategy)
    model = scripted("8443")
    run(suite_dir, config_path, "port", strategy, model)
    agents = agent_calls(model)
    assert agents and all(c.messages[0].type == "system" and FAIL_RULE in c.messages[0].text for c in agents)
    assert all(c.messages[0].text.startswith(AGENT_PROMPT) for c in agents)
    replans = [c for c in model.calls if c.schema_name == "Replan"]
    assert bool(replans) == strategy.startswith("plan-execute")
    assert all(FAIL_RULE in c.prompt_text for c in replans)


# --------------------------------------------------------------------------- the scaffold


def examples_of(config_path: Path) -> str:
    """The examples ours' compact planning prompt shows for this config's tools, from the planner's own code."""
    from soothe_planner.graph import offered_context
    from soothe_planner.planner import compact_system_fields

    env = goal_env("g", load_config(config_path), scripted("x"))
    calls = env.resolved.planner.settings.plan_syntax == "calls"
    text: str = compact_system_fields(offered_context(env.resolved.executor), calls=calls)["examples"]
    return text


@pytest.mark.parametrize(("strategy", "prompt_of"), [
    ("react-scaffold", lambda model: agent_calls(model)[0].messages[0].text),
    ("plan-execute-scaffold", lambda model: next(c for c in model.calls if c.schema_name == "PlanSteps").prompt_text),
])
@pytest.mark.parametrize("syntax", ["json", "calls"])
def test_the_scaffold_variant_prompt_holds_the_file_list_and_ours_examples(
    suite_dir: Path, config_path: Path, strategy: str, prompt_of: Any, syntax: str
) -> None:
    config_path.write_text(config_path.read_text().replace(
        "structured_output_method:", f"prompt_profile: compact, plan_syntax: {syntax}, structured_output_method:"))
    examples = examples_of(config_path)
    assert examples and ("s1 = search_text(" in examples) == (syntax == "calls")
    plain, scaffolded = scripted("8443"), scripted("8443")
    run(suite_dir, config_path, "port", strategy.removesuffix("-scaffold"), plain)
    record = run(suite_dir, config_path, "port", strategy, scaffolded)
    assert record["detail"]["scaffold"] is True
    prompt = prompt_of(scaffolded)
    assert "Files: notes.txt, docs/a.md" in prompt  # the goal's copy, listed as ours lists it
    assert examples in prompt
    assert "Files:" not in prompt_of(plain) and examples not in prompt_of(plain)


def test_the_plan_execute_scaffold_lists_the_files_anew_for_each_replan(suite_dir: Path, config_path: Path) -> None:
    model = scripted("Written.", {"name": "write_file", "args": {"path": "REPORT.md", "content": "alpha"}})
    record = run(suite_dir, config_path, "report", "plan-execute-scaffold", model)
    assert record["outcome"] == "success", record
    (replan,) = [c for c in model.calls if c.schema_name == "Replan"]
    assert "REPORT.md" in replan.prompt_text.split("Files:", 1)[1]


# --------------------------------------------------------------------------- the peer


def test_deep_agents_refuses_clearly_without_its_extra(
    suite_dir: Path, config_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setitem(sys.modules, "deepagents", None)  # an import of it fails, as when it is not installed
    out = tmp_path / "results"
    code = goals_bench.main(["--suite", str(suite_dir), "--config", str(config_path), "--strategy", "deep-agents",
                             "--scripted", "--results-dir", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert "deepagents" in err and f"pip install 'soothe-planner[{EXTRA}]'" in err
    assert not out.exists()  # stopped before any goal ran
    record = run(suite_dir, config_path, "port", "deep-agents", scripted("8443"))  # called directly: said too
    assert record["outcome"] == "failure" and record["reason"].startswith(f"{MissingExtra.__name__}: ")
    assert EXTRA in record["reason"] and record["llm_calls"] == 0


def test_deep_agents_plans_with_its_todo_tool_and_keeps_the_list(suite_dir: Path, config_path: Path) -> None:
    runnable("deep-agents")
    todo = {"name": "write_todos", "args": {"todos": [{"content": "find the port", "status": "in_progress"}]}}
    record = run(suite_dir, config_path, "port", "deep-agents", scripted("It is 8443.", todo))
    assert record["outcome"] == "success", record
    assert record["detail"]["todos"] == [{"content": "find the port", "status": "in_progress"}]


def test_deep_agents_subagent_works_with_our_tools_and_its_calls_take_the_budget(
    suite_dir: Path, config_path: Path
) -> None:
    runnable("deep-agents")

    def reply(call: Any) -> AIMessage:
        main = call.messages[0].text.startswith(AGENT_PROMPT)
        if any(m.type == "tool" for m in call.messages):
            return AIMessage("The port is 8443.")
        name, args = ("task", {"description": "find the port in notes.txt", "subagent_type": "general-purpose"}) \
            if main else ("read_file", {"path": "notes.txt"})
        return AIMessage("", tool_calls=[{"name": name, "args": args, "id": f"c{call.index}", "type": "tool_call"}])

    model = FunctionChatModel(reply)
    record = run(suite_dir, config_path, "port", "deep-agents", model)
    assert record["outcome"] == "success", record
    subagent = [set(c.tools) for c in model.calls if not c.messages[0].text.startswith(AGENT_PROMPT)]
    ours = {c.name for c in goal_env("g", load_config(config_path), model).resolved.executor.capabilities()}
    assert subagent and all(tools == ours for tools in subagent)  # no file tools of its own there either
    assert record["llm_calls"] == record["limiter_llm_calls"] == len(model.calls) == 4


def test_deep_agents_stops_after_as_many_model_turns_as_react_may_take(suite_dir: Path, config_path: Path) -> None:
    runnable("deep-agents")
    config_path.write_text(config_path.read_text().replace("max_total_llm_calls: 20", "max_total_llm_calls: 3"))

    def forever(call: Any) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "list_dir", "args": {}, "id": f"c{call.index}", "type": "tool_call"}])

    record = run(suite_dir, config_path, "port", "deep-agents", FunctionChatModel(forever))
    assert (record["status"], record["outcome"]) == ("failed", "failure")
    assert "no final answer within 3 model turns" in record["reason"]
    assert record["llm_calls"] == 3


# --------------------------------------------------------------------------- the command


@pytest.mark.parametrize("strategy", NEW)
def test_the_new_strategies_go_through_repeats_and_name_the_results_file(
    suite_dir: Path, config_path: Path, tmp_path: Path, strategy: str, capsys: pytest.CaptureFixture[str]
) -> None:
    runnable(strategy)
    assert strategy in STRATEGIES
    out = tmp_path / "results"
    code = goals_bench.main(["--suite", str(suite_dir), "--config", str(config_path), "--strategy", strategy,
                             "--scripted", "--repeats", "2", "--results-dir", str(out)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    data = json.loads((out / f"goals-{strategy}-suite.scripted.json").read_text())
    assert (data["strategy"], data["repeats"]) == (strategy, 2)
    assert data["sanity"]["passed"] is True, data["sanity"]
    refuser = data["actors"]["refuser"]
    assert [r["run"] for r in refuser["runs"]] == [1, 2]
    channel = refuser["summary"]["suites"]["suite"]["per_goal"]["channel"]
    assert channel["outcomes"] == ["success", "success"]  # the refuser's FAILED: is the correct end, both runs
    assert f"scripted refuser ({strategy})" in printed


def test_deep_agents_system_message_reaches_the_model_as_one_string() -> None:
    """Deep Agents builds its system message of text blocks; the embedded model's server takes a
    string only (a 500 otherwise), so the peer's harness joins them, the text unchanged."""
    pytest.importorskip("langchain.agents.middleware", reason="the bench-peers extra is not installed")
    from langchain.agents.middleware.types import ModelRequest
    from langchain_core.messages import SystemMessage

    from bench.goals_peers import _plain_system_text

    blocks = SystemMessage(content=[{"type": "text", "text": "first"}, {"type": "text", "text": "second"}])
    request = ModelRequest(model=None, messages=[], system_message=blocks, tool_choice=None, tools=[],  # type: ignore[arg-type]
                           response_format=None, state={}, runtime=None)  # type: ignore[arg-type]
    seen = []
    _plain_system_text().wrap_model_call(request, lambda r: seen.append(r.system_message))
    assert seen[0].content == "first\n\nsecond"
    plain = request.override(system_message=SystemMessage(content="as is"))
    _plain_system_text().wrap_model_call(plain, lambda r: seen.append(r.system_message))
    assert seen[1].content == "as is"
