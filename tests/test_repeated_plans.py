"""A plan that only repeats finished work is refused: under greedy decoding it gives the same outputs.

Regression (the 1.5B, plans in calls, a docs-index goal): the listing, the answer over it and the
write ran, the assessment said "replan", and the model planned the very same three steps again in
each of the three iterations left, writing the same wrong file each time.
"""

from __future__ import annotations

from pathlib import Path

from planner_support import COMPACT, state, tool_context, typed_step

from soothe_planner.models import AgentDecision, PlanStep, StatusAssessment, StepAction, StepResult
from soothe_planner.planner import LLMPlanner
from soothe_planner.planner.small_model.plan_rules import repeats_finished_work
from soothe_planner.testing import ScriptedChatModel

RAN = [PlanStep(id="s1", description="list", tool="list_dir", args={"path": "docs", "recursive": True},
                status="completed"),
       PlanStep(id="s2", description="name all markdown files", depends_on=["s1"], status="completed"),
       PlanStep(id="s3", description="write", tool="write_file", args={"path": "D.md", "content": "{{s2.output}}"},
                depends_on=["s2"], status="completed")]


def _again(task: str = "Name all  markdown files", path: str = "docs") -> AgentDecision:
    return AgentDecision(steps=[
        StepAction(id="s1.2", description="list", tool="list_dir", args={"recursive": True, "path": path}),
        StepAction(id="s2.2", description=task, depends_on=["s1.2"]),
        StepAction(id="s3.2", description="write", tool="write_file", depends_on=["s2.2"],
                   args={"path": "D.md", "content": "{{s2.2.output}}"})])


def test_a_plan_of_the_same_calls_on_the_same_data_is_refused_naming_each_repeat() -> None:
    problems = repeats_finished_work(_again(), RAN)
    assert len(problems) == 1
    assert "s1.2 (list_dir), s2.2 (answer 'Name all  markdown files'), s3.2 (write_file)" in problems[0]
    # an answer over a finished step, asked the same: a repeat too
    assert repeats_finished_work(AgentDecision(steps=[StepAction(id="a", description="name all markdown files",
                                                                  depends_on=["s1"])]), RAN)


def test_anything_new_in_the_plan_lets_it_stand() -> None:
    assert repeats_finished_work(_again(task="copy the file names, one per line"), RAN) == []
    assert repeats_finished_work(_again(path="docs/"), RAN) == []  # another argument is another call
    assert repeats_finished_work(_again(), []) == []  # nothing ran yet
    failed = [n.model_copy(update={"status": "failed"}) if n.id == "s2" else n for n in RAN]
    assert repeats_finished_work(_again(), failed) == []  # a step that failed may be planned again


async def test_the_planner_re_asks_a_repeated_plan_and_takes_a_changed_one(tmp_path: Path) -> None:
    ctx, _ = tool_context(tmp_path)
    steps = [typed_step("s1", "list_dir", {"path": "docs", "recursive": True}),
             typed_step("s2", "answer", {"task": "name all markdown files"}, "s1")]
    first = LLMPlanner(Greedy(responses=[{"steps": steps}]), settings=COMPACT)
    pm = first._default_manager("list the docs", ctx)
    gen = await first.generate_from_assessment("list the docs", state(0), ctx, _continue(), pm)
    assert gen.decision is not None
    pm.ingest(gen.decision, 0)
    pm.record_step_outcomes([StepResult(step_id=sid, success=True, output="docs/a.md") for sid in ("s1", "s2")])
    changed = [typed_step("s3", "answer", {"task": "copy the file names exactly"}, "s1")]
    model = Greedy(responses=[{"steps": steps}, {"steps": changed}])
    planner = LLMPlanner(model, settings=COMPACT)
    gen = await planner.generate_from_assessment("list the docs", state(1), ctx, _continue(), pm)
    assert gen.decision is not None and [s.description for s in gen.decision.steps] == ["copy the file names exactly"]
    assert "every step of this plan already ran with the same input" in model.calls[1].messages[-1].content
    # a model that samples may answer the same call differently: the repeat is taken as it is
    sampling = ScriptedChatModel(responses=[{"steps": steps}])
    gen = await LLMPlanner(sampling, settings=COMPACT).generate_from_assessment("list the docs", state(1), ctx,
                                                                              _continue(), pm)
    assert gen.decision is not None and len(sampling.calls) == 1


class Greedy(ScriptedChatModel):
    """A scripted model that says it decodes greedily, as the embedded model does."""

    temperature: float = 0.0


def _continue() -> StatusAssessment:
    return StatusAssessment(status="continue", goal_progress=0.5, confidence=0.5, summary="")
