"""What does a run work on: the input's goal, or the newest human message of a chat?

Every run of the StrangeLoop enters at the intake node, and nothing else does (a resumed run
continues from its checkpoint), so intake is where a run's request is read and the loop's
per-goal bookkeeping starts clean. ``start_run(state)`` returns those writes.

How the goal is chosen, in order:

1. A human message the thread has not seen yet, when the input names no new goal: a chat turn.
   Its text is the goal; the previous goal, if it was done, joins ``prior_goals`` (so the planner
   treats the turn as a follow-up), and the messages before it become ``recent_messages``.
2. The ``goal`` key (``goal_input(...)``, or ``{"goal": ...}`` as JSON).
3. Neither: a ``ValueError`` saying what the input must carry.

"New goal" is judged against ``served_goal`` (what the last run worked on) and "not seen" against
``seen_message_id`` (the newest human message when the last run started), because LangGraph does
not tell a node which keys the input carried: a goal left in the state by the last run and a goal
given again look alike, and both mean the same work.

What was weighed: reading the request in ``goal_input`` only (as before) made every other input
shape — a chat client's ``{"messages": [...]}``, a parent graph's state, a bare ``{"goal": ...}``
on a used thread — either fail or inherit the last run's iteration count and DAG.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

__all__ = ["GOAL_RESETS", "final_message", "last_human", "start_run"]

GOAL_RESETS: dict[str, Any] = {
    "iteration": 0,
    "assessment": None,
    "plan_result": None,
    "current_decision": None,
    "plan_manager": None,
    "action_history": [],
    "working_memory": "",
    "sealed_plan": None,
    "approval_feedback": None,
    "status": "running",
    "final_answer": None,
    "error": None,
    "pre_approval_plan_manager": None,
}
"""Each run starts its loop from these values (copied per use: the lists are fresh each time)."""

PRIOR_GOALS_KEPT = 10
RECENT_MESSAGES_KEPT = 6
RECENT_MESSAGE_CHARS = 500


def _role(message: BaseMessage) -> str:
    return {"human": "user", "ai": "assistant"}.get(message.type, message.type)


def last_human(messages: Sequence[Any]) -> tuple[int, BaseMessage] | None:
    """The index and the newest human message of ``messages``, if any."""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        if isinstance(message, BaseMessage) and message.type == "human":
            return i, message
    return None


def _recent(messages: Sequence[Any], before: int) -> list[str]:
    lines = []
    for message in messages[max(0, before - RECENT_MESSAGES_KEPT) : before]:
        if isinstance(message, BaseMessage) and message.type in ("human", "ai") and message.text.strip():
            text = message.text.strip()
            if len(text) > RECENT_MESSAGE_CHARS:
                text = text[: RECENT_MESSAGE_CHARS - 1] + "…"
            lines.append(f"{_role(message)}: {text}")
    return lines


def start_run(state: Mapping[str, Any], *, thread_id: str | None = None) -> dict[str, Any]:
    """The intake node's first writes: the goal of this run and a clean loop (see the module docstring)."""
    messages = list(state.get("messages") or [])
    found = last_human(messages)
    goal = state.get("goal") or None
    served = state.get("served_goal")
    update: dict[str, Any] = {key: (list(v) if isinstance(v, list) else v) for key, v in GOAL_RESETS.items()}
    if found is not None and found[1].id != state.get("seen_message_id") and (goal is None or goal == served):
        index, human = found
        text = human.text.strip()
        if not text:
            raise ValueError("the newest human message is empty; a chat turn's text is the goal of the run")
        prior = list(state.get("prior_goals") or [])
        if served and state.get("status") == "done":
            prior = [*prior, served][-PRIOR_GOALS_KEPT:]
        goal = text
        update.update({
            "intake": None,  # a new request is routed anew
            "deliverable": None,  # a chat turn names none; the model declares it
            "prior_goals": prior,
            "continuation": bool(prior),
            "recent_messages": _recent(messages, index),
        })
    if not goal:
        raise ValueError(
            "the run has no goal: give 'goal' (goal_input(...)), or 'messages' ending with a human message"
        )
    update["goal"] = goal
    update["served_goal"] = goal
    update["seen_message_id"] = found[1].id if found is not None else state.get("seen_message_id")
    if not state.get("thread_id") and thread_id:
        update["thread_id"] = thread_id
    return update


def final_message(state: Mapping[str, Any]) -> AIMessage:
    """The run's outcome as the AI message a chat client shows: the answer, or why the goal failed."""
    if state.get("status") == "done":
        return AIMessage(str(state.get("final_answer") or "The goal is done."))
    return AIMessage(f"The goal failed: {state.get('error') or 'no reason was recorded'}.")
