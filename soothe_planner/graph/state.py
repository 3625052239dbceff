"""The StrangeLoop's LangGraph state: plain data, so checkpoints need no custom serialisers.

Runtime models (``PlanResult``, ``AgentDecision``, the ``PlanManager``) are stored as their
JSON-mode ``model_dump()`` / ``to_dict()``; each node decodes them once, into one ``LoopView``
(``view.py``). Plain data round-trips through every checkpointer (memory, SQLite, PostgreSQL)
unchanged and avoids LangGraph's "unregistered type" warnings for pydantic objects.

Each fact has one key. A step's result lives on its node inside ``plan_manager`` (read them with
``PlanManager.from_dict(state["plan_manager"]).step_results()``), not in a list of its own.

What a client sees (a LangGraph server publishes these as JSON schemas):

- ``LoopInput``: a goal (``goal_input`` builds one) or a chat turn (``{"messages": [...]}``: the
  last human message is the goal). The loop's own bookkeeping is not input: the intake node starts
  every run from a clean slate, so a thread takes one goal after another.
- ``LoopGraphState``: the output, the request plus the outcome; ``messages`` ends with the final
  answer as an AI message, so chat clients and a ``MessagesState`` parent graph read it there.
- ``RunContext``: what may change per run without rebuilding anything by hand — the model string,
  the approval gate, the iteration cap and the step cap (LangGraph's runtime ``context``; a server
  also mirrors it into ``configurable``).

The TypedDicts come from ``typing_extensions``: before Python 3.12, pydantic (and so a LangGraph
server) cannot build a JSON schema from a ``typing.TypedDict``, and clients would see ``null``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

__all__ = ["LoopGraphState", "LoopInput", "RunContext", "RunStatus", "StrangeLoopState"]

RunStatus = Literal["running", "done", "failed", "awaiting_approval"]


class RunContext(TypedDict, total=False):
    """Per-run choices (LangGraph's ``context=``, or ``configurable`` on a server); each key is optional."""

    model: str
    """A model string ('openai:gpt-4o-mini', 'scripted:PATH', ...); the server's factory builds the run on it."""
    approval: bool
    """Pause for a human's approval of each validated plan."""
    max_iterations: int
    """The iteration cap of this run (the input's ``max_iterations`` wins when both are given)."""
    max_plan_steps: int
    """The goal DAG's step cap."""


class LoopInput(TypedDict, total=False):
    """What a run takes: a ``goal`` or chat ``messages`` (see the module docstring)."""

    goal: str
    messages: Annotated[list[AnyMessage], add_messages]
    thread_id: str
    max_iterations: int
    intake: str | None  # trivial | simple | complex: a given route skips the routing call
    prior_goals: list[str]
    recent_messages: list[str]
    deliverable: dict[str, Any] | None  # Deliverable.model_dump(): what the goal must hand back, if the caller knows


class LoopGraphState(TypedDict, total=False):
    # the request
    goal: str
    messages: Annotated[list[AnyMessage], add_messages]
    thread_id: str
    max_iterations: int
    intake: str | None  # trivial | simple | complex
    continuation: bool  # prior goals exist on this thread (structural)
    prior_goals: list[str]
    recent_messages: list[str]
    deliverable: dict[str, Any] | None  # the caller's Deliverable; the goal's own is on plan_manager
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
    seen_message_id: str | None  # the last human message a run has taken up (a newer one is a new goal)
    served_goal: str | None  # the goal the last run worked on (an input goal that differs is a new one)
