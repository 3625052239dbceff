"""What does every call of the LLM planner need, whatever it asks?

The settings as resolved for the answering model (the prompt profile and the plan syntax it
declares), the models wrapped by the controller so every call holds a slot, one ``Caller`` for the
robust call path, the ``PlannerStats`` it counts into, the check of a prompt against its budget,
and the ``degraded`` policy (see ``llm_planner.py`` for the decisions these serve).
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from langchain_core.language_models import BaseChatModel

from soothe_planner.concurrency import ConcurrencyController
from soothe_planner.dag import PlanManager
from soothe_planner.errors import PlanGenerationError
from soothe_planner.models import PlanContext, PlannerSettings
from soothe_planner.planner.calls import Caller
from soothe_planner.planner.plan_syntax import resolve_plan_syntax
from soothe_planner.planner.prompts import phases
from soothe_planner.planner.prompts.profiles import resolve_profile
from soothe_planner.planner.small_model import reask_temperature, small_model_rules_on
from soothe_planner.planner.stats import PlannerStats
from soothe_planner.planner.sync import SyncPlannerMethods

__all__ = ["PlanManagerFactory", "PlannerBase"]

logger = logging.getLogger("soothe_planner.planner")

PlanManagerFactory = Callable[[str, PlanContext], PlanManager]


class PlannerBase(SyncPlannerMethods):
    """The parts every planner call uses (see the module docstring); ``LLMPlanner`` is the planner."""

    def __init__(
        self,
        model: BaseChatModel,
        *,
        assess_model: BaseChatModel | None = None,
        settings: PlannerSettings | None = None,
        controller: ConcurrencyController | None = None,
        plan_manager_factory: PlanManagerFactory | None = None,
    ) -> None:
        settings = settings or PlannerSettings()
        # 'auto' becomes the profile the answering model declares; one profile per planner
        profile = resolve_profile(settings.prompt_profile, model)
        self.settings = settings if profile == settings.prompt_profile else settings.model_copy(
            update={"prompt_profile": profile})
        syntax = resolve_plan_syntax(self.settings.plan_syntax, model, profile)
        if syntax == "calls" and profile != "compact":
            raise ValueError(
                f"planner.plan_syntax 'calls' needs the compact prompt profile; the profile here is {profile!r}"
            )
        if syntax != self.settings.plan_syntax:
            self.settings = self.settings.model_copy(update={"plan_syntax": syntax})
        self.controller = controller or ConcurrencyController()
        # Wrapped, not only called inside the controller's llm_call(): a sync-only model runs in a
        # worker thread, and only a wrapped model's thread joins the slot's lease, so a call that
        # timed out keeps its slot until the provider call really returns (no retry beside it).
        self.model = self.controller.wrap_model(model)
        self.assess_model = self.controller.wrap_model(assess_model) if assess_model is not None else self.model
        self.stats = PlannerStats()
        self._caller = Caller(self.settings, self.controller, self.stats)  # re-ask sampling: set below
        self._pm_factory = plan_manager_factory or self._default_manager
        # temperature 0: the same call on the same data gives the same output (the executor's model
        # steps run on the run's model too, as a run builds them), so a plan of finished work is refused
        self._greedy = getattr(model, "temperature", None) == 0
        # the policies that exist because a model is small (planner/small_model/): one switch
        self.small_model = small_model_rules_on(self.settings, model)
        self._caller.reask_temperature = reask_temperature(self.settings, self.small_model)

    def _default_manager(self, goal: str, context: PlanContext) -> PlanManager:
        names = context.capability_names()
        return PlanManager(goal, max_plan_steps=self.settings.max_plan_steps, allowed_capabilities=names or None,
                           capabilities=context.available_capabilities)

    def _prompt_checked(self, prompt: phases.Prompt) -> phases.Prompt:
        if prompt.compact:
            self.stats.compact_briefing += 1
            logger.warning("%s: state trimmed and still over budget; the compact briefing replaced the instructions",
                           prompt.phase)
        if prompt.over_budget:
            self.stats.budget_overflow += 1
            logger.warning(
                "%s: prompt of %d characters is over the budget of %d even after trimming state; sent whole",
                prompt.phase, prompt.chars, prompt.budget_chars,
            )
        elif prompt.trimmed:
            self.stats.budget_trims += 1
            logger.info("%s: trimmed %s to fit the prompt budget", prompt.phase, prompt.trimmed)
        return prompt

    def _degrade(self, phase: str, exc: PlanGenerationError) -> None:
        """Re-raise ``exc`` unless ``on_failure`` is ``degraded``; else count and log the fallback."""
        if self.settings.on_failure != "degraded":
            raise exc
        self.stats.degraded += 1
        logger.error("%s: degraded after %d attempts; taking the choice that assumes the least", phase, len(exc.attempts))
