"""LLMPlanner's call path: the repair ladder, structured answers, transport errors, limits and tracing."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from langchain_openai import ChatOpenAI
from planner_support import CTX, FAST, GOAL, assess, manager, plan, planner, state, step

from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
from soothe_planner.errors import LLMBudgetExceeded, PlanGenerationError
from soothe_planner.models import (
    PlannerSettings,
    StatusAssessment,
    StepAction,
    StepResult,
)
from soothe_planner.planner import LLMPlanner, PlannerStats
from soothe_planner.planner.calls import is_transport_error, resolve_method
from soothe_planner.testing import ScriptedCall, ScriptedChatModel


async def test_a_structured_answer_gets_the_parsers_repairs_instead_of_a_reask() -> None:
    # a small model lists a made-up name and a tool as dependencies: dropped with a warning, no re-ask
    pm = manager()
    reply = plan(step("s1"), step("s2", "s1", "SetEquation", "read_file"))
    p, model = planner(assess("continue", 0.2), reply)
    result = await p.plan(GOAL, state(1), CTX, plan_manager=pm)
    assert result.decision is not None
    assert [s.depends_on for s in result.decision.steps] == [[], ["s1"]]
    assert result.llm_calls == 2 and len(model.calls) == 2
    assert any("unknown step 'SetEquation'" in w for w in result.warnings)
    assert any("'read_file' is a tool, not a step" in w for w in result.warnings)


async def test_a_new_step_may_depend_on_a_finished_step_of_the_goal_dag() -> None:
    pm = manager(StepAction(id="s1", description="read", tools=["read_file"]))
    pm.mark_started("s1")
    pm.record_step_outcomes([StepResult(step_id="s1", success=True, output="text")])
    # structured and written answers alike keep a dependency on a step already in the DAG
    for reply in (plan(step("s2", "s1")), json.dumps(plan(step("s2", "s1")))):
        p, _model = planner(assess("continue", 0.5), reply)
        result = await p.plan(GOAL, state(2), CTX, plan_manager=pm)
        assert result.decision is not None
        assert [(s.id, s.depends_on) for s in result.decision.steps] == [("s2", ["s1"])]
        assert not any("s1" in w for w in result.warnings)


async def test_a_structured_cycle_is_still_reasked() -> None:
    pm = manager()
    p, model = planner(assess("continue", 0.2), plan(step("s1", "s2"), step("s2", "s1")), plan(step("s1")))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=pm)
    assert result.decision is not None and [s.id for s in result.decision.steps] == ["s1"]
    assert model.calls[2].metadata["soothe_phase"] == "plan-reask"
    assert "cycle: s1 -> s2 -> s1" in model.calls[2].last_text


async def test_invalid_plan_is_re_asked_showing_the_failed_output_and_the_error() -> None:
    cyclic = plan(step("s1", "s2"), step("s2", "s1"))
    p, model = planner(assess("continue"), cyclic, plan(step("s1"), step("s2", "s1")))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    assert result.decision is not None
    reask = model.calls[2]
    assert reask.metadata["soothe_phase"] == "plan-reask"
    assert "cycle" in reask.last_text
    assert '"depends_on": ["s2"]' in reask.last_text  # the model's own failed output, shown back
    # the re-ask extends a copy: the original conversation still ends with the human turn
    assert len(model.calls[1].messages) == 2 and len(reask.messages) == 3


async def test_unknown_tool_is_a_validation_error_that_is_re_asked() -> None:
    p, model = planner(assess("continue"), plan(step("s1", tools=("rm",))), plan(step("s1")))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    assert result.decision is not None and result.decision.steps[0].tools == ["read_file"]
    assert "rm" in model.calls[2].last_text


async def test_garbage_then_recovery_by_re_ask() -> None:
    garbage = "I would love to help! First we think, then we act."
    p, model = planner(assess("continue"), garbage, garbage, plan(step("s1")))
    result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    assert result.decision is not None
    phases = [c.metadata["soothe_phase"] for c in model.calls]
    assert phases == ["plan-assess", "plan-generate", "plan-raw", "plan-reask"]
    assert model.calls[2].method is None  # the raw fallback is an unstructured call
    assert garbage in model.calls[3].last_text
    assert "error" in model.calls[3].last_text.lower()
    assert p.stats.raw_fallback == 1 and p.stats.reask == 1 and p.stats.reask_ok == 1


async def test_salvage_reads_broken_structured_output_without_an_extra_call() -> None:
    # function_calling gets text with the JSON wrapped in prose: the tool call is missing,
    # the lenient parser finds the plan in the raw text
    text = "Sure! " + json.dumps(plan(step("s1"))) + " Hope that helps."
    p, model = planner(assess("continue"), text)
    result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    assert result.decision is not None and len(model.calls) == 2
    assert p.stats.salvaged == 1


async def test_garbage_all_the_way_raises_with_every_attempt() -> None:
    garbage = "no plan here, sorry"
    p, model = planner(assess("continue"), garbage, garbage, garbage, garbage)
    with pytest.raises(PlanGenerationError) as info:
        await p.plan(GOAL, state(1), CTX, plan_manager=manager())
    err = info.value
    assert err.phase == "plan-generate"
    kinds = [a.kind for a in err.attempts]
    assert kinds[0] == "structured" and "raw" in kinds and kinds.count("reask") == 2
    assert all(a.raw_text == garbage for a in err.attempts if a.kind in ("raw", "reask"))
    assert len(model.calls) == 5  # assess + structured + raw + 2 re-asks


async def test_garbage_all_the_way_in_degraded_mode_is_degraded_never_progress_never_done() -> None:
    settings = PlannerSettings(on_failure="degraded", retries=1, transport_backoff_s=0)
    previous = StatusAssessment(status="continue", goal_progress=0.3)
    p, _ = planner(assess("continue", 0.9), "x", "x", "x", settings=settings)
    result = await p.plan(GOAL, state(2, previous_assessment=previous), CTX, plan_manager=manager())
    assert result.degraded and result.status != "done"
    assert result.goal_progress <= 0.3
    assert p.stats.degraded == 1 and result.warnings


async def test_degraded_assessment_is_continue_with_the_previous_progress() -> None:
    settings = PlannerSettings(on_failure="degraded", retries=0, transport_backoff_s=0)
    previous = StatusAssessment(status="continue", goal_progress=0.4)
    p, _ = planner("garbage", "garbage", settings=settings)
    a = await p.assess_status(GOAL, state(3, previous_assessment=previous), CTX)
    assert a.degraded and a.status == "continue" and a.goal_progress == 0.4


async def test_transport_error_is_retried_then_succeeds() -> None:
    p, model = planner(httpx.ConnectError("connection refused"), assess("done", 1.0))
    result = await p.plan(GOAL, state(1), CTX)
    assert result.status == "done"
    assert p.stats.transport_retry == 1 and len(model.calls) == 2 and result.llm_calls == 2


async def test_timeout_is_a_transport_error_retried_on_its_own_budget() -> None:
    async def slow(call: ScriptedCall) -> dict[str, Any]:
        await asyncio.sleep(60)  # cancelled by the timeout
        return assess("done")

    settings = PlannerSettings(call_timeout_s=0.5, transport_retries=1, transport_backoff_s=0)
    p, _model = planner(slow, assess("done", 1.0), settings=settings)
    result = await p.plan(GOAL, state(1), CTX)
    assert result.status == "done" and p.stats.transport_retry == 1


async def test_transport_failure_after_retries_fails_at_once_with_the_attempt() -> None:
    settings = PlannerSettings(transport_retries=1, transport_backoff_s=0)
    p, model = planner(TimeoutError("slow"), TimeoutError("slow"), settings=settings)
    with pytest.raises(PlanGenerationError) as info:
        await p.plan(GOAL, state(1), CTX)
    assert [a.error_type for a in info.value.attempts] == ["transport"]
    assert len(model.calls) == 2  # no raw call and no re-ask against a dead transport


def test_value_errors_are_never_transport_errors() -> None:
    assert not is_transport_error(ValueError("bad schema"))
    assert not is_transport_error(KeyError("x"))
    assert is_transport_error(httpx.ReadTimeout("slow"))
    assert is_transport_error(TimeoutError())


async def test_a_spent_call_budget_propagates_untouched() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(max_total_llm_calls=1))
    p, _ = planner(assess("continue"), plan(step("s1")), controller=controller)
    with pytest.raises(LLMBudgetExceeded):
        await p.plan(GOAL, state(1), CTX)


async def test_many_planners_sharing_a_controller_never_exceed_the_llm_cap() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=2))

    async def slow_done(call: ScriptedCall) -> dict[str, Any]:
        await asyncio.sleep(0.01)
        return assess("done", 1.0)

    planners = [
        LLMPlanner(ScriptedChatModel(responses=[slow_done]), controller=controller, settings=FAST)
        for _ in range(10)
    ]
    results = await asyncio.gather(*(p.plan(GOAL, state(1), CTX) for p in planners))
    assert all(r.status == "done" for r in results)
    assert controller.peak_llm_calls == 2
    assert controller.total_llm_calls == 10
    assert controller.calls_by_phase == {"plan-assess": 10}


async def test_a_model_wrapped_by_the_same_controller_takes_one_slot_per_call() -> None:
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    model = controller.wrap_model(ScriptedChatModel(responses=[assess("done", 1.0)]))
    p = LLMPlanner(model, controller=controller, settings=FAST)
    result = await p.plan(GOAL, state(1), CTX)  # would deadlock if the call took two slots
    assert result.status == "done" and controller.total_llm_calls == 1


def test_auto_method_picks_per_provider() -> None:
    assert resolve_method(ScriptedChatModel(), "auto") == "function_calling"
    assert resolve_method(ChatOpenAI(model="gpt-4o-mini", api_key="test"), "auto") == "json_schema"  # type: ignore[arg-type]
    local = ChatOpenAI(model="local", api_key="test", base_url="http://127.0.0.1:8080/v1")  # type: ignore[arg-type]
    assert resolve_method(local, "auto") == "function_calling"
    assert resolve_method(local, "json_mode") == "json_mode"


@pytest.mark.parametrize("method", ["function_calling", "json_schema", "json_mode"])
async def test_the_configured_method_is_used_on_every_structured_call(method: str) -> None:
    settings = PlannerSettings(structured_output_method=method)  # type: ignore[arg-type]
    p, model = planner(assess("continue"), plan(step("s1")), settings=settings)
    await p.plan(GOAL, state(1), CTX)
    assert [c.method for c in model.calls] == [method, method]


async def test_every_call_is_traced_under_its_phase_with_thread_and_iteration() -> None:
    from langchain_core.tracers.context import collect_runs

    p, _ = planner(assess("continue"), plan(step("s1")))
    with collect_runs() as runs:
        await p.plan(GOAL, state(2), CTX)
    traced = [(r.name, r.tags, (r.extra or {}).get("metadata", {})) for r in runs.traced_runs]
    assert [name for name, _, _ in traced] == ["plan-assess", "plan-generate"]
    for name, tags, metadata in traced:
        assert tags == ["soothe", name]
        assert metadata["soothe_phase"] == name and metadata["thread_id"] == "t1" and metadata["iteration"] == 2


async def test_a_model_without_structured_output_is_planned_through_raw_calls() -> None:
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage

    replies = [json.dumps(assess("continue")), "not json at all", json.dumps(plan(step("s1")))]
    model = GenericFakeChatModel(messages=iter(AIMessage(content=r) for r in replies))
    p = LLMPlanner(model, settings=FAST)
    result = await p.plan(GOAL, state(1), CTX)
    assert result.decision is not None and result.llm_calls == 3
    # assess: structured unavailable -> raw; generate: raw garbage -> re-ask in raw mode
    assert p.stats.raw_fallback == 2 and p.stats.reask_ok == 1


async def test_the_structured_output_binding_is_built_once_per_schema(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []
    original = ScriptedChatModel.with_structured_output

    def counting(self: ScriptedChatModel, schema: Any, **kw: Any) -> Any:
        built.append(schema.__name__)
        return original(self, schema, **kw)

    monkeypatch.setattr(ScriptedChatModel, "with_structured_output", counting)
    p, _model = planner(*[assess("continue", 0.2), plan(step("s1"))] * 3)
    for _ in range(3):
        result = await p.plan(GOAL, state(1), CTX, plan_manager=manager())
        assert result.decision is not None
    assert sorted(built) == ["AssessStatus", "GeneratePlan"]


async def test_create_plan_offers_the_model_no_keep(monkeypatch: pytest.MonkeyPatch) -> None:
    schemas: list[Any] = []
    original = ScriptedChatModel.with_structured_output

    def recording(self: ScriptedChatModel, schema: Any, **kw: Any) -> Any:
        schemas.append(schema)
        return original(self, schema, **kw)

    monkeypatch.setattr(ScriptedChatModel, "with_structured_output", recording)
    p, _model = planner(plan(step("s1")))
    await p.create_plan(GOAL, CTX)
    assert [s.model_json_schema()["properties"]["plan_action"].get("const") for s in schemas] == ["new"]


@pytest.mark.parametrize("method", ["function_calling", "json_schema", "json_mode"])
def test_the_bound_tracing_schema_is_converted_once_and_unchanged(method: str) -> None:
    from langchain_core.utils.function_calling import convert_to_json_schema

    from soothe_planner.planner.calls import Caller
    from soothe_planner.wire import generation_model

    schema = generation_model(8)
    caller = Caller(FAST, ConcurrencyController(ConcurrencyPolicy()), PlannerStats())
    runnable = caller.bound(ScriptedChatModel(responses=[]), schema, method)  # type: ignore[arg-type]
    fmt = runnable.first.steps__["raw"].kwargs["ls_structured_output_format"]  # type: ignore[attr-defined]
    # what LangChain attaches to traces on each call is what it derived from the class itself
    assert fmt["schema"] == convert_to_json_schema(schema)
    assert convert_to_json_schema(fmt["schema"]) == convert_to_json_schema(schema)
    assert fmt["kwargs"]["method"] == method


async def test_a_transport_retry_gives_its_llm_slot_back_while_it_waits() -> None:
    # one slot, two planners: A's first request fails and A backs off; B must get the slot during
    # A's wait, not after it (a retry that slept on its slot would leave the whole run waiting)
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    order: list[str] = []

    def answer(name: str, reply: Any) -> Any:
        def reply_fn(call: ScriptedCall) -> Any:
            order.append(name)
            if isinstance(reply, BaseException):
                raise reply
            return reply

        return reply_fn

    settings = PlannerSettings(transport_retries=1, transport_backoff_s=0.2)
    a = LLMPlanner(ScriptedChatModel([answer("A", httpx.ConnectError("refused")), answer("A", assess("done", 1.0))]),
                   controller=controller, settings=settings)
    b = LLMPlanner(ScriptedChatModel([answer("B", assess("done", 1.0))]), controller=controller, settings=settings)
    results = await asyncio.gather(a.plan(GOAL, state(1), CTX), b.plan(GOAL, state(1), CTX))
    assert order == ["A", "B", "A"]
    assert results[0].status == results[1].status == "done" and a.stats.transport_retry == 1
    assert controller.peak_llm_calls == 1 and controller.total_llm_calls == 3
    assert controller.in_flight_llm_calls == 0


def test_transport_waits_back_off_exponentially_with_jitter() -> None:
    from tenacity import RetryCallState

    from soothe_planner.planner.transport import transport_retrying

    retrying = transport_retrying(3, 0.5)

    def wait(attempt: int) -> float:
        state = RetryCallState(retrying, fn=None, args=(), kwargs={})
        state.attempt_number = attempt
        return float(retrying.wait(state))

    for attempt, base in ((1, 0.5), (2, 1.0), (3, 2.0)):
        waits = [wait(attempt) for _ in range(20)]
        assert all(base <= w <= base + 0.5 for w in waits)
        assert len(set(waits)) > 1  # jittered: planners that failed together do not return together
    retrying = transport_retrying(3, 0.0)
    assert wait(1) == wait(3) == 0.0  # no backoff configured: no waiting at all


def test_the_retried_errors_are_one_tuple_and_never_include_bugs() -> None:
    import openai

    from soothe_planner.planner import TRANSPORT_ERRORS

    assert {TimeoutError, ConnectionError, httpx.TransportError, openai.RateLimitError} <= set(TRANSPORT_ERRORS)
    assert not any(issubclass(kind, ValueError | TypeError | KeyError) for kind in TRANSPORT_ERRORS)


def test_stats_are_named_counters_and_the_old_item_access_is_deprecated() -> None:
    stats = PlannerStats()
    stats.reask += 2
    assert stats.as_dict()["reask"] == 2 and set(stats.as_dict()) >= {"structured_ok", "transport_retry", "degraded"}
    with pytest.warns(DeprecationWarning, match=r"stats\.reask"):
        assert stats["reask"] == 2
    with pytest.raises(KeyError, match=r"no planner counter named 'reasks'.*reask_ok"):
        stats["reasks"]
