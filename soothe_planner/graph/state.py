"""The StrangeLoop's LangGraph state: plain data, so checkpoints need no custom serialisers.

Runtime models (``PlanResult``, ``AgentDecision``, the ``PlanManager``) are stored as their
JSON-mode ``model_dump()`` / ``to_dict()``; each node decodes them once, into one ``LoopView``
(``view.py``). Plain data round-trips through every checkpointer (memory, SQLite, PostgreSQL)
unchanged and avoids LangGraph's "unregistered type" warnings for pydantic objects.

Each fact has one key. A step's result lives on its node inside ``plan_manager`` (read them with
``PlanManager.from_dict(state["plan_manager"]).step_results()``), not in a list of its own.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = ["LoopGraphState", "RunStatus", "StrangeLoopState"]

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
    plan_manager: dict[str, Any] | None  # PlanManager.to_dict(): the goal's DAG, each step's result on its node
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


class StrangeLoopState(LoopGraphState, total=False):
    """``LoopGraphState`` plus what the compiled loop itself needs (still plain data)."""

    run_id: str | None  # scopes the step journal to one goal run on a thread
    pre_approval_plan_manager: dict[str, Any] | None  # the DAG before the decision awaiting approval
