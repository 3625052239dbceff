"""What does the planner know of a run's steps and their results? One view, read once per call.

The path from the executor to the next prompt, in one sentence: the executor records a step's
result on its node of the goal's ``PlanManager`` (``record_step_outcomes``), the execute node
writes that manager back into the checkpoint, the next planner node decodes it once
(``graph/view.py``) and hands it to the planner with its ``step_results()`` as
``LoopState.step_results``, and each planner call reads the two once into a ``RunSteps``, the only
place its prompts, checks and progress readings take steps and results from (built from the
``LoopState`` alone when a caller outside the graph passes no manager).

What was weighed:

- **One source, chosen once.** With a manager, the steps are its nodes and the results are
  ``PlanManager.step_results()`` (a result lives on its node: ``dag/plan_manager.py``); without
  one (a caller outside the graph, which has only the protocol's input), the steps are those of
  ``LoopState.current_decision`` and the results are ``LoopState.step_results`` reduced to each
  step's latest attempt (``dag.latest_results``). Each reader used to make that choice itself,
  "the manager or the state", and nothing kept two readers' choices the same.
- **Built per call, not kept.** The planner is stateless between calls; the view lives for one
  ``plan``, ``assess_status`` or ``generate_from_assessment`` and is built at its start. Nothing
  in a call changes a step or a result (only the manager's deliverable, which the view does not
  hold), so reading once is reading the same thing everywhere.
- **The manager stays reachable.** Some readings belong to the DAG alone — its topological order,
  the statuses of superseded nodes, what is still in flight — and a reader that needs them asks
  ``manager``; it no longer falls back to the state when there is none, the view has done that.
- **A frozen dataclass**, like ``graph/view.py``'s ``LoopView``: built from already-valid parts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from soothe_planner.dag import PlanManager, latest_results
from soothe_planner.deliverable import Deliverable
from soothe_planner.models import AgentDecision, LoopState, PlanStep, StepAction, StepResult, StepStatus

__all__ = ["RunSteps", "deliverable_of"]


@dataclass(frozen=True)
class RunSteps:
    """The run's steps and the latest result of each, from one source (see the module docstring).

    ``decision`` is the decision in flight when the last plan was made (``LoopState.current_decision``);
    ``steps`` are the manager's nodes, else that decision's steps; ``results`` are the latest result
    of every step, in the order they were recorded; ``manager`` is the goal's DAG when there is one.
    """

    decision: AgentDecision | None
    steps: Sequence[PlanStep | StepAction]
    results: list[StepResult]
    manager: PlanManager | None = None

    @classmethod
    def of(cls, state: LoopState, manager: PlanManager | None) -> RunSteps:
        """The view of a run: ``manager``'s when there is one, else ``state``'s."""
        decision = state.current_decision
        if manager is not None:
            return cls(decision=decision, steps=manager.nodes, results=manager.step_results(), manager=manager)
        steps = decision.steps if decision is not None else []
        return cls(decision=decision, steps=steps, results=latest_results(state.step_results))

    def result_of(self) -> dict[str, StepResult]:
        """The latest result of each step, by its id."""
        return {r.step_id: r for r in self.results}

    def plan_nodes(self, *, ordered: bool) -> list[PlanStep] | None:
        """The plan as DAG nodes, each with its status and result: the manager's (dependencies first,
        breadth-first, when ``ordered``: ``PlanDAG.layered_order``, the order prompts show), else the
        decision's steps with the status their latest result left them in; None when neither holds a plan."""
        m = self.manager
        if m is not None and m.nodes:
            return [m.node(sid) for sid in m.dag.layered_order()] if ordered else m.nodes
        if self.decision is None:
            return None
        results = self.result_of()
        return [
            PlanStep(id=s.id, description=s.description, execution_hint=s.execution_hint, depends_on=list(s.depends_on),
                     tools=list(s.tools), subagent=s.subagent, expected_output=s.expected_output, tool=s.tool,
                     args=dict(s.args), status=_status_of(s.id, results), result=results.get(s.id))
            for s in self.decision.steps
        ]


def _status_of(step_id: str, results: dict[str, StepResult]) -> StepStatus:
    r = results.get(step_id)
    if r is None:
        return "pending"
    if r.success:
        return "completed"
    return "skipped" if r.error_type == "blocked" else "failed"


def deliverable_of(state: LoopState, pm: PlanManager | None) -> Deliverable | None:
    """The goal's deliverable: the plan manager's, else the state's (None while unknown). Not part of
    ``RunSteps``: it is no step result, and it changes in the middle of a call when one is declared."""
    if pm is not None and pm.deliverable is not None:
        return pm.deliverable
    return state.deliverable
