"""Limits that hold whatever happens: oversize replies, the call budget across a resume, one count, one limiter.

- A reply far over what ``max_plan_steps`` allows is refused before the lenient reader reads any
  of it; an honest plan at the cap is still read.
- Every model call goes through one limiter: subagents passed in from code hold one of its slots
  and charge each call to the budget; everything resolved from one config object shares one controller.
- A run's LLM calls are one count, saved with its checkpoint: the live display, ``show --json``
  and ``resume`` read the same number, and a resumed run spends the rest of its budget, not a
  fresh one. A failure anywhere (an intake with no usable answer, a spent budget) ends the run
  ``failed`` with its reason recorded; ``on_failure: degraded`` covers intake and continuation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_support import PLAN, scripted_config
from planner_support import CTX, FAST, GOAL, planner, state

import soothe_planner.parsing.reader as reader
from soothe_planner.cli import EXIT_DONE, EXIT_FAILED, EXIT_PAUSED, main
from soothe_planner.errors import PlanGenerationError, PlanParseError
from soothe_planner.models import StatusAssessment
from soothe_planner.parsing import parse_decision, parse_object
from soothe_planner.wire import AssessStatus

# --------------------------------------------------------------------------- 25: oversize replies


def _plan_text(steps: int, content: str = "") -> str:
    return json.dumps({"plan_action": "new", "steps": [
        {"id": f"s{i}", "description": f"step {i}", "tool": "write_file" if content else None,
         "args": {"path": f"f{i}.txt", "content": content} if content else {}, "depends_on": []}
        for i in range(steps)
    ]})


@pytest.fixture
def scanned(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text the lenient reader scanned."""
    lengths: list[int] = []
    real = reader.scan_values

    def spy(text: str, *args: Any, **kwargs: Any) -> Any:
        lengths.append(len(text))
        return real(text, *args, **kwargs)

    monkeypatch.setattr(reader, "scan_values", spy)
    return lengths


async def test_a_100k_step_reply_is_refused_before_the_reader_reads_it(scanned: list[int]) -> None:
    huge = _plan_text(100_000)
    assert len(huge) > 8_000_000
    settings = FAST.model_copy(update={"retries": 1})
    p, model = planner(huge, huge, huge, settings=settings)
    with pytest.raises(PlanGenerationError) as info:
        await p.generate_from_assessment(GOAL, state(1), CTX, StatusAssessment(status="continue"))
    cap = reader.reply_byte_cap(settings.max_plan_steps)
    assert cap == 32 * 1024 + 8 * 8 * 1024
    assert scanned == []  # not one byte of it went through the lenient reader
    refused = [a for a in info.value.attempts if "over the cap" in a.error]
    assert len(refused) == 3 and f"over the cap of {cap} bytes" in refused[0].error
    assert len(model.calls) == 3


def test_an_honest_plan_at_the_cap_is_still_read(scanned: list[int]) -> None:
    content = "x" * 6000  # a file's content written literally into each of 8 steps
    text = _plan_text(8, content)
    assert len(text) < reader.reply_byte_cap(8)
    decision = parse_decision(text, max_steps=8).decision
    assert decision is not None and len(decision.steps) == 8
    with pytest.raises(PlanParseError, match="over the cap"):
        parse_decision(_plan_text(8, "x" * 14_000), max_steps=8)


def test_a_small_answer_has_its_own_cap() -> None:
    padded = json.dumps({"status": "continue", "summary": "ok"}) + " " * (64 * 1024)
    with pytest.raises(PlanParseError, match="over the cap of 32768 bytes for a AssessStatus answer"):
        parse_object(padded, AssessStatus)
    assert parse_object(padded[:1000], AssessStatus)[0].status == "continue"


# --------------------------------------------------------------------------- 15, 18, 19: the run's one count


TOOL_ARGS: list[Any] = [{"pattern": "TODO"}, {"recursive": True}]


def _assess(status: str, progress: float) -> dict[str, Any]:
    return {"status": status, "goal_progress": progress, "confidence": 0.8, "summary": "evidence"}


@pytest.fixture(autouse=True)
def _no_scripted_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOOTHE_SCRIPTED_MODEL", raising=False)


_config = scripted_config


