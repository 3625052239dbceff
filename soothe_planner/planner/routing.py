"""The cheap questions around planning: is a request trivial, does a follow-up need a plan, an answer.

Intake routes a request (a ``trivial`` one comes with its answer), the continuation check decides
whether a follow-up turn needs one bootstrap step or full plan generation, and ``answer`` writes a
plain-text answer (the trivial route, the final synthesis). They are asked of ``assess_model``
(the answer of ``model``), guarded, and with ``on_failure="degraded"`` take the choice that assumes
the least: ``complex`` for intake, ``plan_generate`` for a continuation.
"""

from __future__ import annotations

import logging

from soothe_planner.errors import PlanGenerationError
from soothe_planner.models import ContinuationAssessment, IntakeRoute, PlanContext
from soothe_planner.parsing import parse_object
from soothe_planner.planner.base import PlannerBase
from soothe_planner.planner.calls import Tally
from soothe_planner.planner.prompts import phases
from soothe_planner.wire import ChooseContinuation, RouteIntake, to_continuation

__all__ = ["IntakeAndContinuation"]

logger = logging.getLogger("soothe_planner.planner")


class IntakeAndContinuation(PlannerBase):
    """Intake routing, the continuation check and a plain answer (see the module docstring)."""

    async def assess_continuation(
        self, goal: str, prior_completed_goals: list[str], context: PlanContext
    ) -> ContinuationAssessment:
        """``bootstrap`` (one step, then done) or ``plan_generate``, with guardrails."""
        return await self._continuation(goal, prior_completed_goals, context, Tally(), context.thread_id)

    async def _continuation(
        self, goal: str, prior: list[str], context: PlanContext, tally: Tally, thread_id: str | None
    ) -> ContinuationAssessment:
        if context.intake == "complex":
            self.stats.guard_overrides += 1
            return ContinuationAssessment(action="plan_generate", reasoning="guard: complex intake skips the continuation check")
        prompt = self._prompt_checked(phases.continuation_prompt(goal, prior, self.settings))
        try:
            outcome = await self._caller.structured(
                self.assess_model, ChooseContinuation, prompt.messages(), phase="continuation",
                convert=lambda m: to_continuation(m),  # type: ignore[arg-type]
                parse_text=lambda t: to_continuation(parse_object(t, ChooseContinuation)[0]),
                tally=tally, thread_id=thread_id, iteration=0,
            )
        except PlanGenerationError as exc:
            self._degrade("continuation", exc)
            return ContinuationAssessment(action="plan_generate", reasoning="degraded: the continuation check failed")
        ca = outcome.value
        if ca.action == "bootstrap":
            reason = ""
            if context.intake == "simple":
                reason = "guard: simple intake needs a plan, bootstrap overridden"
            elif not ca.reasoning.strip():
                reason = "guard: bootstrap without reasoning overridden"
            if reason:
                self.stats.guard_overrides += 1
                logger.warning("continuation: %s", reason)
                ca = ContinuationAssessment(action="plan_generate", reasoning=f"{reason}. {ca.reasoning}".strip())
        return ca

    async def route_intake(self, goal: str, context: PlanContext) -> tuple[IntakeRoute, str]:
        """``(route, answer)``: trivial requests are answered here; others get an empty answer."""
        tally = Tally()
        prompt = self._prompt_checked(phases.intake_prompt(goal, context, self.settings))
        try:
            outcome = await self._caller.structured(
                self.assess_model, RouteIntake, prompt.messages(), phase="intake",
                convert=lambda m: m,
                parse_text=lambda t: parse_object(t, RouteIntake)[0],
                tally=tally, thread_id=context.thread_id, iteration=0,
            )
        except PlanGenerationError as exc:
            self._degrade("intake", exc)
            return "complex", ""
        routed = outcome.value
        assert isinstance(routed, RouteIntake)
        if routed.route != "trivial":
            return routed.route, ""
        answer = routed.answer or await self.answer(goal, context)
        return "trivial", answer

    async def answer(self, goal: str, context: PlanContext, evidence: str = "") -> str:
        """A plain-text answer to ``goal``, from ``evidence`` when given (trivial intake, synthesis)."""
        prompt = self._prompt_checked(phases.answer_prompt(goal, context, evidence, self.settings))
        text = await self._caller.text(self.model, prompt.messages(), phase="answer", tally=Tally(), thread_id=context.thread_id)
        return text.strip()
