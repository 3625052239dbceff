"""How does one kind of call get its own output-token cap, on any chat model?

``planner.max_output_tokens_per_call`` caps the answer of one kind of call (a synthesis in 300
tokens, an assessment in 200) below the model's own ``max_tokens``. LangChain offers no per-call
cap that survives ``with_structured_output`` — a ``bind(max_tokens=...)`` is lost when the
structured wrapper is built on top of it — so the cap is a copy of the model with its
``max_tokens`` field set, made once per (model, cap) and reused, so the structured-output binding
built over it is reused too.

Weighed: a model class with no ``max_tokens`` field keeps its own setting (and the call is logged
once), because guessing at a provider's field names would be worse than an honest "not applied".
OpenAI-compatible servers that ignore ``max_completion_tokens`` are sent ``max_tokens`` in
``extra_body`` (see ``config.resolve``); when the model carries one there, the copy's is the cap too.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

from soothe_planner.models import CallKind

__all__ = ["OutputCaps"]

logger = logging.getLogger("soothe_planner.planner")
_MAX_COPIES = 32


class OutputCaps:
    """Copies of models with a call kind's output cap, kept while their model lives."""

    def __init__(self, caps: Mapping[CallKind, int]) -> None:
        self.caps: dict[str, int] = {str(kind): cap for kind, cap in caps.items()}
        # the model is held in the value so its id cannot be reused while the entry lives
        self._copies: dict[tuple[int, int], tuple[BaseChatModel, BaseChatModel]] = {}
        self._warned: set[type] = set()

    def model_for(self, model: BaseChatModel, phase: str) -> BaseChatModel:
        """``model`` with ``phase``'s cap, or ``model`` itself when the phase has none."""
        cap = self.caps.get(phase)
        if cap is None:
            return model
        if "max_tokens" not in type(model).model_fields:
            if type(model) not in self._warned:
                self._warned.add(type(model))
                logger.warning("%s: %s has no max_tokens field; its output cap for this call is not applied",
                               phase, type(model).__name__)
            return model
        key = (id(model), cap)
        hit = self._copies.get(key)
        if hit is not None and hit[0] is model:
            return hit[1]
        update: dict[str, Any] = {"max_tokens": cap}
        extra = getattr(model, "extra_body", None)
        if isinstance(extra, dict) and "max_tokens" in extra:
            update["extra_body"] = {**extra, "max_tokens": cap}
        capped = model.model_copy(update=update)
        if len(self._copies) >= _MAX_COPIES:  # many short-lived models through one planner
            self._copies.clear()
        self._copies[key] = (model, capped)
        return capped
