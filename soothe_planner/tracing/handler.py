"""The Langfuse callback handler as this package uses it: one per run, readable span names.

Two adjustments to ``langfuse.langchain.CallbackHandler``, both about reading a trace:

- a generation is named after the ``soothe_phase`` in its run metadata (``plan-assess``,
  ``step:s1``, ...) instead of the model's class name; models Langfuse does not recognise (local
  servers, test doubles) get their LangChain type as the model name instead of a warning;
- LangChain's structured-output plumbing (parallel maps, fallbacks, lambdas, output parsers) is
  folded into the span of the call that used it: the reader asked one question and sees one span
  with one generation under it. Folding re-parents children to the nearest kept ancestor, so the
  tree stays connected.

``langfuse`` is imported inside ``make_handler`` only: this module is imported by ``tracing.py``,
which must load without langfuse installed.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from soothe_planner.concurrency import PHASE_METADATA_KEY

if TYPE_CHECKING:
    from langfuse import Langfuse

__all__ = ["PHASE_KEY", "make_handler"]

PHASE_KEY = PHASE_METADATA_KEY
"""The run-metadata key naming a call's phase; one definition, in ``concurrency`` (the lowest layer
that reads it), under the name tracing has always exported."""

# One call from the reader's point of view: these inner chains are folded into their parent span.
_PLUMBING = re.compile(r"^(Runnable[A-Za-z]*(<[^>]*>)?|[A-Za-z]*Parser)$")


def make_handler(client: Langfuse, trace_id: str) -> BaseCallbackHandler:
    from langfuse.langchain import CallbackHandler

    class PhaseNamedHandler(CallbackHandler):
        """Names each generation after its ``soothe_phase``; folds plumbing chains into their parent."""

        def __init__(self, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self._folded: dict[UUID, UUID] = {}  # folded run -> the nearest ancestor that has a span

        def _kept(self, parent_run_id: UUID | None) -> UUID | None:
            while parent_run_id is not None and parent_run_id in self._folded:
                parent_run_id = self._folded[parent_run_id]
            return parent_run_id

        def on_chain_start(
            self,
            serialized: Any,
            inputs: Any,
            *,
            run_id: UUID,
            parent_run_id: UUID | None = None,
            **kwargs: Any,
        ) -> Any:
            if parent_run_id is not None and _PLUMBING.match(
                self.get_langchain_run_name(serialized, **kwargs)
            ):
                self._folded[run_id] = self._kept(parent_run_id)  # type: ignore[assignment]
                return None
            return super().on_chain_start(
                serialized, inputs, run_id=run_id, parent_run_id=self._kept(parent_run_id), **kwargs
            )

        def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> Any:
            if self._folded.pop(run_id, None) is not None:
                return None
            return super().on_chain_end(outputs, run_id=run_id, **kwargs)

        def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> Any:
            if self._folded.pop(run_id, None) is not None:
                return None
            return super().on_chain_error(error, run_id=run_id, **kwargs)

        def on_chat_model_start(
            self,
            serialized: Any,
            messages: Any,
            *,
            run_id: UUID,
            parent_run_id: UUID | None = None,
            **kwargs: Any,
        ) -> Any:
            return super().on_chat_model_start(
                serialized,
                messages,
                run_id=run_id,
                parent_run_id=self._kept(parent_run_id),
                **_phase_named(kwargs),
            )

        def on_llm_start(
            self,
            serialized: Any,
            prompts: Any,
            *,
            run_id: UUID,
            parent_run_id: UUID | None = None,
            **kwargs: Any,
        ) -> Any:
            return super().on_llm_start(
                serialized,
                prompts,
                run_id=run_id,
                parent_run_id=self._kept(parent_run_id),
                **_phase_named(kwargs),
            )

        def on_tool_start(
            self,
            serialized: Any,
            input_str: str,
            *,
            run_id: UUID,
            parent_run_id: UUID | None = None,
            **kwargs: Any,
        ) -> Any:
            return super().on_tool_start(
                serialized, input_str, run_id=run_id, parent_run_id=self._kept(parent_run_id), **kwargs
            )

        def on_retriever_start(
            self,
            serialized: Any,
            query: str,
            *,
            run_id: UUID,
            parent_run_id: UUID | None = None,
            **kwargs: Any,
        ) -> Any:
            return super().on_retriever_start(
                serialized, query, run_id=run_id, parent_run_id=self._kept(parent_run_id), **kwargs
            )

    public_key = client._resources.public_key if client._resources is not None else None
    return PhaseNamedHandler(public_key=public_key, trace_context={"trace_id": trace_id})


def _phase_named(kwargs: dict[str, Any]) -> dict[str, Any]:
    metadata = dict(kwargs.get("metadata") or {})
    out = dict(kwargs)
    phase = metadata.get(PHASE_KEY)
    if isinstance(phase, str) and phase:
        out["name"] = phase
    if not metadata.get("ls_model_name"):
        # Models outside Langfuse's list of known classes (local servers, test doubles) would be
        # recorded without a model and warned about; their LangChain type is a fair model name.
        llm_type = (kwargs.get("invocation_params") or {}).get("_type")
        if isinstance(llm_type, str) and llm_type:
            metadata["ls_model_name"] = llm_type
            out["metadata"] = metadata
    return out
