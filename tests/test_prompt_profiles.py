"""Prompt profiles and per-call output caps: what a small model is sent, and what it may write back."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from langchain_openai import ChatOpenAI
from pydantic import SecretStr, ValidationError

from soothe_planner.local.embedded import PROMPT_PROFILE_KEY
from soothe_planner.models import LoopState, PlanContext, PlannerSettings
from soothe_planner.planner import LLMPlanner
from soothe_planner.planner.output_caps import OutputCaps
from soothe_planner.planner.prompts.profiles import (
    PROFILE_METADATA_KEY,
    compact_schema,
    resolve_profile,
    schema_for,
    trim_schema,
)
from soothe_planner.testing import ScriptedChatModel
from soothe_planner.wire import AssessStatus, GeneratePlan, generation_model


def test_auto_takes_the_profile_the_model_declares_and_full_otherwise() -> None:
    declared = ScriptedChatModel([], metadata={PROFILE_METADATA_KEY: "compact"})
    silent = ScriptedChatModel([])
    assert resolve_profile("auto", declared) == "compact"
    assert resolve_profile("auto", silent) == "full"
    assert resolve_profile("full", declared) == "full"  # configuration wins over the declaration
    with pytest.raises(ValueError, match="'auto', 'full' or 'compact', got 'tiny'"):
        resolve_profile("tiny", silent)


def test_the_embedded_model_declares_the_compact_profile_under_the_planner_key() -> None:
    assert PROMPT_PROFILE_KEY == PROFILE_METADATA_KEY


def test_planner_settings_reject_an_unknown_profile_and_an_unknown_call_kind() -> None:
    with pytest.raises(ValidationError, match="prompt_profile"):
        PlannerSettings(prompt_profile="tiny")  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="max_output_tokens_per_call"):
        PlannerSettings(max_output_tokens_per_call={"plan-asess": 100})  # type: ignore[dict-item]
    with pytest.raises(ValidationError, match="greater than or equal to 16"):
        PlannerSettings(max_output_tokens_per_call={"answer": 4})


def test_trimmed_schema_keeps_every_bound_and_drops_what_the_prompt_already_says() -> None:
    full = generation_model(5).model_json_schema()
    trimmed = trim_schema(full)
    assert {"description", "default", "title"} <= _schema_keywords(full)
    assert not {"description", "default", "title"} & _schema_keywords(trimmed)
    step = trimmed["$defs"]["PlanStepSpec"]
    assert set(step["properties"]) == set(full["$defs"]["PlanStepSpec"]["properties"])  # a field named description stays
    assert step["properties"]["description"] == {"maxLength": 300, "type": "string"}
    assert trimmed["properties"]["steps"]["maxItems"] == 5 and step["additionalProperties"] is False
    assert step["properties"]["id"]["pattern"] and trimmed["required"] == ["plan_action"]
    assert len(json.dumps(trimmed)) < len(json.dumps(full)) * 0.7


def _schema_keywords(schema: Any, in_properties: bool = False) -> set[str]:
    """Every keyword used in a JSON schema (property names are not keywords)."""
    if isinstance(schema, list):
        return set().union(*(_schema_keywords(x) for x in schema)) if schema else set()
    if not isinstance(schema, dict):
        return set()
    out = set() if in_properties else set(schema)
    for key, value in schema.items():
        out |= _schema_keywords(value, in_properties=key == "properties" and not in_properties)
    return out


def test_compact_schema_is_the_same_class_to_everything_downstream() -> None:
    compact = compact_schema(AssessStatus)
    assert compact is compact_schema(AssessStatus) and compact.__name__ == "AssessStatus"
    assert schema_for(AssessStatus, "full") is AssessStatus and schema_for(AssessStatus, "compact") is compact
    parsed = compact.model_validate({"status": "done", "goal_progress": 3})
    assert isinstance(parsed, AssessStatus) and parsed.goal_progress == 1.0  # the same validators run
    assert compact.model_json_schema()["title"] == "AssessStatus"
    assert "description" not in _schema_keywords(compact.model_json_schema())
    assert issubclass(compact_schema(generation_model(3)), GeneratePlan)


# --------------------------------------------------------------------------- through the real client


def _recording_openai(seen: list[dict[str, Any]], **kwargs: Any) -> ChatOpenAI:
    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        if body.get("tools"):
            name = body["tools"][0]["function"]["name"]
            args = json.dumps({"status": "continue", "goal_progress": 0.2, "confidence": 0.5, "summary": "s"})
            message: dict[str, Any] = {"role": "assistant", "content": None, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": name, "arguments": args}}]}
        else:
            message = {"role": "assistant", "content": "the answer"}
        return httpx.Response(200, json={"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                                         "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                                         "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    return ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key=SecretStr("k"), model="m", max_retries=0,
                      http_client=httpx.Client(transport=httpx.MockTransport(handler)),
                      http_async_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)), **kwargs)


def _assess_state() -> LoopState:
    from soothe_planner.models import AgentDecision, StepAction, StepResult

    decision = AgentDecision(steps=[StepAction(id="s1", description="look")])
    return LoopState(goal="g", iteration=1, current_decision=decision,
                     step_results=[StepResult(step_id="s1", success=True, output="seen")])


async def test_the_compact_profile_sends_the_compact_briefing_and_the_trimmed_schema() -> None:
    seen: list[dict[str, Any]] = []
    model = _recording_openai(seen, metadata={PROFILE_METADATA_KEY: "compact"}, max_tokens=512)
    planner = LLMPlanner(model, settings=PlannerSettings(structured_output_method="function_calling"))
    assert planner.settings.prompt_profile == "compact"
    got = await planner.assess_status("g", _assess_state(), PlanContext())
    assert got.status == "continue"
    body = seen[0]
    assert body["messages"][0]["content"].startswith("Judge from the evidence")
    assert "description" not in _schema_keywords(body["tools"][0]["function"]["parameters"])
    assert body["tools"][0]["function"]["name"] == "AssessStatus"
    # the status alone is asked for (AssessStatus.COMPACT_FIELDS), in the schema and in the briefing
    parameters = body["tools"][0]["function"]["parameters"]
    assert set(parameters["properties"]) == {"status"} and parameters["required"] == ["status"]
    assert parameters["additionalProperties"] is False and "goal_progress" not in body["messages"][0]["content"]


async def test_a_call_kind_with_a_cap_sends_it_and_other_kinds_keep_the_model_cap() -> None:
    seen: list[dict[str, Any]] = []
    model = _recording_openai(seen, max_tokens=512, extra_body={"max_tokens": 512})
    settings = PlannerSettings(structured_output_method="function_calling",
                               max_output_tokens_per_call={"answer": 64, "plan-assess": 96})
    planner = LLMPlanner(model, settings=settings)
    assert await planner.answer("g", PlanContext()) == "the answer"
    await planner.assess_status("g", _assess_state(), PlanContext())
    await planner.assess_status("g", _assess_state(), PlanContext())
    answer, assess, again = seen
    assert answer["max_completion_tokens"] == 64 and answer["max_tokens"] == 64  # extra_body follows the cap
    assert assess["max_completion_tokens"] == 96 and assess["max_tokens"] == 96
    assert again["max_tokens"] == 96
    assert model.max_tokens == 512  # the caller's model is untouched
    uncapped = LLMPlanner(model, settings=PlannerSettings(max_output_tokens_per_call={"answer": 64}))
    await uncapped.assess_status("g", _assess_state(), PlanContext())
    assert seen[-1]["max_tokens"] == 512


def test_a_model_with_no_max_tokens_field_keeps_its_own_cap_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    caps = OutputCaps({"answer": 64})
    model = ScriptedChatModel([])
    with caplog.at_level(logging.WARNING, logger="soothe_planner.planner"):
        assert caps.model_for(model, "answer") is model
        assert caps.model_for(model, "answer") is model
    assert len([r for r in caplog.records if "not applied" in r.message]) == 1
    assert caps.model_for(model, "intake") is model


def test_capped_copies_are_made_once_per_model_and_cap() -> None:
    caps = OutputCaps({"answer": 64, "intake": 64})
    model = _recording_openai([], max_tokens=512)
    first = caps.model_for(model, "answer")
    assert first is not model and first.max_tokens == 64  # type: ignore[attr-defined]
    assert caps.model_for(model, "intake") is first
