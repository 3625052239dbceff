"""The prompts of the small calls around a plan: the intake's route, a follow-up's continuation,
the deliverable's declaration and a direct answer. Each carries the goal and little else; the
loop's two phases and the whole-plan calls are in ``phases``."""

from __future__ import annotations

from collections.abc import Sequence

from soothe_planner.models import LoopState, PlanContext, PlannerSettings
from soothe_planner.planner.prompts import Prompt, build, escape_data

__all__ = ["answer_prompt", "continuation_prompt", "conversation", "deliverable_prompt", "intake_prompt"]

CONVERSATION_MESSAGES = 10


def conversation(state: LoopState | None, context: PlanContext) -> str:
    messages = (state.recent_messages if state is not None and state.recent_messages else context.recent_messages)
    shown = messages[-CONVERSATION_MESSAGES:]
    return escape_data("\n".join(shown)) if shown else "(none)"


def continuation_prompt(goal: str, prior_goals: Sequence[str], settings: PlannerSettings) -> Prompt:
    prior = "\n".join(f"- {g}" for g in prior_goals) or "(none)"
    return build(
        "continuation",
        "continuation_system",
        "continuation_human",
        {"goal": escape_data(goal), "prior_goals": escape_data(prior)},
        trimmable={"prior_goals": "tail"},
        budget_tokens=settings.prompt_budget_tokens,
        profile=settings.prompt_profile,
    )


def deliverable_prompt(goal: str, settings: PlannerSettings) -> Prompt:
    """The deliverable's declaration (``planner/contract/declare.py``): the goal alone."""
    return build(
        "deliverable",
        "deliverable_system",
        "deliverable_human",
        {"goal": escape_data(goal)},
        trimmable={},
        budget_tokens=settings.prompt_budget_tokens,
        profile=settings.prompt_profile,
    )


def intake_prompt(goal: str, context: PlanContext, settings: PlannerSettings) -> Prompt:
    caps = ", ".join(c.name for c in context.available_capabilities) or "(none)"
    return build(
        "intake",
        "intake_system",
        "intake_human",
        {"goal": escape_data(goal), "conversation": conversation(None, context), "capabilities": caps},
        trimmable={"conversation": "tail"},
        budget_tokens=settings.prompt_budget_tokens,
        profile=settings.prompt_profile,
    )


def answer_prompt(goal: str, context: PlanContext, evidence: str, settings: PlannerSettings) -> Prompt:
    return build(
        "answer",
        "answer_system",
        "answer_human",
        {
            "goal": escape_data(goal),
            "conversation": conversation(None, context),
            "evidence": escape_data(evidence) if evidence else "(none)",
        },
        trimmable={"evidence": "head", "conversation": "tail"},
        budget_tokens=settings.prompt_budget_tokens,
        profile=settings.prompt_profile,
    )
