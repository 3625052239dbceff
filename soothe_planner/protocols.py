"""What a planner is, independent of how one is built.

Two lifecycles, two protocols. ``PlannerProtocol`` turns a goal into a whole ``Plan`` and revises
it after reflection. ``LoopPlannerProtocol`` is the Plan phase of the StrangeLoop: each iteration
it first asks the cheap question — is the goal done? — and pays for plan generation only when it
is not. This module imports the data model only, never an implementation, so that alternative
planners (and test doubles) can be written against it.

``LoopPlannerProtocol`` holds everything the StrangeLoop graph calls, so the graph runs on any
implementation (``tests/test_graph_protocol.py`` runs it on one with no model at all):

- ``route_intake`` and ``answer``: the cheap routing before any planning, and a plain answer
  (a trivial request, or the final synthesis from the evidence).
- ``assess_status`` takes the goal-wide ``PlanManager``, as phase 2 does. Weighed: the graph could
  stop passing it and let phase 1 read the plan from ``LoopState`` alone. It keeps passing it,
  because the manager is the only record of the whole DAG: which steps failed for good (not
  blocked, not waiting for a retry), what is still pending from earlier decisions, and whether a
  plan exists at all. Phase 1 decides "replan without asking" and "nothing to assess yet" from
  exactly those facts; from ``LoopState.current_decision`` it would see only the last batch.

``isinstance(x, LoopPlannerProtocol)`` checks method names only (that is all ``runtime_checkable``
does). ``protocol_mismatches`` also checks that each method is a coroutine function that can be
called every way the protocol allows (positionally, by keyword, optional arguments left out);
``build_strange_loop`` refuses a planner that fails it, before anything runs.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from soothe_planner.models import (
    ContinuationAssessment,
    IntakeRoute,
    LoopState,
    Plan,
    PlanContext,
    PlanResult,
    Reflection,
    StatusAssessment,
    StepResult,
)

if TYPE_CHECKING:  # the manager is an optional collaborator, not part of the contract's imports
    from soothe_planner.dag import PlanManager

__all__ = ["LoopPlannerProtocol", "PlannerProtocol", "protocol_mismatches"]


@runtime_checkable
class PlannerProtocol(Protocol):
    """Goal decomposition: create, reflect on, and revise a whole plan."""

    async def create_plan(self, goal: str, context: PlanContext) -> Plan:
        """Decompose ``goal`` into a validated plan of steps with DAG dependencies."""
        ...

    async def revise_plan(self, plan: Plan, reflection: Reflection, thread_id: str | None = None) -> Plan:
        """A new revision of ``plan``; finished steps keep their ids, dependencies, statuses and results."""
        ...

    async def reflect(
        self, plan: Plan, step_results: list[StepResult], goal_context: str | None = None
    ) -> Reflection:
        """How the plan is going: completed vs failed, failures split into direct and blocked."""
        ...


@runtime_checkable
class LoopPlannerProtocol(Protocol):
    """The StrangeLoop's Plan phase: route, assess, then generate only when work remains; answer."""

    async def route_intake(self, goal: str, context: PlanContext) -> tuple[IntakeRoute, str]:
        """``(route, answer)`` before any planning: a ``trivial`` request comes with its answer, others with ``""``."""
        ...

    async def answer(self, goal: str, context: PlanContext, evidence: str = "") -> str:
        """A plain-text answer to ``goal``, written from ``evidence`` when given (the final synthesis)."""
        ...

    async def assess_status(
        self, goal: str, state: LoopState, context: PlanContext, plan_manager: PlanManager | None = None
    ) -> StatusAssessment:
        """Phase 1: a small structured call — done, continue, or replan — over the goal-wide DAG when given."""
        ...

    async def generate_from_assessment(
        self,
        goal: str,
        state: LoopState,
        context: PlanContext,
        assessment: StatusAssessment,
        plan_manager: PlanManager | None = None,
    ) -> PlanResult:
        """Phase 2: the next decision (``new``), or ``keep`` when the in-flight plan stands."""
        ...

    async def plan(
        self, goal: str, state: LoopState, context: PlanContext, plan_manager: PlanManager | None = None
    ) -> PlanResult:
        """Both phases: phase 2 runs only when phase 1 did not say ``done``."""
        ...

    async def assess_continuation(
        self, goal: str, prior_completed_goals: list[str], context: PlanContext
    ) -> ContinuationAssessment:
        """For a follow-up on a thread: ``bootstrap`` (one step, then done) or ``plan_generate``."""
        ...


def _plain(name: str, sig: inspect.Signature) -> str:
    """``name(a, b, c=None)``: the signature without annotations, as an error message shows it."""
    params = [p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values() if p.name != "self"]
    return f"{name}({', '.join(map(str, params))})"


def _protocol_methods(protocol: type) -> list[str]:
    return sorted(
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and inspect.isfunction(value)
    )


def protocol_mismatches(obj: object, protocol: type) -> list[str]:
    """How ``obj`` fails to implement ``protocol``, one line per method; empty when it conforms.

    A method must exist, be a coroutine function, and bind every call the protocol allows: all
    arguments positionally, all by keyword, and only the required ones. ``*args``/``**kwargs``
    accept anything (a delegating wrapper conforms). A callable whose signature cannot be read
    (some C-implemented callables) is given the benefit of the doubt.
    """
    problems: list[str] = []
    owner = type(obj).__name__
    for name in _protocol_methods(protocol):
        expected = inspect.signature(getattr(protocol, name))
        params = [p for p in expected.parameters.values() if p.name != "self"]
        shown = _plain(name, expected)
        method = getattr(obj, name, None)
        if method is None:
            problems.append(f"{owner} has no method {name!r}; {protocol.__name__} needs async {shown}")
            continue
        if not inspect.iscoroutinefunction(method):
            problems.append(f"{owner}.{name} is not an async function; {protocol.__name__} needs async {shown}")
        try:
            actual = inspect.signature(method)
        except (TypeError, ValueError):
            continue
        required = [p for p in params if p.default is inspect.Parameter.empty]
        sentinel: Any = object()
        calls = {
            "positionally": (tuple(sentinel for _ in params), {}),
            "by keyword": ((), {p.name: sentinel for p in params}),
            "with only its required arguments": (tuple(sentinel for _ in required), {}),
        }
        for how, (args, kwargs) in calls.items():
            try:
                actual.bind(*args, **kwargs)
            except TypeError as exc:
                problems.append(
                    f"{owner}.{_plain(name, actual)} cannot be called {how} as {protocol.__name__} allows "
                    f"({exc}); the protocol's signature is {shown}"
                )
                break
    return problems