def _report(capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


@pytest.fixture
def live(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every live display the CLI built, to read its call count after the run."""
    from soothe_planner.cli import terminal

    views: list[Any] = []
    real = terminal.RunView

    def recorded(**kwargs: Any) -> Any:
        views.append(real(**kwargs))
        return views[-1]

    monkeypatch.setattr(terminal, "RunView", recorded)
    return views


def _pause_for_approval(tmp_path: Path, capsys: pytest.CaptureFixture[str], budget: int) -> Path:
    first = {"RouteIntake": [{"route": "complex", "answer": ""}], "AssessStatus": [_assess("continue", 0.0)],
             "GeneratePlan": [PLAN]}
    cfg = _config(tmp_path, first, run={"approval": True}, concurrency={"max_total_llm_calls": budget})
    assert main(["run", "--json", "--config", str(cfg), "--thread", "t", "goal"]) == EXIT_PAUSED
    assert _report(capsys)["llm_calls"] == 2  # intake and generation
    assert main(["show", "--json", "--config", str(cfg), "--thread", "t"]) == EXIT_FAILED
    assert _report(capsys)["llm_calls"] == 2
    return cfg


def test_a_resumed_run_keeps_its_spent_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _pause_for_approval(tmp_path, capsys, budget=4)
    # the rest of the run needs 3 calls (two tools' arguments, one assessment): 5 in all, over 4
    (tmp_path / "script.json").write_text(json.dumps(
        {"AssessStatus": [_assess("done", 1.0)], "text": [*TOOL_ARGS]}
    ))
    code = main(["resume", "--json", "--config", str(cfg), "--thread", "t", "--approve"])
    report = _report(capsys)
    assert code == EXIT_FAILED
    assert report["status"] == "failed" and "LLM call budget exhausted: 4 of 4" in report["error"]
    assert report["llm_calls"] == 4
    # the failure is recorded in the checkpoint, not only printed
    assert main(["show", "--json", "--config", str(cfg), "--thread", "t"]) == EXIT_FAILED
    shown = _report(capsys)
    assert shown["status"] == "failed" and shown["llm_calls"] == 4 and "budget exhausted" in shown["why"]


def test_one_count_for_the_live_display_show_and_resume(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], live: list[Any]
) -> None:
    cfg = _pause_for_approval(tmp_path, capsys, budget=40)
    assert live[-1].calls_text() == "2/40"
    (tmp_path / "script.json").write_text(json.dumps(
        {"AssessStatus": [_assess("done", 1.0)], "text": [*TOOL_ARGS, "There are 5 TODO lines."]}
    ))
    assert main(["resume", "--json", "--config", str(cfg), "--thread", "t", "--approve"]) == EXIT_DONE
    assert _report(capsys)["llm_calls"] == 6  # + two tools' arguments, one assessment, one synthesis
    assert live[-1].calls_text() == "6/40"  # the resumed display starts from the saved count
    assert main(["show", "--json", "--config", str(cfg), "--thread", "t"]) == EXIT_DONE
    assert _report(capsys)["llm_calls"] == 6
    assert main(["show", "--config", str(cfg), "--thread", "t"]) == EXIT_DONE
    assert "LLM calls 6/40" in capsys.readouterr().out


def test_a_follow_up_goal_on_the_thread_gets_its_own_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path, {"RouteIntake": [{"route": "trivial", "answer": "four"}]},
                  concurrency={"max_total_llm_calls": 1})
    assert main(["run", "--json", "--config", str(cfg), "--thread", "t", "2+2"]) == EXIT_DONE
    assert _report(capsys)["llm_calls"] == 1
    (tmp_path / "script.json").write_text(json.dumps({"RouteIntake": [{"route": "trivial", "answer": "five"}]}))
    # a new goal on the same thread is a new run, with its own count and budget
    assert main(["run", "--json", "--config", str(cfg), "--thread", "t", "2+3"]) == EXIT_DONE
    report = _report(capsys)
    assert report["llm_calls"] == 1 and report["final_answer"] == "five"


def test_an_intake_failure_ends_the_run_failed_with_its_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _config(tmp_path, {"RouteIntake": ["no json here"] * 4, "text": ["still none"] * 4})
    assert main(["run", "--json", "--config", str(cfg), "--thread", "t", "goal"]) == EXIT_FAILED
    report = _report(capsys)
    assert report["status"] == "failed" and report["error"].startswith("intake failed: ")
    assert "intake: no usable answer after" in report["error"]
    assert report["llm_calls"] >= 2
    assert main(["show", "--config", str(cfg), "--thread", "t"]) == EXIT_FAILED
    out = capsys.readouterr().out
    assert "status failed" in out and "intake failed" in out


def test_degraded_covers_intake(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = {"RouteIntake": ["no json here"] * 4, "AssessStatus": [_assess("done", 1.0)],
              "GeneratePlan": [PLAN], "text": ["still none", *TOOL_ARGS, "There are 5 TODO lines."]}
    cfg = _config(tmp_path, script, planner={"on_failure": "degraded"})
    assert main(["run", "--json", "--config", str(cfg), "--thread", "t", "goal"]) == EXIT_DONE
    assert _report(capsys)["status"] == "done"  # routed complex: the full loop, which assumes the least


async def test_degraded_covers_the_continuation_check() -> None:
    from soothe_planner.models import PlanContext, PlannerSettings
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import FunctionChatModel

    settings = PlannerSettings(transport_backoff_s=0.0, retries=1, transport_retries=0, on_failure="degraded")
    degraded = LLMPlanner(FunctionChatModel(lambda call: "nope"), settings=settings)
    ca = await degraded.assess_continuation("and now?", ["earlier goal"], PlanContext())
    assert ca.action == "plan_generate" and ca.reasoning.startswith("degraded")
    assert degraded.stats.degraded == 1
    strict = LLMPlanner(FunctionChatModel(lambda call: "nope"), settings=settings.model_copy(update={"on_failure": "raise"}))
    with pytest.raises(PlanGenerationError):
        await strict.assess_continuation("and now?", ["earlier goal"], PlanContext())


# --------------------------------------------------------------------------- 17: one limiter, whatever the entry point


async def test_subagents_passed_in_from_code_take_the_one_limiter() -> None:
    import asyncio
    import warnings

    from langgraph.prebuilt import create_react_agent

    from soothe_planner.concurrency import CallMeter, ConcurrencyController, ConcurrencyPolicy, metering
    from soothe_planner.dag import PlanManager
    from soothe_planner.execution import StepExecutor
    from soothe_planner.models import AgentDecision, StepAction
    from soothe_planner.testing import FunctionChatModel

    inside = [0, 0]  # now, peak

    async def slow(call: Any) -> str:
        inside[0] += 1
        inside[1] = max(inside[1], inside[0])
        await asyncio.sleep(0.05)
        inside[0] -= 1
        return "found it"

    model = FunctionChatModel(slow)  # never wrapped by any controller
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agents = {f"a{i}": create_react_agent(model, [], name=f"a{i}") for i in range(3)}
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1, max_parallel_subagents=3))
    executor = StepExecutor(subagents=agents, controller=controller)
    pm = PlanManager("g")
    pm.ingest(AgentDecision(steps=[StepAction(id=f"s{i}", description="look", subagent=f"a{i}") for i in range(3)]))
    with metering(CallMeter(0, budget=10)) as meter:
        results = await asyncio.wait_for(executor.run(pm), 30)
    assert all(r.success for r in results), [r.error for r in results]
    assert inside[1] == 1  # the limit held: no two subagent model calls at once
    assert len(model.calls) == 3 == controller.total_llm_calls == meter.spent  # each call counted once


async def test_a_spent_budget_stops_a_subagent_from_code() -> None:
    import asyncio
    import warnings

    from langgraph.prebuilt import create_react_agent

    from soothe_planner.concurrency import CallMeter, ConcurrencyController, metering
    from soothe_planner.dag import PlanManager
    from soothe_planner.execution import StepExecutor
    from soothe_planner.models import AgentDecision, StepAction
    from soothe_planner.testing import FunctionChatModel

    model = FunctionChatModel(lambda call: "found it")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, [], name="a")
    executor = StepExecutor(subagents={"a": agent}, controller=ConcurrencyController())
    pm = PlanManager("g")
    pm.ingest(AgentDecision(steps=[StepAction(id="s1", description="look", subagent="a")]))
    with metering(CallMeter(2, budget=2)):
        (result,) = await asyncio.wait_for(executor.run(pm), 30)
    assert not result.success and result.error_type == "llm_budget_exceeded"
    assert model.calls == []  # refused before the call


def test_resolving_planner_and_executor_separately_shares_one_controller(tmp_path: Path) -> None:
    from soothe_planner.config import load_config, resolve_controller, resolve_executor, resolve_planner

    cfg = _config(tmp_path, {"text": []}, concurrency={"global_max_llm_calls": 1})
    config = load_config(str(cfg))
    planner_ = resolve_planner(config)
    executor = resolve_executor(config)
    assert planner_.controller is executor.controller is resolve_controller(config)
    # a copy is another run (another workspace, say): its own limiter and count
    other = config.model_copy(update={"execution": config.execution.model_copy(update={"step_timeout_s": 5.0})})
    assert resolve_controller(other) is not resolve_controller(config)
    assert resolve_controller(load_config(str(cfg))) is not resolve_controller(config)


def test_a_loop_stopped_by_the_recursion_limit_ends_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import soothe_planner.graph.loop as loop

    monkeypatch.setattr(loop, "recursion_limit_for", lambda max_iterations: 3)
    script = {"RouteIntake": [{"route": "complex", "answer": ""}], "AssessStatus": [_assess("continue", 0.0)] * 3,
              "GeneratePlan": [PLAN] * 3, "text": [*TOOL_ARGS] * 3}
    cfg = _config(tmp_path, script)
    assert main(["run", "--json", "--config", str(cfg), "--thread", "t", "goal"]) == EXIT_FAILED
    report = _report(capsys)
    assert report["status"] == "failed" and "did not converge" in report["error"]
    assert main(["show", "--json", "--config", str(cfg), "--thread", "t"]) == EXIT_FAILED
    assert _report(capsys)["status"] == "failed"
