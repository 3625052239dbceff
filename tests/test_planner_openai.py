"""LLMPlanner through the real ChatOpenAI, over httpx.MockTransport, for each structured-output method.

The handler reads the request body the provider package really sends (``response_format``,
``tools``, messages) and answers with a scripted ``chat.completion``, so the production parsing
path of each method runs end to end with no server and no key.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from langchain_openai import ChatOpenAI

from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.errors import PlanGenerationError
from soothe_planner.models import (
    AgentDecision,
    LoopState,
    PlanContext,
    PlannerSettings,
    StepAction,
    StepResult,
)
from soothe_planner.planner import LLMPlanner

GOAL = "count the words of README.md"
CTX = PlanContext(available_capabilities=["read_file"], thread_id="t-openai")
METHODS = ["json_schema", "function_calling", "json_mode"]

Reply = dict[str, Any] | str | int  # a JSON payload, raw text, or an HTTP status to fail with


class FakeOpenAI:
    """Answers each request with the next scripted reply, rendered as the request's method expects."""

    def __init__(self, replies: list[Reply]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        if not self.replies:
            return httpx.Response(599, json={"error": {"message": "script exhausted"}})
        reply = self.replies.pop(0)
        if isinstance(reply, int):
            return httpx.Response(reply, json={"error": {"message": "server error", "type": "server_error"}})
        text = json.dumps(reply) if isinstance(reply, dict) else reply
        message: dict[str, Any] = {"role": "assistant", "content": text}
        tools = body.get("tools")
        if tools and isinstance(reply, dict):
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_1", "type": "function",
                                "function": {"name": tools[0]["function"]["name"], "arguments": text}}],
            }
        return httpx.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        })


def openai_planner(replies: list[Reply], method: str, **settings: Any) -> tuple[LLMPlanner, FakeOpenAI]:
    fake = FakeOpenAI(replies)
    model = ChatOpenAI(
        model="gpt-4o-mini",
        api_key="test",  # type: ignore[arg-type]
        max_retries=0,  # the planner's transport policy is the one retrying
        http_client=httpx.Client(transport=httpx.MockTransport(fake)),
        http_async_client=httpx.AsyncClient(transport=httpx.MockTransport(fake)),
    )
    config = PlannerSettings(structured_output_method=method, transport_backoff_s=0, **settings)  # type: ignore[arg-type]
    return LLMPlanner(model, settings=config), fake


ASSESS_CONTINUE = {"status": "continue", "goal_progress": 0.2, "confidence": 0.7, "summary": "not yet"}
ASSESS_DONE = {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "README has 120 words"}
PLAN = {"plan_action": "new", "execution_mode": "dependency", "next_action": "read then count", "steps": [
    {"id": "s1", "description": "read README.md", "depends_on": [], "tools": ["read_file"],
     "subagent": None, "expected_output": "the text"},
    {"id": "s2", "description": "count the words", "depends_on": ["s1"], "tools": [],
     "subagent": None, "expected_output": "a number"},
]}


def assert_method(body: dict[str, Any], method: str, schema_name: str) -> None:
    if method == "json_schema":
        assert body["response_format"]["type"] == "json_schema"
        assert body["response_format"]["json_schema"]["name"] == schema_name
        assert "tools" not in body
    elif method == "function_calling":
        assert body["tools"][0]["function"]["name"] == schema_name
        assert body["tool_choice"]["function"]["name"] == schema_name  # forced
        assert "response_format" not in body
    else:
        assert body["response_format"] == {"type": "json_object"}
        assert "tools" not in body


@pytest.mark.parametrize("method", METHODS)
async def test_done_costs_one_request_with_the_method_asked_for(method: str) -> None:
    p, fake = openai_planner([ASSESS_DONE], method)
    evidence = [StepResult(step_id="s1", success=True, output="README text")]
    result = await p.plan(GOAL, LoopState(goal=GOAL, iteration=1, step_results=evidence), CTX)
    assert result.status == "done" and result.llm_calls == 1 and len(fake.requests) == 1
    assert_method(fake.requests[0], method, "AssessStatus")
    roles = [m["role"] for m in fake.requests[0]["messages"]]
    assert roles == ["system", "user"]
    assert "README text" in fake.requests[0]["messages"][1]["content"]


@pytest.mark.parametrize("method", METHODS)
async def test_continue_then_new_plan_through_each_method(method: str) -> None:
    p, fake = openai_planner([ASSESS_CONTINUE, PLAN], method)
    pm = PlanManager(GOAL, allowed_capabilities=["read_file"])
    result = await p.plan(GOAL, LoopState(goal=GOAL, iteration=1), CTX, plan_manager=pm)
    assert result.plan_action == "new" and result.decision is not None
    assert [s.id for s in result.decision.steps] == ["s1", "s2"]
    assert result.decision.steps[1].depends_on == ["s1"]
    assert_method(fake.requests[1], method, "GeneratePlan")
    assert p.stats.structured_ok == 2
    pm.ingest(result.decision, 1)
    assert [s.id for s in pm.ready_steps()] == ["s1"]


@pytest.mark.parametrize("method", METHODS)
async def test_keep_with_a_plan_in_flight_through_each_method(method: str) -> None:
    pm = PlanManager(GOAL, allowed_capabilities=["read_file"])
    pm.ingest(AgentDecision(steps=[StepAction(id="s1", description="read", tools=["read_file"])]), 0)
    keep = {"plan_action": "keep", "execution_mode": "dependency", "next_action": "wait", "steps": []}
    p, _fake = openai_planner([ASSESS_CONTINUE, keep], method)
    result = await p.plan(GOAL, LoopState(goal=GOAL, iteration=1), CTX, plan_manager=pm)
    assert result.plan_action == "keep" and result.decision is None


