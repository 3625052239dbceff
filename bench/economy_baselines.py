"""The two baseline loop strategies of the economy benchmark, on the same world as ours.

1. **one call per iteration** (a Magentic-One-style ledger): each iteration one structured call
   with the full context — task, tools, current plan and the full text of every step result so
   far — answering "is the request satisfied?" and "what are the next steps (a DAG)?".
2. **replan after every step** (LangGraph's plan-and-execute tutorial): one planning call, then
   execute ONE step, then a replanning call shown the objective, the original plan and every past
   step with its full result, answering with the remaining plan or the final response.

The prompts are written in the spirit of the designs they stand for, with the same tool list and
the same oracle as ours (``World.next_round``: it plans only what the prompt lets it plan); they
are no longer than the originals. The ledger ends, as Magentic-One does, with one final-answer call
over the record of the work.

Each runs two ways: as designed (every step's full result re-sent in every later prompt) and with
our compaction (``compact=True``): a result goes in full only into the first prompt after it
arrived, and afterwards as the same 160-character excerpt our plan rendering keeps. Compaction
saves tokens and can cost re-reads: the oracle cannot use a fact an excerpt cut off.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.tools import BaseTool
from pydantic import BaseModel, Field

from bench.economy_world import Scenario, Tally, World, call_tokens

EXCERPT = 160  # what our plan rendering keeps of an older result (soothe_planner.dag.render.EXCERPT)


def _compacted(entries: list[str], fresh_from: int) -> list[str]:
    """Entries before ``fresh_from`` cut to an excerpt; the new ones whole."""
    return [e if i >= fresh_from or len(e) <= EXCERPT else e[: EXCERPT - 1] + "…" for i, e in enumerate(entries)]

# --------------------------------------------------------------------------- baseline: one call per iteration


class LedgerStep(BaseModel):
    id: str = Field(description="Short unique id")
    description: str = Field(description="What to do")
    tool: str = Field(description="The tool to use")
    depends_on: list[str] = Field(default_factory=list, description="Ids of steps that must finish first")


class ProgressLedger(BaseModel):
    """Assess progress on the request and decide the next steps."""

    is_request_satisfied: bool = Field(description="True only if the original request is fully satisfied")
    is_in_loop: bool = Field(description="True if we are repeating the same requests or answers")
    is_progress_being_made: bool = Field(description="True if recent steps added value")
    reason: str = Field(description="Short reasoning for the answers above")
    next_steps: list[LedgerStep] = Field(
        default_factory=list, description="Next steps to run (a DAG); empty if done"
    )


LEDGER_SYSTEM = """You are the orchestrator of a team of tools working on a user's request. You keep a ledger of \
the facts gathered so far and the plan, and after every round of work you decide whether the request is \
satisfied and what the team should do next. Think about what has been learned, what remains uncertain, and which \
tool is best suited to each remaining piece of work. Prefer steps that can run in parallel when they do not depend \
on each other. Never repeat a step that already succeeded; retry a failed step only if a retry can help."""

LEDGER_TURN = """Recall we are working on the following request:

{task}

The team has these tools:
{tools}

Here is the current plan:
{plan}

Here is the full record of the work so far (every step and its complete result):
{history}

To make progress on the request, answer the following:
- Is the request fully satisfied? (True if complete, False if the original request has yet to be SUCCESSFULLY and \
FULLY addressed)
- Are we in a loop, repeating the same requests and/or getting the same responses?
- Are we making forward progress? (True if just starting or recent steps added value; False if recent work \
shows evidence of being stuck)
- What are the next steps? Give each an id, a description, the tool to use, and the ids of the steps it depends on.
"""


def _tool_list(tools: list[BaseTool]) -> str:
    return "\n".join(f"- {t.name}: {t.description}" for t in tools)


async def _run_steps_in_order(
    steps: list[dict[str, Any]], tools: dict[str, BaseTool], history: list[str]
) -> None:
    """Run one round of steps (dependency order, a failed step's dependents are skipped)."""
    done: set[str] = set()
    failed: set[str] = set()
    pending = list(steps)
    while pending:
        progressed = False
        for s in list(pending):
            if any(d in failed for d in s["depends_on"]):
                pending.remove(s)
                failed.add(s["id"])
                history.append(f"Step {s['id']} ({s['description']}): SKIPPED, a dependency failed")
                progressed = True
            elif all(d in done or d not in {x["id"] for x in steps} for d in s["depends_on"]):
                pending.remove(s)
                try:
                    out = await tools[s["tool"]].ainvoke({"task": s["description"]})
                    done.add(s["id"])
                    history.append(f"Step {s['id']} ({s['description']}) with {s['tool']}: {out}")
                except Exception as exc:
                    failed.add(s["id"])
                    history.append(f"Step {s['id']} ({s['description']}) with {s['tool']}: FAILED: {exc}")
                progressed = True
        if not progressed:
            raise RuntimeError("round has a cycle")


LEDGER_FINAL = """We are working on the following request:

{task}

We have completed the task. The above messages contain the conversation that took place to complete the \
task. Here is the full record of the work:
{history}

Based on the information gathered, provide the final answer to the original request."""


def _prompt_text(call: Any) -> str:
    return "\n".join(m.text for m in call.messages)


