"""How does a node read the StrangeLoop's state? Once, into one typed view.

The checkpointed state is plain data (``state.py`` says why). A node decodes it on entry into a
``LoopView``: the assessment, the last plan result and the decision in flight as their pydantic
models, and the goal-wide ``PlanManager`` rebuilt from its dict. The node then reads only the
view and writes plain data back; no part of a node validates a piece of state again.

What was weighed:

- **Eager or lazy.** The small models are decoded eagerly (a few fields each). The manager is
  decoded lazily and at most once per view (``cached_property``): intake, the trivial answer and
  the iteration cap never need it, and rebuilding a large DAG is the one decode that costs.
- **Where step results come from.** A step's result lives on its DAG node, nowhere else in the
  state; ``results`` is ``PlanManager.step_results()`` — the latest result of each step, in the
  order they were recorded — and ``loop_state`` hands the same list to the planner. The state once
  also kept every attempt in a list of its own: two homes that every node had to reconcile with
  ``latest_results``.
- **The decision in flight stays raw where it is sealed.** The approval seal is a hash of the
  decision exactly as it was stored, so the approve and execute nodes hash ``state`` itself
  rather than a re-encoding of the decoded model.
- **A frozen dataclass, not a pydantic model.** The view is built from already-valid parts and
  lives for one node call; it carries a live manager that the node may change and then write back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from soothe_planner.dag import PlanManager
from soothe_planner.models import (
    AgentDecision,
    IntakeRoute,
    LoopState,
    PlanResult,
    StatusAssessment,
    StepResult,
)

__all__ = ["LoopView"]


@dataclass(frozen=True)
class LoopView:
    """One node's typed reading of ``LoopGraphState`` (see the module docstring)."""

    state: Mapping[str, Any] = field(repr=False)
    goal: str
    thread_id: str | None
    iteration: int
    max_iterations: int
    intake: IntakeRoute | None
    continuation: bool
    prior_goals: list[str]
    recent_messages: list[str]
    working_memory: str
    action_history: list[str]
    assessment: StatusAssessment | None
    plan_result: PlanResult | None
    current_decision: AgentDecision | None
    llm_calls: int
    _new_manager: Callable[[str], PlanManager] = field(repr=False)

    @classmethod
    def decode(
        cls,
        state: Mapping[str, Any],
        *,
        new_manager: Callable[[str], PlanManager],
        max_iterations: int,
    ) -> LoopView:
        """The view of ``state``; ``new_manager(goal)`` makes the manager when the state holds none yet."""
        assessment = state.get("assessment")
        plan_result = state.get("plan_result")
        decision = state.get("current_decision")
        return cls(
            state=state,
            goal=state["goal"],
            thread_id=state.get("thread_id"),
            iteration=state.get("iteration", 0),
            max_iterations=state.get("max_iterations") or max_iterations,
            intake=state.get("intake"),
            continuation=bool(state.get("continuation")),
            prior_goals=list(state.get("prior_goals") or []),
            recent_messages=list(state.get("recent_messages") or []),
            working_memory=state.get("working_memory") or "",
            action_history=list(state.get("action_history") or []),
            assessment=StatusAssessment.model_validate(assessment) if assessment else None,
            plan_result=PlanResult.model_validate(plan_result) if plan_result else None,
            current_decision=AgentDecision.model_validate(decision) if decision else None,
            llm_calls=state.get("llm_calls") or 0,
            _new_manager=new_manager,
        )

    @cached_property
    def manager(self) -> PlanManager:
        """The goal-wide DAG, rebuilt once; a node that changes it writes ``manager.to_dict()`` back."""
        data = self.state.get("plan_manager")
        return PlanManager.from_dict(data) if data else self._new_manager(self.goal)

    @cached_property
    def results(self) -> list[StepResult]:
        """The latest result of every step, in the order they were recorded (read from the DAG)."""
        return self.manager.step_results()

    def loop_state(self, previous: StatusAssessment | None) -> LoopState:
        """What the planner reads about the run, with ``previous`` as the last assessment."""
        return LoopState(
            goal=self.goal,
            thread_id=self.thread_id or "default",
            iteration=self.iteration,
            max_iterations=self.max_iterations,
            current_decision=self.current_decision,
            step_results=self.results,
            previous_assessment=previous,
            action_history=self.action_history,
            working_memory=self.working_memory,
            intake=self.intake,
            continuation=self.continuation,
            prior_goals=self.prior_goals,
            recent_messages=self.recent_messages,
        )
