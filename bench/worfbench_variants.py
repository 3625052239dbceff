"""The four ways the WorFBench benchmark asks a model for a plan, and what each answer is scored as.

Every variant's answer ends as WorFBench answer text (``Node: 1: … Edge: (START,1) …``), the form
both scorers read, and is saved with the model's raw output so any score can be audited:

1. **single call (two-shot)** — WorFBench's own protocol, as its ``node_eval.py`` builds it: the
   item's system turn, the two worked examples of the item's task type from its
   ``prompts/eval_prompt.py`` (``bench/data/worfbench_two_shot.json``), then the task with "Now it's
   your turn." in front. One plain call; the reply is scored exactly as written, read by the
   official parser (fenced or bolded blocks, prose around them: all accepted as the evaluator
   accepts them). seal_tools has no examples of its own upstream; it gets toolbench's (the same
   system turn and the same kind of task: a tool list and a request).
2. **structured single call** — the control: the planner's own first prompt and plan schema, sent
   once with the configured structured-output method; no parser repairs, no validation, no
   re-ask, no raw fallback. A reply that does not fit the schema is a failure. What separates
   this from variant 3 is exactly what the planner adds around the call.
3. **planner, no re-ask** / 4. **planner, full** — ``LLMPlanner.create_plan`` with the configured
   retries; an answer accepted before any re-ask is variant 3's answer too, one that needed a
   re-ask (or failed) is a failure of variant 3 (with greedy decoding that is what a separate
   ``retries=0`` run returns; ``bench/worfbench.py`` says more).

A plan becomes answer text with its steps numbered in the order given, an edge per dependency,
START before every step without one and END after every step nothing depends on. A dependency on
an id that is not a step cannot be written in that form and is dropped (counted in the answer's
``notes``). The task text is sent whole: nothing is cut.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from langchain_core.callbacks import AsyncCallbackHandler

__all__ = [
    "VARIANTS",
    "Answer",
    "RawRecorder",
    "plan_answer",
    "planner_answers",
    "single_call",
    "structured_single_call",
    "two_shot_messages",
]

VARIANTS = ("single call (two-shot)", "structured single call", "planner, no re-ask", "planner, full")
TWO_SHOT_FILE = Path(__file__).resolve().parent / "data" / "worfbench_two_shot.json"
EXAMPLES_OF = {"seal_tools": "toolbench"}  # no two-shot examples of its own upstream


@dataclass
class Answer:
    """One variant's answer to one item: the text scored, and what the model really wrote."""

    text: str
    ok: bool = True
    raw: list[str] = field(default_factory=list)
    error: str = ""
    notes: list[str] = field(default_factory=list)


class RawRecorder(AsyncCallbackHandler):
    """Keeps every model reply (its text, or its tool calls as JSON) between two ``take`` calls."""

    def __init__(self) -> None:
        self.replies: list[str] = []

    async def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        for gens in response.generations:
            for gen in gens:
                msg = getattr(gen, "message", None)
                calls = getattr(msg, "tool_calls", None) or []
                text = getattr(gen, "text", "") or ""
                self.replies.append(json.dumps([c.get("args") for c in calls]) if calls and not text else text)

    def take(self) -> list[str]:
        out, self.replies = self.replies, []
        return out


@cache
def _examples() -> dict[str, list[dict[str, str]]]:
    data = json.loads(TWO_SHOT_FILE.read_text())
    return dict(data["two_shot_example"])


