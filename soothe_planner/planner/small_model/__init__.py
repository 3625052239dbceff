"""What the planner does only because a model is small, kept in one place and switched as one.

A small local model (the embedded 1.5B) breaks rules a provider model keeps: it plans a search and
stops, re-plans the very steps that just ran, answers from data that does not hold the answer,
states a number no tool returned and calls the goal done. The policies here catch those habits:

- ``plan_rules``: a plan that ends in reading, a write a re-plan meant as an answer, a re-asked
  missing answer with no new data, a plan of finished work (greedy decoding repeats itself), and a
  plan that leaves the deliverable's file unwritten (a general planner may write it later; a small
  model that is not held to it never does).
- ``grounding``: a ``done`` whose answer states facts no tool returned becomes ``replan``; a goal
  that names a workspace file is not done until a step looked in it; a ``continue`` over a
  finished plan whose answer every tool output vouches for becomes ``done``; when every plan the
  model writes is refused, the write that carries every line the searches found is planned for it.
- ``echo``: an answer made only of the request's words answers nothing: the done-guard refuses it,
  and the executor asks the step that wrote it once more (``echo_reask``, its ``final_reply_check``).
- ``reask_temperature``: a re-ask after a content refusal is sampled, not greedy.
- Elsewhere, switched by the same flag: the plan grammar's owed write (``planner/plan_syntax``),
  the model step's ``MISSING:`` reply (``execution``), the built-ins' nearest lines and the
  search that passes over the run's own files (``tools``, through the config).

The switch is ``PlannerSettings.small_model_rules``: ``None`` takes the model's declaration
(``metadata["soothe_small_model_rules"]``, which the embedded model sets), so a provider model gets
none of this unless configured. No model name is looked at.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

from soothe_planner.models import PlannerSettings

__all__ = ["REASK_TEMPERATURE", "SMALL_MODEL_KEY", "reask_temperature", "sampled", "small_model_rules_on"]

REASK_TEMPERATURE = 0.7
"""A re-ask after a content refusal is sampled at this temperature with the small-model rules: the
embedded model decodes greedily, and shown its refused plan with the reason, it wrote the same plan
again on most re-asks."""

SMALL_MODEL_KEY = "soothe_small_model_rules"
"""The key under which a chat model's ``metadata`` asks for the small-model rules."""


def small_model_rules_on(settings: PlannerSettings, model: object) -> bool:
    """``settings.small_model_rules`` when set, else what ``model`` declares (off when it declares nothing)."""
    if settings.small_model_rules is not None:
        return settings.small_model_rules
    metadata = getattr(model, "metadata", None)
    return isinstance(metadata, Mapping) and metadata.get(SMALL_MODEL_KEY) is True


def reask_temperature(settings: PlannerSettings, small_model: bool) -> float | None:
    """The temperature of a re-ask after a content refusal: ``settings.reask_temperature`` when set,
    else ``REASK_TEMPERATURE`` with the small-model rules, else none (the model's own)."""
    if settings.reask_temperature is not None:
        return settings.reask_temperature
    return REASK_TEMPERATURE if small_model else None


def sampled(model: BaseChatModel, temperature: float | None, seed: int) -> BaseChatModel:
    """``model`` for a re-ask: a copy sampling at ``temperature`` with ``seed`` (a run stays
    reproducible), or ``model`` itself when no temperature is given or its class has no such field."""
    fields = type(model).model_fields
    if temperature is None or "temperature" not in fields:
        return model
    update: dict[str, Any] = {"temperature": temperature}
    if "seed" in fields:
        update["seed"] = seed
    return model.model_copy(update=update)
