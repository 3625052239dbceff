"""The StrangeLoop's LangGraph state: plain data, so checkpoints need no custom serialisers.

Runtime models (``PlanResult``, ``AgentDecision``, ``StepResult``, the ``PlanManager``) are stored
as their JSON-mode ``model_dump()`` / ``to_dict()`` and rebuilt by the node that needs them. Plain
data round-trips through every checkpointer (memory, SQLite, PostgreSQL) unchanged and avoids
LangGraph's "unregistered type" warnings for pydantic objects.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = ["LoopGraphState", "RunStatus"]

RunStatus = Literal["running", "done", "failed", "awaiting_approval"]


class LoopGraphState(TypedDict, total=False):
    # the request
    goal: str
    thread_id: str
    max_iterations: int
    intake: str | None  # trivial | simple | complex
    continuation: bool  # prior goals exist on this thread (structural)
    prior_goals: list[str]
    recent_messages: list[str]
    # the loop
    iteration: int
    assessment: dict[str, Any] | None  # StatusAssessment.model_dump(mode="json")
    plan_result: dict[str, Any] | None  # PlanResult.model_dump(mode="json")
    current_decision: dict[str, Any] | None  # AgentDecision.model_dump(mode="json"), the in-flight batch
    plan_manager: dict[str, Any] | None  # PlanManager.to_dict()
    step_results: list[dict[str, Any]]  # every StepResult so far, in completion order
    action_history: list[str]
    working_memory: str
    # approval gate
    sealed_plan: dict[str, Any] | None  # {"sha256": str, "plan": {...}, "rendering": str}
    approval_feedback: str | None
    # the outcome
    status: RunStatus
    final_answer: str | None
    error: str | None
    llm_calls: int