@pytest.mark.parametrize("method", METHODS)
async def test_garbage_then_recovery_through_each_method(method: str) -> None:
    garbage = "Let me think about this step by step."
    p, fake = openai_planner([ASSESS_CONTINUE, garbage, garbage, PLAN], method)
    result = await p.plan(GOAL, LoopState(goal=GOAL, iteration=1), CTX)
    assert result.decision is not None and len(fake.requests) == 4
    raw_request = fake.requests[2]
    assert "tools" not in raw_request and "response_format" not in raw_request  # the raw call is unstructured
    reask = fake.requests[3]["messages"][-1]["content"]
    assert garbage in reask and "could not be used" in reask
    assert_method(fake.requests[3], method, "GeneratePlan")


@pytest.mark.parametrize("method", METHODS)
async def test_cyclic_plan_is_re_asked_through_each_method(method: str) -> None:
    cyclic = json.loads(json.dumps(PLAN))
    cyclic["steps"][0]["depends_on"] = ["s2"]
    p, fake = openai_planner([ASSESS_CONTINUE, cyclic, PLAN], method)
    result = await p.plan(GOAL, LoopState(goal=GOAL, iteration=1), CTX)
    assert result.decision is not None
    assert "cycle" in fake.requests[2]["messages"][-1]["content"]


async def test_server_error_is_retried_as_transport() -> None:
    p, fake = openai_planner([500, ASSESS_DONE], "json_schema")
    evidence = [StepResult(step_id="s1", success=True, output="x")]
    result = await p.plan(GOAL, LoopState(goal=GOAL, iteration=1, step_results=evidence), CTX)
    assert result.status == "done" and p.stats.transport_retry == 1 and len(fake.requests) == 2


async def test_a_rejected_response_format_falls_back_to_a_raw_call() -> None:
    # local servers answer json_schema with an error status that is not a transport failure
    p, fake = openai_planner([400, json.dumps(ASSESS_DONE)], "json_schema")
    evidence = [StepResult(step_id="s1", success=True, output="x")]
    result = await p.plan(GOAL, LoopState(goal=GOAL, iteration=1, step_results=evidence), CTX)
    assert result.status == "done" and p.stats.raw_fallback == 1
    assert "response_format" not in fake.requests[1]


async def test_persistent_garbage_through_openai_raises_with_attempts() -> None:
    p, _fake = openai_planner([ASSESS_CONTINUE, "no", "no", "no", "no"], "function_calling")
    with pytest.raises(PlanGenerationError) as info:
        await p.plan(GOAL, LoopState(goal=GOAL, iteration=1), CTX)
    assert len(info.value.attempts) >= 4



# -- how many HTTP requests one call may cost against a dead endpoint ------------------------------


def _count_requests_to_a_failing_endpoint(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ChatOpenAI built from now on talks to a handler that answers HTTP 500 and counts."""
    import langchain_openai.chat_models.base as openai_base

    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return httpx.Response(500, json={"error": {"message": "upstream down", "type": "server_error"}})

    # the builders under test make their own clients; these are the hooks langchain-openai uses for it
    monkeypatch.setattr(openai_base, "_get_default_async_httpx_client",
                        lambda *a, **k: httpx.AsyncClient(transport=httpx.MockTransport(handler)))
    monkeypatch.setattr(openai_base, "_get_default_httpx_client",
                        lambda *a, **k: httpx.Client(transport=httpx.MockTransport(handler)))
    return seen


@pytest.mark.parametrize("models", [
    {"default": "openai:gpt-4o-mini"},
    {"default": "qwen", "base_url": "http://127.0.0.1:9/v1"},
], ids=["provider", "base_url"])
async def test_a_dead_endpoint_costs_one_request_per_transport_attempt(
    monkeypatch: pytest.MonkeyPatch, models: dict[str, str]
) -> None:
    # the SDK's own retries (2 by default) would multiply ours: 3 x 3 = 9 requests for one call
    from soothe_planner.config import config_from_dict, resolve_planner

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    seen = _count_requests_to_a_failing_endpoint(monkeypatch)
    config = config_from_dict({"models": models, "planner": {"transport_retries": 2, "transport_backoff_s": 0}})
    planner = resolve_planner(config)
    evidence = [StepResult(step_id="s1", success=True, output="x")]
    with pytest.raises(PlanGenerationError) as info:
        await planner.plan(GOAL, LoopState(goal=GOAL, iteration=1, step_results=evidence), CTX)
    assert len(seen) == 3 == 1 + config.planner.transport_retries
    assert [a.error_type for a in info.value.attempts] == ["transport"]
    assert planner.stats.transport_retry == 2


async def test_the_embedded_model_client_leaves_retrying_to_the_planner(monkeypatch: pytest.MonkeyPatch) -> None:
    from soothe_planner.local import local_chat_model

    seen = _count_requests_to_a_failing_endpoint(monkeypatch)
    model = local_chat_model(base_url="http://127.0.0.1:9")  # an address given: no server is started
    assert model.max_retries == 0
    planner = LLMPlanner(model, settings=PlannerSettings(transport_retries=2, transport_backoff_s=0))
    evidence = [StepResult(step_id="s1", success=True, output="x")]
    with pytest.raises(PlanGenerationError):
        await planner.plan(GOAL, LoopState(goal=GOAL, iteration=1, step_results=evidence), CTX)
    assert len(seen) == 3