async def run_ledger(sc: Scenario, max_iterations: int = 16, *, compact: bool = False) -> Tally:
    from langchain_core.messages import HumanMessage, SystemMessage

    from soothe_planner.testing import FunctionChatModel

    world = World(sc)
    tally = Tally()
    schemas: dict[str, type[BaseModel]] = {"ProgressLedger": ProgressLedger}

    def answer(call: Any) -> Any:
        tally.add(call_tokens(call, schemas))
        if call.schema_name is None:  # the final answer
            return "The report is complete."
        if world.done:
            return {
                "is_request_satisfied": True,
                "is_in_loop": False,
                "is_progress_being_made": True,
                "reason": "every part is done",
                "next_steps": [],
            }
        return {
            "is_request_satisfied": False,
            "is_in_loop": False,
            "is_progress_being_made": True,
            "reason": "more to do",
            "next_steps": [
                {"id": p.id, "description": p.text, "tool": p.tool, "depends_on": p.deps}
                for p in world.next_round(_prompt_text(call))
            ],
        }

    fm = FunctionChatModel(answer)
    model = fm.with_structured_output(ProgressLedger, method="function_calling")
    tools = {t.name: t for t in world.tools()}
    history: list[str] = []
    seen = 0  # history entries already sent in full once
    plan = "(no plan yet)"
    for it in range(max_iterations):
        shown = _compacted(history, seen) if compact else history
        seen = len(history)
        msgs = [
            SystemMessage(LEDGER_SYSTEM),
            HumanMessage(
                LEDGER_TURN.format(
                    task=sc.goal,
                    tools=_tool_list(list(tools.values())),
                    plan=plan,
                    history="\n\n".join(shown) or "(nothing yet)",
                )
            ),
        ]
        ledger = await model.ainvoke(msgs)
        assert isinstance(ledger, ProgressLedger)
        tally.iterations = it + 1
        if ledger.is_request_satisfied:
            shown = _compacted(history, seen) if compact else history
            await fm.ainvoke([HumanMessage(LEDGER_FINAL.format(task=sc.goal, history="\n\n".join(shown)))])
            tally.completed = world.done
            break
        steps = [s.model_dump() for s in ledger.next_steps]
        plan = "\n".join(
            f"{s['id']}: {s['description']} [{s['tool']}] after {s['depends_on']}" for s in steps
        )
        await _run_steps_in_order(steps, tools, history)
    tally.rereads = world.rereads
    return tally


# --------------------------------------------------------------------------- baseline: replan after every step


class StepPlan(BaseModel):
    """Plan to follow in future."""

    steps: list[str] = Field(description="Different steps to follow, in sorted order")


class FinalResponse(BaseModel):
    response: str


class Act(BaseModel):
    """Action to perform."""

    action: FinalResponse | StepPlan = Field(
        description="Action to perform. If you want to respond to user, use Response. "
        "If you need to further use tools to get the answer, use Plan."
    )


PLANNER_SYSTEM = """For the given objective, come up with a simple step by step plan. The plan should consist of \
individual tasks that, if executed correctly, yield the correct answer. Do not add any superfluous steps. The \
result of the final step should be the final answer. Make sure each step has all the information it needs; do \
not skip steps. Each step names the tool to use from this list:
{tools}"""

REPLANNER_TURN = """For the given objective, come up with a simple step by step plan. The plan should consist of \
individual tasks that, if executed correctly, yield the correct answer. Do not add any superfluous steps. The \
result of the final step should be the final answer. Make sure each step has all the information it needs; do \
not skip steps. Tools:
{tools}

Your objective was this:
{objective}

Your original plan was this:
{plan}

You have currently done the following steps:
{past_steps}

Update your plan accordingly. If no more steps are needed and you can return to the user, respond with that. \
Otherwise, fill out the plan. Only add steps to the plan that still NEED to be done. Do not return previously done \
steps as part of the plan."""


async def run_replan_every_step(sc: Scenario, max_steps: int = 120, *, compact: bool = False) -> Tally:
    from langchain_core.messages import HumanMessage, SystemMessage

    from soothe_planner.testing import FunctionChatModel

    world = World(sc)
    tally = Tally()
    schemas: dict[str, type[BaseModel]] = {"StepPlan": StepPlan, "Act": Act}

    def remaining(prompt: str) -> list[str]:
        # A plan is a list, so order is all it can say: re-reads first, then dependency order.
        return [f"{p.text} (tool: {p.tool})" for p in world.next_round(prompt, carry_blocked=True)]

    def answer(call: Any) -> Any:
        tally.add(call_tokens(call, schemas))
        if call.schema_name == "StepPlan":
            return {"steps": remaining(_prompt_text(call))}
        if world.done:
            return {"action": {"response": "The report is complete."}}
        return {"action": {"steps": remaining(_prompt_text(call))}}

    fm = FunctionChatModel(answer)
    planner = fm.with_structured_output(StepPlan, method="function_calling")
    replanner = fm.with_structured_output(Act, method="function_calling")
    tools = {t.name: t for t in world.tools()}
    tool_list = _tool_list(list(tools.values()))
    first = await planner.ainvoke(
        [SystemMessage(PLANNER_SYSTEM.format(tools=tool_list)), HumanMessage(sc.goal)]
    )
    assert isinstance(first, StepPlan)
    plan = first.steps
    past: list[str] = []
    for _ in range(max_steps):
        task = plan[0]
        tool = re.search(r"\(tool: (\w+)\)", task)
        try:
            out = await tools[tool.group(1) if tool else "search"].ainvoke({"task": task})
        except Exception as exc:
            out = f"FAILED: {exc}"
        past.append(f"Task: {task}\nResult: {out}")
        shown = _compacted(past, len(past) - 1) if compact else past
        act = await replanner.ainvoke(
            [
                HumanMessage(
                    REPLANNER_TURN.format(
                        tools=tool_list,
                        objective=sc.goal,
                        plan="\n".join(f"{i + 1}. {s}" for i, s in enumerate(plan)),
                        past_steps="\n\n".join(shown),
                    )
                )
            ]
        )
        assert isinstance(act, Act)
        tally.iterations += 1
        if isinstance(act.action, FinalResponse):
            tally.completed = world.done
            break
        plan = act.action.steps
    tally.rereads = world.rereads
    return tally