def two_shot_messages(item: dict[str, Any]) -> list[Any]:
    """WorFBench's two-shot prompt for ``item``: system turn, the examples, then the task."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    conv = item["conversations"]
    examples = _examples()[EXAMPLES_OF.get(item["source"], item["source"])]
    msgs: list[Any] = [SystemMessage(str(conv[0]["content"]))]
    msgs += [HumanMessage(m["content"]) if m["role"] == "user" else AIMessage(m["content"]) for m in examples]
    msgs.append(HumanMessage("Now it's your turn.\n" + str(conv[1]["content"])))
    return msgs


def task_of(item: dict[str, Any]) -> str:
    return str(item["conversations"][1]["content"]).strip()


def plan_answer(steps: Sequence[tuple[str, str, Sequence[str]]]) -> tuple[str, list[str]]:
    """``(id, description, depends_on)`` steps as WorFBench answer text, and what could not be written."""
    position = {sid: i for i, (sid, _, _) in enumerate(steps, 1)}
    notes: list[str] = []
    edges: list[str] = []
    has_pred: set[int] = set()
    has_succ: set[int] = set()
    for sid, _, deps in steps:
        for d in dict.fromkeys(deps):
            if d not in position:
                notes.append(f"step {sid!r} depends on {d!r}, which is not a step: edge dropped")
                continue
            edges.append(f"({position[d]},{position[sid]})")
            has_succ.add(position[d])
            has_pred.add(position[sid])
    start = [f"(START,{i})" for i in position.values() if i not in has_pred]
    end = [f"({i},END)" for i in position.values() if i not in has_succ]
    nodes = "\n".join(f"{i}: {' '.join(desc.split())}" for i, (_, desc, _) in enumerate(steps, 1))
    return f"Node:\n{nodes}\nEdge: {' '.join([*start, *edges, *end])}", notes


async def single_call(model: Any, item: dict[str, Any], recorder: RawRecorder) -> Answer:
    try:
        reply = await model.ainvoke(two_shot_messages(item))
    except Exception as exc:  # a transport or context-length failure is this variant's failure
        return Answer("", ok=False, raw=recorder.take(), error=f"{type(exc).__name__}: {exc}")
    return Answer(str(reply.text), raw=recorder.take())


async def _planner_prompt(settings: Any, goal: str) -> list[Any]:
    """The messages of the planner's first generation call for ``goal`` (captured, no model called)."""
    from soothe_planner.models import PlanContext
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import FunctionChatModel

    seen: list[Any] = []

    def capture(call: Any) -> Any:
        seen.append(list(call.messages))
        return {"plan_action": "new", "steps": [{"id": "s1", "description": "placeholder"}]}

    await LLMPlanner(FunctionChatModel(capture), settings=settings).create_plan(goal, PlanContext())
    return seen[0]


async def structured_single_call(model: Any, settings: Any, item: dict[str, Any], recorder: RawRecorder) -> Answer:
    from soothe_planner.planner.calls import resolve_method
    from soothe_planner.wire import generation_model

    messages = await _planner_prompt(settings, task_of(item))
    schema = generation_model(settings.max_plan_steps, allow_keep=False)
    method = resolve_method(model, settings.structured_output_method)
    try:
        out = await model.with_structured_output(schema, method=method, include_raw=True).ainvoke(messages)
    except Exception as exc:
        return Answer("", ok=False, raw=recorder.take(), error=f"{type(exc).__name__}: {exc}")
    raw = recorder.take()
    parsed = out.get("parsed") if isinstance(out, dict) else None
    if parsed is None:
        err = out.get("parsing_error") if isinstance(out, dict) else None
        return Answer("", ok=False, raw=raw, error=f"reply does not fit the schema: {err}")
    text, notes = plan_answer([(s.id, s.description, s.depends_on) for s in parsed.steps])
    return Answer(text, raw=raw, notes=notes)


async def planner_answers(
    model: Any, settings: Any, item: dict[str, Any], recorder: RawRecorder
) -> tuple[Answer, Answer, dict[str, int]]:
    """(no re-ask, full) from one ``create_plan`` run with re-asks, and the planner's counters."""
    from soothe_planner.errors import PlannerError
    from soothe_planner.models import PlanContext
    from soothe_planner.planner import LLMPlanner

    planner = LLMPlanner(model, settings=settings)
    try:
        plan = await planner.create_plan(task_of(item), PlanContext())
    except PlannerError as exc:
        failed = Answer("", ok=False, raw=recorder.take(), error=f"{type(exc).__name__}: {exc}")
        return failed, failed, planner.stats.as_dict()
    text, notes = plan_answer([(s.id, s.description, s.depends_on) for s in plan.steps])
    full = Answer(text, raw=recorder.take(), notes=notes)
    if planner.stats.reask:
        first = Answer("", ok=False, raw=full.raw[:1], error="the first answer needed a re-ask")
        return first, full, planner.stats.as_dict()
    return full, full, planner.stats.as_dict()
