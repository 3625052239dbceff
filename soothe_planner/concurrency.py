"""How many things may run at once, and how many LLM calls a run may make.

``ConcurrencyPolicy`` is the configuration (validated ``>= 0``; ``0`` means unlimited at every
level, never "disabled"). ``ConcurrencyController`` turns it into a tree of slots: goal → step →
subagent, with the LLM-call limiter at the root shared by every LLM call of a run — planner,
executor, subagents. LangGraph's ``max_concurrency`` is not relied on: it is silently ignored in
some placements, so the limits are enforced here.

The LLM-call limiter is usable from async code and from plain threads (a sync ``invoke`` on a
model), because LangChain runs sync model calls in worker threads; one limiter serves both.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ConcurrencyPolicy", "StepParallelism"]

StepParallelism = Literal["sequential", "dependency", "max"]


class ConcurrencyPolicy(BaseModel):
    """Limits at every level of a run. ``0`` means unlimited; negatives are rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_parallel_goals: int = Field(default=1, ge=0, description="Goals worked on at once (0 = unlimited).")
    max_parallel_steps: int = Field(default=3, ge=0, description="Plan steps running at once (0 = unlimited).")
    max_parallel_subagents: int = Field(
        default=2, ge=0, description="Subagent steps running at once (0 = unlimited)."
    )
    global_max_llm_calls: int = Field(
        default=4, ge=0, description="LLM calls in flight at once, across the whole run (0 = unlimited)."
    )
    max_total_llm_calls: int = Field(
        default=0, ge=0, description="Budget: LLM calls a run may make in all (0 = no budget)."
    )
    step_parallelism: StepParallelism = Field(
        default="dependency",
        description="sequential: one step at a time; dependency: as the DAG allows; max: as the DAG allows, "
        "ignoring max_parallel_steps.",
    )
