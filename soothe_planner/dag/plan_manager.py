"""How does one goal's plan grow across loop iterations without losing finished work?

One ``PlanManager`` per goal holds a goal-wide ``PlanDAG`` and the history of what each decision
did to it. What was weighed:

- **Ids are goal-scoped and stable.** Ids of one decision are kept as given, so the model's own
  references keep working. A step id that names a node which can no longer change (in progress
  or finished, superseded ones included) gets a fresh id ``<id>.<n>`` matching the wire id pattern, and
  references inside the same decision follow the rename: re-listing finished work means "do it
  again", never "rewrite what happened". A step id naming a pending node refreshes that node.
- **Validate whole, then mutate.** Every ingest is checked first (``dag.validate_steps``); on any
  error the manager is unchanged. The same holds for a batch of step outcomes.
- **Typed tool steps are checked against what is offered**: ``capabilities`` (plain data, no
  LangChain) give the tools' argument schemas and descriptions, and by default the allow-list. A
  renamed id is followed by references in args (``{{s1.output}}``) as by ``depends_on``.
- **Nothing disappears silently.** ``replace=True`` (after a ``replan``) supersedes pending nodes
  the decision does not list: they stay in the graph as ``skipped`` with a ``superseded`` result
  (deleting them would leave dangling edges from finished steps and free their ids for other
  work) and are listed in the history. A failed step's dependents are skipped with a recorded
  ``blocked`` result.
- **Failure policy is one rule for every path:** ``block``, or ``retry(n)`` then block.
- **A step's result has one home: its node.** ``step_results()`` reads them back in the order they
  were recorded (the order the loop's prompts and final summary show them in); the manager keeps
  only that order of ids beside the nodes, never a second copy of a result. A ``superseded``
  marker is not a result of running anything and is left out.
- **State is plain data.** ``to_dict()`` is JSON-mode, so it rides in LangGraph checkpoints.

How one decision is worked out before it is applied (renames, repeats, supersession, the checks)
is in ``ingest.py``; this module holds the manager's state and applies what was worked out.
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Collection, Mapping, Sequence
from itertools import islice
from typing import Any, Literal

import soothe_planner.dag.render as _plan_render
from soothe_planner.dag.ingest import IngestReport, PlanRevision, Prepared, call_key, prepare
from soothe_planner.dag.plan_dag import PlanDAG, ReadyFeed
from soothe_planner.deliverable import Deliverable
from soothe_planner.errors import ConfigError, PlanValidationError
from soothe_planner.models import (
    FINISHED_STATUSES,
    AgentDecision,
    Capability,
    ExecutionMode,
    FailurePolicy,
    Plan,
    PlanResult,
    PlanStep,
    StepResult,
    clean_text,
    execution_mode_of,
)

__all__ = ["IngestReport", "PlanManager", "PlanRevision", "call_key"]

_FORMAT = 1


def _superseded(node: PlanStep) -> bool:
    return node.result is not None and node.result.error_type == "superseded"


class PlanManager:
    """The goal-wide step DAG across iterations: ingest decisions, hand out ready steps, record outcomes."""

    def __init__(
        self,
        goal: str,
        *,
        failure_policy: str | FailurePolicy = "block",
        max_plan_steps: int = 8,
        allowed_capabilities: Collection[str] | None = None,
        capabilities: Sequence[Capability] | None = None,
    ) -> None:
        try:
            self.failure_policy = FailurePolicy.parse(failure_policy)
        except ValueError as exc:
            raise ConfigError(f"{exc} (use 'block' or e.g. 'retry(2)')") from None
        if max_plan_steps < 1:
            raise ConfigError(f"max_plan_steps must be >= 1, got {max_plan_steps}")
        self.goal = clean_text(goal)  # hashed into journal keys: must encode as UTF-8
        self.max_plan_steps = max_plan_steps
        self.capabilities: dict[str, Capability] = {c.name: c for c in capabilities or ()}
        if allowed_capabilities is None and self.capabilities:
            allowed_capabilities = self.capabilities
        self.allowed_capabilities = None if allowed_capabilities is None else frozenset(allowed_capabilities)
        self.history: list[PlanRevision] = []
        self.deliverable: Deliverable | None = None  # what the goal must hand back (soothe_planner.deliverable)
        self.dag = PlanDAG()
        self._counters: dict[str, int] = {}  # rename base -> next suffix to try
        self._mode: ExecutionMode = "dependency"
        self._reasoning = ""
        self.plan_id = uuid.uuid4().hex[:12]  # stable across to_plan() calls and revisions
        self._revision_base = 0  # a plan loaded with from_plan() keeps counting its revisions
        # Step ids in the order their latest results were recorded (the results live on the nodes).
        self._recorded: dict[str, None] = {}

    # ------------------------------------------------------------------ reading

    @property
    def nodes(self) -> list[PlanStep]:
        return list(self.dag.nodes.values())

    def node(self, step_id: str) -> PlanStep:
        """The live node (read it; change it only through this manager). Unknown id: ``KeyError``."""
        return self.dag.node(step_id)

    def __len__(self) -> int:
        return len(self.dag)

    def __contains__(self, step_id: object) -> bool:
        return step_id in self.dag

    def results(self) -> dict[str, StepResult]:
        """Results of finished steps (a step waiting for a retry is not finished)."""
        return {n.id: n.result for n in self.dag.nodes.values() if n.finished and n.result is not None}

    def step_results(self) -> list[StepResult]:
        """The latest result of every step that ran or was blocked, in the order they were recorded.

        A step waiting for a retry shows its failed attempt; ``superseded`` markers are left out.
        """
        nodes = self.dag.nodes
        out = []
        for sid in self._recorded:
            r = nodes[sid].result
            if r is not None and r.error_type != "superseded":
                out.append(r)
        return out

    def has_unfinished(self) -> bool:
        return self.dag.unfinished_count > 0

    def progress(self) -> float:
        """The share of the goal's steps that completed; superseded steps count as neither done nor to do."""
        live = [n for n in self.dag.nodes.values() if not _superseded(n)]
        return sum(n.status == "completed" for n in live) / len(live) if live else 0.0

    @property
    def execution_mode(self) -> ExecutionMode:
        return self._mode

    # ------------------------------------------------------------------ ingest

    def _prepare(
        self, decision: AgentDecision, replace: bool, capabilities: Mapping[str, Capability] | None = None
    ) -> Prepared:
        return prepare(
            decision, replace, self.dag.nodes, self._counters,
            max_steps=self.max_plan_steps, allowed=self.allowed_capabilities, known=self.capabilities,
            capabilities=capabilities if capabilities is not None else (self.capabilities or None),
        )

    @staticmethod
    def _decision_of(decision: AgentDecision | PlanResult) -> AgentDecision | None:
        if isinstance(decision, PlanResult):
            return decision.decision  # ``keep`` carries none: the in-flight plan stands
        return decision

    def validate(
        self,
        decision: AgentDecision | PlanResult,
        *,
        replace: bool = False,
        capabilities: Sequence[Capability] | None = None,
    ) -> list[str]:
        """What ``ingest`` would reject, without changing anything; ``capabilities`` replace the
        manager's own for the typed-step checks (a planner validates with what it offered)."""
        d = self._decision_of(decision)
        caps = None if capabilities is None else {c.name: c for c in capabilities}
        return [] if d is None or not d.steps else self._prepare(d, replace, caps).errors

    def ingest(
        self, decision: AgentDecision | PlanResult, iteration: int = 0, *, replace: bool = False
    ) -> IngestReport:
        """Merge a decision into the DAG. Raises ``PlanValidationError`` and changes nothing when invalid."""
        d = self._decision_of(decision)
        if d is None or not d.steps:
            return IngestReport()
        prep = self._prepare(d, replace)
        if prep.errors:
            raise PlanValidationError(prep.errors)
        nodes = self.dag.nodes
        new = [s for s in prep.steps if s.id not in nodes]
        refresh = [s for s in prep.steps if s.id in nodes]
        self.dag.add(new, iteration=iteration, validate=False)
        # Refresh before superseding: a re-listed step may drop its edge to a node being superseded.
        for step in refresh:
            self.dag.refresh(step)
        reason = f"superseded: the plan was replaced at iteration {iteration}"
        gone = self.dag.supersede(prep.superseded, reason) if prep.superseded else []
        self._counters = prep.counters
        self._mode, self._reasoning = d.execution_mode, d.reasoning
        report = IngestReport(
            added=[s.id for s in new],
            refreshed=[s.id for s in refresh],
            renamed=dict(prep.renamed),
            superseded=gone,
            reused=dict(prep.reused),
        )
        self.history.append(
            PlanRevision(
                **report.model_dump(),
                iteration=iteration,
                action="replace" if replace else "extend",
                reasoning=d.reasoning,
            )
        )
        return report

    # ------------------------------------------------------------------ running

    def ready_steps(self, limit: int | None = None) -> list[PlanStep]:
        """Pending steps whose dependencies all completed, in the order they became ready (0/None: all)."""
        return self.dag.ready(limit)

    def is_ready(self, step_id: str) -> bool:
        return self.dag.is_ready(step_id)

    def watch_ready(self) -> ReadyFeed:
        """The ids entering the ready set from now on, primed with the current ones (see ``ReadyFeed``)."""
        return self.dag.watch_ready()

    def mark_started(self, step_id: str) -> None:
        self.dag.mark_in_progress(step_id)

    def requeue_interrupted(self) -> list[str]:
        """After a resume: steps left in_progress by a dead run go back to pending (they never reported)."""
        return self.dag.requeue_in_progress()

    def record_step_outcomes(self, results: Sequence[StepResult]) -> list[StepResult]:
        """Record results in order; returns the ``blocked`` results recorded for skipped dependents.

        The whole batch is checked first: a result for an unknown step, a second different result for
        a finished step, two different results for one step, or a result for a step whose
        dependencies had not completed is a ``PlanValidationError`` and nothing is recorded.
        Identical repeats are ignored (a replayed batch is harmless).
        """
        dag = self.dag
        nodes = dag.nodes
        errors: list[str] = []
        batch: dict[str, StepResult] = {}
        completes: set[str] = set()
        todo: list[StepResult] = []
        for r in results:
            sid = r.step_id
            node = nodes.get(sid)
            if node is None:
                errors.append(
                    f"result for unknown step '{sid}' (plan steps: {', '.join(islice(nodes, 8)) or 'none'}"
                    f"{', …' if len(nodes) > 8 else ''}; results must name a step of this plan)"
                )
                continue
            if sid in batch:
                if batch[sid] != r:
                    errors.append(
                        f"two different results for step '{sid}' in one batch (record one outcome per step)"
                    )
                continue
            batch[sid] = r
            if node.status in FINISHED_STATUSES:
                if node.result != r:
                    errors.append(
                        f"step '{sid}' is already {node.status}; a different result for it was rejected "
                        "(no double completion: plan a new step to redo the work)"
                    )
                continue
            if dag.waiting_count(sid):  # zero, the common case, means every dependency completed
                waiting = [
                    d for d in node.depends_on if nodes[d].status != "completed" and d not in completes
                ]
                if waiting:
                    errors.append(
                        f"result for step '{sid}' arrived before its dependencies completed: "
                        f"{', '.join(waiting)} (run steps from ready_steps())"
                    )
                    continue
            if r.success:
                completes.add(sid)
            todo.append(r)
        if errors:
            raise PlanValidationError(errors, what="step outcomes")
        synthetic: list[StepResult] = []
        policy = self.failure_policy
        recorded = self._recorded
        for r in todo:
            if r.success:  # checked above: pending or in progress, every dependency completed
                dag._complete_runnable(nodes[r.step_id], r)
            elif policy.mode == "retry" and nodes[r.step_id].attempts + 1 <= policy.max_retries:
                dag.retry(r.step_id, r)
            else:
                for sid in dag.fail(r.step_id, r):
                    blocked = nodes[sid].result
                    assert blocked is not None
                    synthetic.append(blocked)
        # The batch's own results first, then the blocked ones it caused: the order a caller who
        # appended ``results`` and then the returned list would have.
        for r in (*todo, *synthetic):
            recorded.pop(r.step_id, None)
            recorded[r.step_id] = None
        return synthetic

    # ------------------------------------------------------------------ views

    def in_flight_decision(self) -> AgentDecision | None:
        """The unfinished steps (pending or in progress) as a decision, or None when nothing is left."""
        steps = [n.to_action() for n in self.dag.nodes.values() if not n.finished]
        if not steps:
            return None
        return AgentDecision(steps=steps, execution_mode=self._mode, reasoning=self._reasoning)

    def to_plan(self) -> Plan:
        """The DAG as a ``Plan`` (copies, dependencies first): active while work is left, else completed
        when every step completed or was superseded, else failed."""
        nodes = [self.dag.nodes[sid].model_copy(deep=True) for sid in self.dag.topological_order()]
        if not nodes or any(not n.finished for n in nodes):
            status: Literal["active", "completed", "failed"] = "active"
        elif all(n.status == "completed" or _superseded(n) for n in nodes):
            status = "completed"
        else:
            status = "failed"
        return Plan(
            id=self.plan_id,
            goal=self.goal,
            steps=nodes,
            status=status,
            reasoning=self._reasoning,
            revision=self._revision_base + len(self.history),
        )

    def dag_prompt(self, max_chars: int | None = None) -> str:
        """The DAG for a prompt: ``s2 [completed] Read the config <- s1`` plus a result excerpt per finished step.

        Over ``max_chars`` the longest excerpts are cut first; the ids and statuses of unfinished steps
        are never dropped (the full order of giving way is in ``dag/render.py``).
        """
        return _plan_render.dag_prompt([self.dag.nodes[sid] for sid in self.dag.layered_order()], max_chars)

    def planning_context(self, max_chars: int | None = None) -> str:
        """Deprecated name of ``dag_prompt`` (``planning_context`` also named the ``PlanContext``)."""
        warnings.warn(
            "PlanManager.planning_context() is deprecated; call PlanManager.dag_prompt()",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.dag_prompt(max_chars)

    def to_mermaid(self) -> str:
        """A ``flowchart TD`` of the DAG with escaped labels and one style class per status."""
        return _plan_render.mermaid(list(self.dag.nodes.values()))

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-mode data; ``from_dict`` rebuilds an identical manager."""
        return {
            "format": _FORMAT,
            "goal": self.goal,
            "plan_id": self.plan_id,
            "revision_base": self._revision_base,
            "failure_policy": str(self.failure_policy),
            "max_plan_steps": self.max_plan_steps,
            "allowed_capabilities": None
            if self.allowed_capabilities is None
            else sorted(self.allowed_capabilities),
            "capabilities": [c.model_dump(mode="json") for c in self.capabilities.values()],
            "dag": self.dag.to_dict(),
            "history": [h.model_dump(mode="json") for h in self.history],
            "rename_counters": dict(self._counters),
            "execution_mode": self._mode,
            "reasoning": self._reasoning,
            "recorded": list(self._recorded),
            "deliverable": self.deliverable.model_dump(mode="json") if self.deliverable is not None else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PlanManager:
        if data.get("format") != _FORMAT:
            raise PlanValidationError(
                [
                    f"stored plan manager has format {data.get('format')!r}, this version reads format {_FORMAT}"
                ],
                what="stored plan",
            )
        pm = cls(
            data["goal"],
            failure_policy=data["failure_policy"],
            max_plan_steps=data["max_plan_steps"],
            allowed_capabilities=data["allowed_capabilities"],
            # absent from managers stored before typed tool steps: they had no schemas to keep
            capabilities=[Capability.model_validate(c) for c in data.get("capabilities") or ()],
        )
        pm.dag = PlanDAG.from_dict(data["dag"])
        pm.history = [PlanRevision.model_validate(h) for h in data["history"]]
        pm._counters = {str(k): int(v) for k, v in data["rename_counters"].items()}
        pm._mode = execution_mode_of(data["execution_mode"])
        pm._reasoning = data["reasoning"]
        pm.plan_id, pm._revision_base = data["plan_id"], int(data["revision_base"])
        recorded = data.get("recorded")
        pm._recorded = dict.fromkeys(recorded) if recorded is not None else pm._recorded_from_nodes()
        stored = data.get("deliverable")  # absent from managers stored before deliverables
        pm.deliverable = Deliverable.model_validate(stored) if stored else None
        return pm

    def _recorded_from_nodes(self) -> dict[str, None]:
        # A manager saved before the record order was kept, or built from a Plan: plan order is the
        # best order known.
        return {n.id: None for n in self.dag.nodes.values() if n.result is not None and not _superseded(n)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> PlanManager:
        return cls.from_dict(json.loads(text))

    @classmethod
    def from_plan(cls, plan: Plan, **kwargs: Any) -> PlanManager:
        """A manager holding ``plan``'s steps as they are (statuses and results kept)."""
        pm = cls(plan.goal, **kwargs)
        pm.dag.add(plan.steps)
        pm.plan_id, pm._revision_base, pm._reasoning = plan.id, plan.revision, plan.reasoning
        pm._recorded = pm._recorded_from_nodes()
        return pm
