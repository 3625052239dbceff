"""LLMPlanner: both planner protocols on any LangChain chat model, honest when the model fails.

Each loop iteration first asks the cheap question — is the goal done? — and pays for plan
generation only when it is not, so a ``done`` at iteration ≥ 1 costs exactly one call. Every call
goes through one robust path (``calls.Caller``: structured output, salvage, one raw call, bounded
re-asks, transport retries) and one concurrency slot. A plan the model writes is validated whole
(ids, dependencies, cycles, the step cap, the capability allow-list) and a broken one is re-asked
like a parse error. When every attempt fails the caller gets a ``PlanGenerationError`` carrying
each attempt — or, with ``on_failure="degraded"``, a result marked ``degraded`` that never counts
as progress and can never be ``done``. Failure is never reported as success. ``degraded`` covers
every phase: an intake with no usable answer routes ``complex`` (the full loop), a continuation
check with none takes ``plan_generate`` — the choices that assume the least.

Decisions recorded here:

- ``keep`` stands only when a plan is in flight. ``keep`` with nothing in flight costs one more
  generation call that asks for steps; the loop never aborts on it.
- At iteration 0 with no evidence there is nothing to assess for a ``simple`` intake or a
  follow-up turn: phase 1 returns ``continue`` without a call. (For a follow-up, the continuation
  discriminator runs in phase 2 instead.) Nor is there with no plan yet while the guard is on: the
  guard turns ``done`` at iteration 0 with no evidence into ``continue``
  (``reject_done_at_iteration_zero``), and ``replan`` of nothing is ``continue``, so the answer is
  known without asking. Otherwise phase 1 runs, guarded, and an override is logged and counted.
  With the guard off, a fresh goal is assessed (the model may judge it done from the goal alone).
- When a step of the last decision failed for good (not blocked by another failure, not waiting for
  a retry), phase 1 answers ``replan`` without a call: the plan the model made cannot finish as
  made, and generation — which sees the failure, its error and the new evidence — has to act on it
  whatever an assessment would say. Progress is carried over, not judged. The price: a goal that a
  failed, redundant step did not stop from being achieved gets one more round before its
  assessment says ``done``. ``replan_on_failure_without_assessment: false`` asks the model instead.
- A follow-up turn whose continuation check says ``bootstrap`` gets a one-step decision with
  ``terminal_after_execute=True``: set in phase 2, where the decision is made, so ``plan()`` and
  the graph's nodes agree; the graph ends the goal after that step succeeds.
- Each protocol call reads the run's steps and their latest results once, into a ``RunSteps``
  (``run_steps.py``: the manager's when one is given, else the state's), and every prompt, check
  and progress reading of the call takes that view: none of them chooses a source again.
- ``revise_plan`` marks the old plan ``revised`` (the caller's object) and returns a new revision
  with the same id: finished steps keep ids, dependencies, statuses and results, because the
  model's answer is merged through a ``PlanManager`` in which finished nodes are immutable.

What every call needs (the settings as resolved for the model, the wrapped models, the caller, the
stats, the prompt check, the degraded policy) is ``base.PlannerBase``; the cheap questions around
planning (intake, continuation, a plain answer) are ``routing.IntakeAndContinuation``; the
whole-plan protocol (create, revise, reflect) is ``whole_plan.WholePlanMethods``; this module holds
the two phases and the deliverable's declaration.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from soothe_planner.dag import PlanManager
from soothe_planner.deliverable import Deliverable
from soothe_planner.errors import PlanGenerationError
from soothe_planner.models import (
    LoopState,
    PlanContext,
    PlanResult,
    PlanStep,
    StatusAssessment,
    StepAction,
    StepResult,
)
from soothe_planner.parsing import parse_object
from soothe_planner.planner.base import PlanManagerFactory
from soothe_planner.planner.calls import Tally
from soothe_planner.planner.contract import narrow_searches, needs_declaration, read_back, to_deliverable
from soothe_planner.planner.generation import (
    Generated,
    by_name,
    calls_reader,
    decision_validator,
    plan_schema,
    readers,
    with_refusals,
    writable,
    writes_in_order,
)
from soothe_planner.planner.guard import assessed_deliverable, guard_assessment
from soothe_planner.planner.plan_syntax import grammar_tools, plan_grammar, with_grammar
from soothe_planner.planner.progress import direct_failures, has_plan, plan_progress, running_decision
from soothe_planner.planner.prompts import phases
from soothe_planner.planner.routing import IntakeAndContinuation
from soothe_planner.planner.run_steps import RunSteps, deliverable_of
from soothe_planner.planner.small_model.crosscheck import (
    crosscheck_prompt,
    delivered,
    disagreements,
    evidence_of,
    wants_crosscheck,
)
from soothe_planner.planner.small_model.grounding import checked_steps, guard_note
from soothe_planner.planner.small_model.plan_rules import write_owed
from soothe_planner.planner.small_model.prescribed import (
    prescribed_count,
    prescribed_reading,
    prescribed_widening,
    prescribed_write,
)
from soothe_planner.planner.small_model.unbound import unbound_calls
from soothe_planner.planner.whole_plan import WholePlanMethods
from soothe_planner.wire import (
    AssessStatus,
    CrossCheck,
    DeclareDeliverable,
    model_step_name,
    to_status_assessment,
)

__all__ = ["LLMPlanner", "PlanManagerFactory"]

logger = logging.getLogger("soothe_planner.planner")


class LLMPlanner(WholePlanMethods, IntakeAndContinuation):
    """Implements ``PlannerProtocol`` and ``LoopPlannerProtocol`` over one ``BaseChatModel``.

    ``assess_model`` (optional, e.g. a cheaper model) answers phase 1, continuation and intake.
    ``controller`` bounds every call; a private one is made when none is given.
    ``stats`` (a ``PlannerStats``) counts outcomes, fallbacks, guards and prompt trims, one named
    counter each. Every async method has a ``_sync`` twin (``plan_sync``, ...; ``sync.py``).
    """

    # ================================================================== LoopPlannerProtocol

    async def plan(
        self, goal: str, state: LoopState, context: PlanContext, plan_manager: PlanManager | None = None
    ) -> PlanResult:
        """Phase 1, then phase 2 only when not done. ``llm_calls`` counts this call's requests."""
        tally = Tally()
        run = RunSteps.of(state, plan_manager)
        assessment = await self._assess(goal, state, context, run, tally)
        if assessment.status == "done":
            return self._done_result(assessment, tally)
        return await self._generate(goal, state, context, assessment, run, tally)

    async def assess_status(
        self, goal: str, state: LoopState, context: PlanContext, plan_manager: PlanManager | None = None
    ) -> StatusAssessment:
        """Phase 1: done, continue or replan (see the module docstring for the guard)."""
        return await self._assess(goal, state, context, RunSteps.of(state, plan_manager), Tally())

    async def generate_from_assessment(
        self,
        goal: str,
        state: LoopState,
        context: PlanContext,
        assessment: StatusAssessment,
        plan_manager: PlanManager | None = None,
    ) -> PlanResult:
        """Phase 2: a ``new`` decision validated against the DAG, or ``keep`` if a plan is in flight."""
        tally = Tally()
        if assessment.status == "done":
            return self._done_result(assessment, tally)
        return await self._generate(goal, state, context, assessment, RunSteps.of(state, plan_manager), tally)

    def grounding_required(self) -> bool:
        """Whether a ``done`` must rest on facts some tool returned (``planner.require_grounded_answer``,
        by default on with the small-model rules)."""
        flag = self.settings.require_grounded_answer
        return self.small_model if flag is None else flag

    def _done_result(self, a: StatusAssessment, tally: Tally) -> PlanResult:
        return PlanResult(
            status="done", plan_action="keep", goal_progress=a.goal_progress, confidence=a.confidence,
            evidence_summary=a.summary, require_goal_completion=a.require_goal_completion, llm_calls=tally.calls,
        )

    async def _assess(
        self, goal: str, state: LoopState, context: PlanContext, run: RunSteps, tally: Tally
    ) -> StatusAssessment:
        fresh = state.iteration == 0 and not run.results
        if fresh and (state.continuation or state.intake == "simple"):
            why = "follow-up turn: the continuation check decides" if state.continuation else "simple intake"
            return StatusAssessment(status="continue", goal_progress=0.0, confidence=1.0, summary=f"nothing to assess yet ({why})")
        if fresh and self.settings.reject_done_at_iteration_zero and not has_plan(state, run):
            # The guard would turn 'done' into 'continue', and with no plan 'replan' means the same:
            # the only answer the call could give is known, so it is not asked.
            return StatusAssessment(status="continue", goal_progress=0.0, confidence=1.0,
                                    summary="nothing to assess yet (no evidence and no plan)")
        failed = direct_failures(state, run) if self.settings.replan_on_failure_without_assessment else []
        if failed:
            prev = state.previous_assessment
            logger.info("plan-assess: %s failed in the last plan; 'replan' without a call", ", ".join(failed))
            return StatusAssessment(
                status="replan", goal_progress=prev.goal_progress if prev else 0.0, confidence=1.0,
                summary=f"known without asking: {', '.join(failed)} failed, so the plan cannot finish as made",
            )
        prompt = self._prompt_checked(phases.assess_prompt(goal, state, run, self.settings))
        try:
            outcome = await self._caller.structured(
                self.assess_model, AssessStatus, prompt.messages(), phase="plan-assess",
                convert=lambda m: to_status_assessment(m),  # type: ignore[arg-type]
                parse_text=lambda t: to_status_assessment(parse_object(t, AssessStatus)[0]),
                tally=tally, thread_id=context.thread_id or state.thread_id, iteration=state.iteration,
            )
        except PlanGenerationError as exc:
            if self.settings.on_failure != "degraded":
                raise
            prev = state.previous_assessment
            self.stats.degraded += 1
            logger.error("plan-assess: degraded after %d attempts; not counted as progress", len(exc.attempts))
            return StatusAssessment(
                status="continue", goal_progress=prev.goal_progress if prev else 0.0, confidence=0.0,
                summary=f"degraded: the planner could not assess ({len(exc.attempts)} attempts failed)", degraded=True,
            )
        a = outcome.value
        if self.settings.prompt_profile == "compact":  # its schema asks for the status alone (AssessStatus)
            a = a.model_copy(update={"goal_progress": 1.0 if a.status == "done" else plan_progress(run)})
        nodes, results = checked_steps(run)
        finished = run.manager is not None and not run.manager.has_unfinished()
        capabilities = by_name(context.available_capabilities)
        deliverable = assessed_deliverable(goal, deliverable_of(state, run.manager), run.decision, nodes, results,
                                           capabilities, context.workspace, small_model=self.small_model)
        a, why = guard_assessment(goal, a, deliverable, run.decision, nodes, results, capabilities, context.workspace,
                                  plan_finished=finished, small_model=self.small_model,
                                  grounded=self.grounding_required())
        if why:
            self.stats.guard_overrides += 1
            logger.warning("plan-assess: %s", why)
        if a.status == "done" and self.small_model:
            a = await self._cross_checked(goal, a, deliverable, state, run, context, nodes, results, tally)
        if a.status == "done" and fresh and self.settings.reject_done_at_iteration_zero:
            self.stats.guard_overrides += 1
            logger.warning("plan-assess: 'done' at iteration 0 with no evidence overridden to 'continue'")
            a = a.model_copy(update={"status": "continue", "summary": guard_note("done at iteration 0 with no evidence", a.summary)})
        return a

    async def _cross_checked(
        self, goal: str, a: StatusAssessment, deliverable: Deliverable | None, state: LoopState, run: RunSteps,
        context: PlanContext, nodes: Sequence[PlanStep | StepAction], results: Sequence[StepResult], tally: Tally,
    ) -> StatusAssessment:
        """A small model's ``done`` after a blind second reading of the tool outputs
        (``small_model/crosscheck.py``): ``replan`` when the reading disagrees with what was delivered
        (``deliverable``: as the checks held the assessment to it, ``guard.assessed_deliverable``)."""
        evidence = evidence_of(nodes, results, by_name(context.available_capabilities), deliverable)
        if deliverable is None or not wants_crosscheck(deliverable, evidence):
            return a
        prompt = self._prompt_checked(crosscheck_prompt(goal, deliverable, evidence, self.settings))
        try:
            outcome = await self._caller.structured(
                self.assess_model, CrossCheck, prompt.messages(), phase="crosscheck",
                convert=lambda m: m, parse_text=lambda t: parse_object(t, CrossCheck)[0],
                tally=tally, thread_id=context.thread_id or state.thread_id, iteration=state.iteration,
            )
        except PlanGenerationError as exc:
            # no reading is no confirmation: the done does not stand on an unchecked answer
            why = f"the second reading of the tool outputs failed ({len(exc.attempts)} attempts)"
        else:
            reading = outcome.value
            assert isinstance(reading, CrossCheck)
            logger.info("crosscheck: the reading gives %s", reading.values)
            text = delivered(deliverable, run.decision, results, context.workspace)
            why = "; ".join(disagreements(goal, deliverable, reading, text, evidence))
        if not why:
            return a
        self.stats.guard_overrides += 1
        logger.warning("plan-assess: 'done' turned into 'replan': %s", why)
        update = {"status": "replan", "goal_progress": min(a.goal_progress, 0.5), "summary": guard_note(why, a.summary)}
        return a.model_copy(update=update)

    async def _generate(
        self,
        goal: str,
        state: LoopState,
        context: PlanContext,
        assessment: StatusAssessment,
        run: RunSteps,
        tally: Tally,
    ) -> PlanResult:
        terminal = False
        max_steps = self.settings.max_plan_steps
        instruction = ""
        warnings: list[str] = []
        if state.continuation and state.iteration == 0 and not run.results:
            cont = await self._continuation(goal, state.prior_goals, context, tally, context.thread_id or state.thread_id)
            if cont.action == "bootstrap":
                terminal, max_steps = True, 1
                instruction = "This follow-up builds on earlier work: answer it with exactly one step."
        in_flight = running_decision(run)
        replace = assessment.status == "replan"
        declared = None
        try:
            declare = self.settings.declare_deliverable
            if deliverable_of(state, run.manager) is None and (self.small_model if declare is None else declare) \
                    and needs_declaration(context.available_capabilities):
                declared, notes = await self._declare(goal, context, tally, context.thread_id or state.thread_id)
                warnings += notes
                if run.manager is not None:
                    run.manager.deliverable = declared
                else:
                    state = state.model_copy(update={"deliverable": declared})
            gen = await self._generation_call(
                goal, state, context, assessment, run, tally,
                # a 'keep' is accepted here and, with nothing in flight, answered below by asking for steps
                max_steps=max_steps, instruction=instruction, allow_keep=True, replace=replace,
            )
            if gen.plan_action == "keep" and in_flight is None:
                self.stats.keep_without_plan += 1
                logger.warning("plan-generate: 'keep' with no plan in flight; asking once more for steps")
                warnings.append("the model answered 'keep' with no plan in flight; steps were asked for")
                gen = await self._generation_call(
                    goal, state, context, assessment, run, tally, max_steps=max_steps,
                    instruction=(instruction + " " + phases.keep_without_plan_note()).strip(),
                    allow_keep=False, replace=replace,
                )
        except PlanGenerationError as exc:
            if self.settings.on_failure != "degraded":
                raise
            self.stats.degraded += 1
            logger.error("plan-generate: degraded after %d attempts; the in-flight plan (if any) stands", len(exc.attempts))
            prev = state.previous_assessment
            return PlanResult(
                status="replan" if assessment.status == "replan" else "continue", plan_action="keep",
                goal_progress=min(assessment.goal_progress, prev.goal_progress) if prev else 0.0, confidence=0.0,
                evidence_summary=assessment.summary, degraded=True, llm_calls=tally.calls,
                warnings=[*warnings, str(exc)],
            )
        if gen.plan_action == "keep" and assessment.status == "replan":
            warnings.append("the assessment said 'replan' but generation kept the plan in flight")
        degraded = assessment.degraded
        prev = state.previous_assessment
        progress = assessment.goal_progress
        if degraded:  # a degraded assessment never counts as progress
            progress = prev.goal_progress if prev else 0.0
        return PlanResult(
            status="replan" if assessment.status == "replan" else "continue",
            plan_action=gen.plan_action,
            decision=gen.decision if gen.plan_action == "new" else None,
            goal_progress=progress,
            confidence=assessment.confidence,
            next_action=gen.next_action,
            plan_reasoning=(gen.decision.reasoning if gen.decision else "") or gen.next_action,
            evidence_summary=assessment.summary,
            full_output=gen.raw,
            require_goal_completion=assessment.require_goal_completion,
            terminal_after_execute=terminal,
            degraded=degraded,
            llm_calls=tally.calls,
            warnings=[*warnings, *gen.warnings],
            deliverable=declared,
        )

    async def _generation_call(
        self,
        goal: str,
        state: LoopState,
        context: PlanContext,
        assessment: StatusAssessment | None,
        run: RunSteps,
        tally: Tally,
        *,
        max_steps: int,
        instruction: str,
        allow_keep: bool,
        replace: bool,
        phase: str = "plan-generate",
    ) -> Generated:
        # a subagent step, or a tool whose name is no Python name, has no call form: the plan is JSON then
        calls = self.settings.plan_syntax == "calls" and all(
            c.kind == "tool" and c.name.isidentifier() for c in context.available_capabilities)
        prompt = self._prompt_checked(
            phases.generate_prompt(goal, state, context, assessment, run, self.settings,
                                   max_steps=max_steps, instruction=instruction, calls=calls)
        )
        compact = self.settings.prompt_profile == "compact"
        pm = run.manager  # the DAG's own rules: ids, validation, what a plan may still owe
        deliverable = deliverable_of(state, pm)
        validate = decision_validator(goal, context, pm, deliverable, small_model=self.small_model,
                                      allow_keep=allow_keep, replace=replace, max_steps=max_steps, greedy=self._greedy)
        read, parse = readers(context, max_steps, pm)
        if calls:
            parse = calls_reader(context, max_steps, pm)
        try:
            if calls:
                existing = [n.id for n in pm.nodes] if pm is not None else []
                owed = write_owed(deliverable, pm.nodes if pm is not None else [],
                                  by_name(context.available_capabilities)) if self.small_model else None
                grammar = plan_grammar(grammar_tools(writable(deliverable, context.available_capabilities),
                                                     model_step_name(context.capability_names())), max_steps,
                                       existing, ends_with=owed)
                written = await self._caller.written(
                    with_grammar(self.model, grammar), prompt.messages(), phase=phase,
                    parse_text=parse, validate=validate, reask_template="reask_calls",
                    tally=tally, thread_id=context.thread_id or state.thread_id, iteration=state.iteration,
                )
                written.value.raw = written.raw_text
                return writes_in_order(with_refusals(written.value, written.attempts), context)
            outcome = await self._caller.structured(
                self.model, plan_schema(context.model_copy(update={"available_capabilities": writable(
                    deliverable, context.available_capabilities)}), max_steps, allow_keep, compact=compact),
                prompt.messages(), phase=phase,
                convert=read, parse_text=parse, validate=validate,
                tally=tally, thread_id=context.thread_id or state.thread_id, iteration=state.iteration,
            )
            outcome.value.raw = outcome.raw_text
            return writes_in_order(with_refusals(outcome.value, outcome.attempts), context)
        except PlanGenerationError as exc:
            if not self.small_model:
                raise
            caps = by_name(context.available_capabilities)
            prescribed = prescribed_write(deliverable, *checked_steps(run), caps, validate, exc)
            if prescribed is not None:
                self.stats.prescribed_writes += 1
                return prescribed
            steps, results = checked_steps(run)
            narrow = narrow_searches(goal, results) if deliverable is not None and deliverable.every_match else []
            prescribed = (prescribed_widening(deliverable, steps, results, caps, validate, exc, narrow=narrow) if narrow else None) \
                or prescribed_reading(deliverable, steps, results, caps, validate, exc) \
                or prescribed_widening(deliverable, steps, results, caps, validate, exc) \
                or prescribed_count(deliverable, steps, results, caps, validate, exc)
            if prescribed is not None:
                self.stats.prescribed_readings += 1
                return prescribed
            kept = unbound_calls(exc, parse, caps, validate,
                                 {n.id: n.depends_on for n in pm.nodes} if pm is not None else None)
            if kept is None:
                raise
            self.stats.unbound_calls += 1
            return writes_in_order(kept, context)

    # ------------------------------------------------------------------ the deliverable

    async def declare_deliverable(self, goal: str, context: PlanContext) -> Deliverable:
        """What ``goal`` must hand back, as the model declares it (``planner/contract/declare.py``)."""
        deliverable, _ = await self._declare(goal, context, Tally(), context.thread_id)
        return deliverable

    async def _declare(
        self, goal: str, context: PlanContext, tally: Tally, thread_id: str | None
    ) -> tuple[Deliverable, list[str]]:
        prompt = self._prompt_checked(phases.deliverable_prompt(goal, self.settings))
        outcome = await self._caller.structured(
            self.assess_model, DeclareDeliverable, prompt.messages(), phase="deliverable",
            convert=lambda m: m,
            parse_text=lambda t: parse_object(t, DeclareDeliverable)[0],
            tally=tally, thread_id=thread_id, iteration=0,
        )
        wire = outcome.value
        assert isinstance(wire, DeclareDeliverable)
        deliverable, warnings = to_deliverable(wire, goal, _existing_in(context.workspace))
        for w in warnings:
            logger.warning("%s", w)
        logger.info("deliverable: %s (declared by the model)", deliverable.describe())
        return deliverable, warnings


def _existing_in(workspace: str | None) -> Callable[[str], bool] | None:
    """Whether a path names a file ``workspace`` already has (None without a workspace to look in)."""
    if not workspace:
        return None
    return lambda path: read_back(workspace, path) is not None
