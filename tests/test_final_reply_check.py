"""A final answer step whose reply only repeats the request gets one re-ask (small-model rules).

The check (``small_model.echo.echo_reask``) compares words of any script, case aside: no word of any
language is listed, so the German and Spanish goals below are judged as the English ones. The
executor runs it only when given it; ``resolve_executor`` gives it with the small-model rules.
Every model is scripted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from pydantic import Field

from soothe_planner.concurrency import ConcurrencyController
from soothe_planner.config import config_from_dict, resolve_executor
from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.execution import StepExecutor
from soothe_planner.models import AgentDecision, StepAction, StepResult
from soothe_planner.planner.small_model import REASK_TEMPERATURE
from soothe_planner.planner.small_model.echo import ECHO_REASK, echo_reask
from soothe_planner.testing import ScriptedChatModel
from soothe_planner.tools import make_builtin_tools

HANG_GUARD_S = 10.0  # only guards against a hang; no assertion depends on time
GOAL = "Per protocol.md, may cores stay in the fridge overnight? yes or no, and why"


@pytest.mark.parametrize(("goal", "reply", "flagged"), [
    (GOAL, "yes, and why", True),
    (GOAL, "YES", True),
    (GOAL, "No: the protocol says to freeze them within 6 hours.", False),
    ("Which Python module imports the requests library?", "requests", True),
    ("Which Python module imports the requests library?", "src/app/sync.py imports it", False),
    ("Welches Python-Modul importiert die Bibliothek requests?", "requests", True),
    ("Welches Python-Modul importiert die Bibliothek requests?", "sync.py", False),
    ("¿Quién es el contacto del permiso de la zona B?", "el contacto del permiso", True),
    ("¿Quién es el contacto del permiso de la zona B?", "Harriet Oduya", False),
    # choosing between the values the request names is an answer, though made of its words
    ("Which file is longer, setup.py or README.md?", "README.md", False),
    ("Which file is longer, setup.py or README.md?", "", False),
])
def test_echo_reask_flags_a_reply_made_only_of_the_requests_words(goal: str, reply: str, flagged: bool) -> None:
    assert (echo_reask(goal, reply) == ECHO_REASK) is flagged
    assert flagged or echo_reask(goal, reply) is None


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "protocol.md").write_text("Do not keep cores in the fridge overnight: freeze them within 6 hours.\n")
    return ws


def _manager(steps: list[dict[str, Any]]) -> PlanManager:
    pm = PlanManager(GOAL)
    pm.ingest(AgentDecision(steps=[StepAction(**s) for s in steps]))
    return pm


READ_THEN_ANSWER = [
    {"id": "s1", "description": "read the protocol", "tool": "read_file", "args": {"path": "protocol.md"}},
    {"id": "s2", "description": "answer the request", "depends_on": ["s1"]},
]


async def _run(ex: StepExecutor, pm: PlanManager) -> dict[str, StepResult]:
    results = await asyncio.wait_for(ex.run(pm), HANG_GUARD_S)
    return {r.step_id: r for r in results}


async def test_an_echoed_final_answer_is_asked_once_more_shown_its_reply_and_the_note(tmp_path: Path) -> None:
    model = ScriptedChatModel(["yes, and why", "No: freeze them within 6 hours; the fridge is not allowed overnight."])
    controller = ConcurrencyController()
    ex = StepExecutor(tools=list(make_builtin_tools(_workspace(tmp_path)).values()), agent_model=model,
                      controller=controller, final_reply_check=echo_reask)
    res = (await _run(ex, _manager(READ_THEN_ANSWER)))["s2"]
    assert res.success and res.output.startswith("No: freeze them within 6 hours")
    assert controller.calls_by_phase == {"step-model": 2}
    again = model.calls[1].messages
    assert isinstance(again[-2], AIMessage) and again[-2].content == "yes, and why"
    assert isinstance(again[-1], HumanMessage) and again[-1].content == ECHO_REASK
    assert again[1].content == model.calls[0].messages[1].content  # the same task, data and request


class _Sampling(ScriptedChatModel):
    """A scripted model with the sampling fields a chat model has, noting them at each call."""

    temperature: float = 0.0
    seed: int | None = None
    seen: list[tuple[float, int | None]] = Field(default_factory=list)

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        self.seen.append((self.temperature, self.seed))
        return await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)


async def test_the_reask_is_sampled_at_the_given_temperature_and_the_first_call_is_not(tmp_path: Path) -> None:
    model = _Sampling(responses=["yes, and why", "No: freeze them within 6 hours."])
    ex = StepExecutor(tools=list(make_builtin_tools(_workspace(tmp_path)).values()), agent_model=model,
                      final_reply_check=echo_reask, reask_temperature=0.7)
    res = (await _run(ex, _manager(READ_THEN_ANSWER)))["s2"]
    assert res.success and res.output.startswith("No:")
    assert model.seen == [(0.0, None), (0.7, 1)]  # greedy first; the re-ask sampled, seeded to stay reproducible


async def test_the_second_reply_stands_even_when_it_echoes_again_and_is_not_asked_a_third_time(tmp_path: Path) -> None:
    model = ScriptedChatModel(["yes, and why", "yes"])
    ex = StepExecutor(tools=list(make_builtin_tools(_workspace(tmp_path)).values()), agent_model=model,
                      final_reply_check=echo_reask)
    res = (await _run(ex, _manager(READ_THEN_ANSWER)))["s2"]
    assert res.success and res.output == "yes"  # the done-guard, not the step, judges it
    assert len(model.calls) == 2


async def test_a_second_reply_that_says_the_data_lacks_it_fails_the_step(tmp_path: Path) -> None:
    model = ScriptedChatModel(["yes, and why", "MISSING: the storage rule"])
    ex = StepExecutor(tools=list(make_builtin_tools(_workspace(tmp_path)).values()), agent_model=model,
                      final_reply_check=echo_reask)
    res = (await _run(ex, _manager(READ_THEN_ANSWER)))["s2"]
    assert not res.success and res.error_type == "missing_data"


async def test_no_check_no_reask_and_an_intermediate_step_is_never_checked(tmp_path: Path) -> None:
    tools = list(make_builtin_tools(_workspace(tmp_path)).values())
    model = ScriptedChatModel(["yes, and why"])
    res = (await _run(StepExecutor(tools=tools, agent_model=model), _manager(READ_THEN_ANSWER)))["s2"]
    assert res.success and res.output == "yes, and why" and len(model.calls) == 1
    # s2's text goes to s3, another model step: it is not the answer, so it is not checked
    model = ScriptedChatModel(["yes", "No: freeze them within 6 hours."])
    steps = [*READ_THEN_ANSWER, {"id": "s3", "description": "word the answer", "depends_on": ["s2"]}]
    results = await _run(StepExecutor(tools=tools, agent_model=model, final_reply_check=echo_reask), _manager(steps))
    assert results["s2"].output == "yes" and results["s3"].output.startswith("No:") and len(model.calls) == 2


@pytest.mark.parametrize(("section", "given"), [
    ({"models": {"default": "local:1.5b"}}, True),
    ({"models": {"default": "openai:gpt-4o-mini"}}, False),
    ({"models": {"default": "openai:gpt-4o-mini"}, "planner": {"small_model_rules": True}}, True),
    ({"models": {"default": "local:1.5b"}, "planner": {"small_model_rules": False}}, False),
])
def test_resolve_executor_gives_the_check_with_the_small_model_rules_only(
    tmp_path: Path, section: dict[str, Any], given: bool
) -> None:
    config = config_from_dict({**section, "execution": {"workspace": str(_workspace(tmp_path))}})
    executor = resolve_executor(config, ScriptedChatModel([]))
    assert (executor.runner.final_reply_check is echo_reask) is given
    assert executor.runner.reask_temperature == (REASK_TEMPERATURE if given else None)
