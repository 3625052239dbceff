"""Malformed model output through the whole ``plan()`` path: a valid plan or a typed error, never worse.

Every case of the parser corpus becomes the generation reply after a ``continue`` assessment. The
model answers every generation-side call (structured, raw fallback, re-ask, the "keep with nothing
in flight" follow-up) with the same text, so re-asks see the same garbage. For each case the
outcome must be one of: an accepted ``new`` decision that validates and ingests into the goal's
``PlanManager``, or a ``PlannerError``. Anything else — another exception, a ``done`` status, a
decision the manager rejects — is a failure, listed by case name.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from soothe_planner.dag import validate_steps
from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.errors import PlannerError
from soothe_planner.models import Capability, LoopState, PlanContext, PlannerSettings
from soothe_planner.planner import LLMPlanner
from soothe_planner.testing import FunctionChatModel, ScriptedCall

CORPUS = Path(__file__).parent / "data" / "parser_corpus"
CONTINUE = {"status": "continue", "goal_progress": 0.2, "confidence": 0.7, "summary": "work remains"}


def _cases() -> list[dict[str, Any]]:
    cases = []
    for path in sorted(CORPUS.glob("*.jsonl")):
        cases += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return cases


async def _run_case(case: dict[str, Any]) -> tuple[str, str]:
    """('plan' | 'error', detail) — or raises what the planner let escape."""
    calls: list[ScriptedCall] = []

    def reply(call: ScriptedCall) -> Any:
        calls.append(call)
        return CONTINUE if call.schema_name == "AssessStatus" else case["text"]

    caps = case.get("known_capabilities")
    max_steps = case.get("max_steps") or 20
    settings = PlannerSettings(
        max_plan_steps=max_steps, transport_retries=0, transport_backoff_s=0.0, retries=1
    )
    planner = LLMPlanner(FunctionChatModel(reply), settings=settings)
    context = PlanContext(available_capabilities=[Capability(name=c, kind="tool") for c in caps or []])
    manager = PlanManager("corpus goal", max_plan_steps=max_steps, allowed_capabilities=caps)
    state = LoopState(goal="corpus goal", iteration=1, max_iterations=5)
    try:
        result = await planner.plan("corpus goal", state, context, plan_manager=manager)
    except PlannerError as exc:
        return "error", type(exc).__name__
    assert len(calls) <= 2 + 2 * (settings.retries + 2), (
        f"{case['name']}: {len(calls)} calls, unbounded re-asking"
    )
    if result.status == "done":
        return "false-done", ""
    if result.plan_action != "new" or result.decision is None:
        return "no-plan", f"plan_action={result.plan_action!r} degraded={result.degraded}"
    errors = validate_steps(result.decision.steps, max_steps=max_steps, allowed_capabilities=caps)
    if errors:
        return "invalid-plan", "; ".join(errors)
    manager.ingest(
        result, state.iteration
    )  # a PlanValidationError here is an accepted plan that was not valid
    return "plan", f"{len(result.decision.steps)} steps"


async def test_every_corpus_case_yields_a_valid_plan_or_a_typed_error() -> None:
    cases = _cases()
    assert len(cases) >= 300
    outcomes: dict[str, int] = {}
    bad: list[str] = []
    for case in cases:
        try:
            kind, detail = await _run_case(case)
        except Exception as exc:  # anything untyped escaping plan() is the failure this suite looks for
            kind, detail = "uncaught", f"{type(exc).__name__}: {exc}"
        outcomes[kind] = outcomes.get(kind, 0) + 1
        if kind not in {"plan", "error"}:
            bad.append(f"{case['category']}/{case['name']}: {kind} {detail}"[:300])
    assert not bad, f"{len(bad)} of {len(cases)} cases misbehaved ({outcomes}):\n" + "\n".join(bad[:25])
    # Most of the corpus is repairable: the path must not turn good plans into errors wholesale.
    assert outcomes.get("plan", 0) >= len(cases) // 2, outcomes


async def test_a_case_the_parser_rejects_becomes_a_typed_error_not_a_plan() -> None:
    kind, detail = await _run_case(
        {
            "name": "prose",
            "category": "x",
            "text": "I think we should do it.",
            "known_capabilities": None,
            "max_steps": None,
        }
    )
    assert (kind, detail) == ("error", "PlanGenerationError")
