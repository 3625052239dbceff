"""The whole-plan protocol (``PlannerProtocol``): create a plan in one go, revise it, reflect on it.

``create_plan`` is one generation call (phase 2's, which ``LLMPlanner`` makes) validated whole;
``revise_plan`` marks the old plan ``revised`` and returns a new revision with the same id, merged
through a ``PlanManager`` in which finished nodes are immutable, so finished steps keep their ids,
dependencies, statuses and results; ``reflect`` gives the deterministic facts, with the model's
judgment layered on top when ``llm_reflection`` is on.
"""

from __future__ import annotations

from soothe_planner.dag import PlanManager
from soothe_planner.models import LoopState, Plan, PlanContext, Reflection, StatusAssessment, StepResult
from soothe_planner.parsing import parse_object
from soothe_planner.planner.base import PlannerBase
from soothe_planner.planner.calls import Tally
from soothe_planner.planner.generation import Generated, decision_validator, plan_schema, readers
from soothe_planner.planner.prompts import escape_data, phases
from soothe_planner.planner.reflection import deterministic_reflection
from soothe_planner.planner.run_steps import RunSteps
from soothe_planner.wire import ReflectOnPlan

__all__ = ["WholePlanMethods", "escape_plan"]


class WholePlanMethods(PlannerBase):
    """``create_plan``, ``revise_plan`` and ``reflect`` over the planner's generation call."""

    async def _generation_call(
        self,
        goal: str,
        state: LoopState,
        context: PlanContext,
        assessment: StatusAssessment | None,
        run: RunSteps,
        tally: Tally,
        *,
        max_steps: int,
        instruction: str,
        allow_keep: bool,
        replace: bool,
        phase: str = "plan-generate",
    ) -> Generated:
        """Phase 2's call: one plan answer, read and judged (``LLMPlanner`` makes it)."""
        raise NotImplementedError

    async def create_plan(self, goal: str, context: PlanContext) -> Plan:
        """One generation call (plus repairs), validated whole before it is returned."""
        pm = self._pm_factory(goal, context)
        state = LoopState(goal=goal, thread_id=context.thread_id or "default", max_iterations=self.settings.max_iterations,
                          recent_messages=list(context.recent_messages))
        gen = await self._generation_call(
            goal, state, context, None, RunSteps.of(state, pm), Tally(), max_steps=self.settings.max_plan_steps,
            instruction="Write the whole plan now.", allow_keep=False, replace=False,
        )
        assert gen.decision is not None
        pm.ingest(gen.decision, 0)
        plan = pm.to_plan()
        return plan.model_copy(update={"goal": goal, "revision": 0, "reasoning": gen.decision.reasoning or gen.next_action})

    async def revise_plan(self, plan: Plan, reflection: Reflection, thread_id: str | None = None) -> Plan:
        """A new revision: finished steps are kept as they were; pending ones may be rewritten."""
        context = PlanContext(thread_id=thread_id)
        pm = self._manager_from_plan(plan)
        prompt = self._prompt_checked(phases.revise_prompt(plan.goal, escape_plan(pm), reflection, context, self.settings))
        compact, max_steps = self.settings.prompt_profile == "compact", self.settings.max_plan_steps
        validate = decision_validator(plan.goal, context, pm, pm.deliverable, small_model=self.small_model,
                                      allow_keep=False, replace=True, max_steps=max_steps)
        read, parse = readers(context, max_steps, pm)
        outcome = await self._caller.structured(
            self.model, plan_schema(context, max_steps, False, compact=compact), prompt.messages(), phase="revise",
            convert=read, parse_text=parse, validate=validate, tally=Tally(), thread_id=thread_id, iteration=plan.revision,
        )
        gen = outcome.value
        assert gen.decision is not None
        pm.ingest(gen.decision, plan.revision + 1, replace=True)
        revised = pm.to_plan()
        plan.status = "revised"
        return revised.model_copy(update={
            "id": plan.id, "goal": plan.goal, "revision": plan.revision + 1, "status": "active",
            "concurrency": plan.concurrency, "is_plan_only": plan.is_plan_only,
            "reasoning": gen.decision.reasoning or gen.next_action,
        })

    def _manager_from_plan(self, plan: Plan) -> PlanManager:
        """A manager holding ``plan`` with every status and result as recorded."""
        return PlanManager.from_plan(plan, max_plan_steps=self.settings.max_plan_steps)

    async def reflect(
        self, plan: Plan, step_results: list[StepResult], goal_context: str | None = None
    ) -> Reflection:
        """Deterministic facts; with ``llm_reflection`` the model's judgment is layered on top."""
        facts = deterministic_reflection(plan, step_results)
        if not self.settings.llm_reflection:
            return facts
        goal = plan.goal if not goal_context else f"{plan.goal}\n{goal_context}"
        merged = {s.id: s for s in plan.steps}
        for r in step_results:
            if r.step_id in merged:
                s = merged[r.step_id]
                merged[r.step_id] = s.model_copy(update={"result": r, "status": "completed" if r.success else "failed"})
        prompt = self._prompt_checked(phases.reflect_prompt(goal, plan.model_copy(update={"steps": list(merged.values())}),
                                                            step_results, self.settings))
        outcome = await self._caller.structured(
            self.model, ReflectOnPlan, prompt.messages(), phase="reflect",
            convert=lambda m: m, parse_text=lambda t: parse_object(t, ReflectOnPlan)[0], tally=Tally(),
            iteration=plan.revision,
        )
        judged = outcome.value
        assert isinstance(judged, ReflectOnPlan)
        return facts.model_copy(update={
            "assessment": f"{facts.assessment}. {judged.assessment}",
            "should_revise": judged.should_revise,
            "feedback": "\n".join(x for x in (judged.feedback, facts.feedback) if x),
        })


def escape_plan(pm: PlanManager) -> str:
    return escape_data(pm.dag_prompt())
