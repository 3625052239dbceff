"""The ways the WorFBench benchmark asks a model for a plan, what each row is, and what each answer is scored as.

Per item, up to three **runs** talk to the model, and seven **variants** (rows) are read from them:

1. ``two-shot`` run → **two-shot, one call**: WorFBench's own protocol, as its ``node_eval.py``
   builds it: the item's system turn, the two worked examples of the item's task type from its
   ``prompts/eval_prompt.py`` (``bench/data/worfbench_two_shot.json``), then the task with "Now it's
   your turn." in front. One plain call; the reply is scored exactly as written, read by the
   official parser. seal_tools has no examples of its own upstream; it gets toolbench's.
2. ``compact`` and ``full`` runs → ``LLMPlanner.create_plan`` under that prompt profile (the two the
   package ships), with the task's tools or actions as its capabilities (``worfbench_tools``: the
   list the two-shot prompt shows in its text) and the configured re-asks. Three rows each:

   - **single call**: the run's *first* call alone — the planner's own first prompt with its own
     plan schema (or, in the calls syntax, its grammar), exactly as the planner sent it — read with
     no repair: the schema's validation (a JSON plan) or the calls reader (a plan in calls) and
     nothing else; a reply that does not fit is a failure. What separates it from the next two rows
     is exactly what the planner adds around the call.
   - **planner, re-asks off**: the planner's answer if no re-ask was needed, else a failure; its
     calls are those before the first re-ask. With greedy decoding (the embedded model's
     temperature 0, recorded) this is what a separate ``retries=0`` run returns.
   - **planner, re-asks on**: the planner's answer, every call counted.

   Both derived rows are read from the run's own recorded calls, never from a second request, so
   they cannot have seen a different prompt than the one the planner sent.

Every row carries what ran, read back from the objects that ran it — the planner's resolved
settings (profile, plan syntax, re-asks, step cap, prompt budget, structured-output method), the
plan syntax the item's first call really used (the calls syntax only when every capability is a
tool named like a Python function, the planner's own rule), and the capabilities passed — never
from the row's name (``labels``).

A plan becomes answer text with its steps numbered in the order given, an edge per dependency,
START before every step without one and END after every step nothing depends on. A step's node
text is its description: the planner's, or, for a step read without repairs from a shape that has
no description (the compact plan), the text the planner's own reader derives from the call
(``parsing.plan_steps.derived_description``). A dependency on an id that is not a step cannot be
written in that form and is dropped (counted in the answer's ``notes``). The task text is sent
whole: nothing is cut.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from bench.worfbench_calls import CallRecorder

__all__ = [
    "RUNNING",
    "RUNS",
    "VARIANTS",
    "Answer",
    "Variant",
    "label_text",
    "plan_answer",
    "planner_run",
    "task_of",
    "two_shot_messages",
    "two_shot_run",
    "variants_of",
]

RUNS = ("two-shot", "compact", "full")
TWO_SHOT_FILE = Path(__file__).resolve().parent / "data" / "worfbench_two_shot.json"
EXAMPLES_OF = {"seal_tools": "toolbench"}  # no two-shot examples of its own upstream
GENERATE_PHASE = "plan-generate"
REASK_PHASE = "plan-reask"

RUNNING: ContextVar[str] = ContextVar("worfbench_running", default="")
"""The run in progress (one of ``RUNS``), for a scripted model to answer in the run's form."""


@dataclass(frozen=True)
class Variant:
    """A row: which run it is read from, and which part of that run (``view``)."""

    name: str
    run: str
    view: str  # "two-shot", "single call", "re-asks off", "re-asks on"


VARIANTS = (
    Variant("two-shot, one call", "two-shot", "two-shot"),
    *(Variant(f"{p}: {what}", p, view) for p in ("compact", "full")
      for what, view in (("single call", "single call"), ("planner, re-asks off", "re-asks off"),
                         ("planner, re-asks on", "re-asks on"))),
)


def variants_of(runs: Sequence[str]) -> list[Variant]:
    """The rows that ``runs`` give, in table order."""
    return [v for v in VARIANTS if v.run in runs]


@dataclass
class Answer:
    """One variant's answer to one item: the text scored, and how many of its run's calls it is."""

    text: str
    ok: bool = True
    error: str = ""
    notes: list[str] = field(default_factory=list)
    steps: list[dict[str, Any]] = field(default_factory=list)
    calls: int = 0


@cache
def two_shot_examples() -> dict[str, list[dict[str, str]]]:
    """The two-shot prompt's worked examples, by task type: user and assistant turns."""
    data = json.loads(TWO_SHOT_FILE.read_text())
    return dict(data["two_shot_example"])


def two_shot_messages(item: dict[str, Any]) -> list[Any]:
    """WorFBench's two-shot prompt for ``item``: system turn, the examples, then the task."""
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    conv = item["conversations"]
    examples = two_shot_examples()[EXAMPLES_OF.get(item["source"], item["source"])]
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


def _steps_answer(steps: list[dict[str, Any]], calls: int) -> Answer:
    text, notes = plan_answer([(s["id"], s["description"], s["depends_on"]) for s in steps])
    return Answer(text, notes=notes, steps=steps, calls=calls)


# --------------------------------------------------------------------------- the two-shot run


async def two_shot_run(model: Any, item: dict[str, Any], recorder: CallRecorder,
                       capabilities: Sequence[Any]) -> tuple[dict[str, Any], dict[str, Answer]]:
    """The two-shot call: its run record (settings, calls) and its one answer."""
    token = RUNNING.set("two-shot")
    try:
        reply = await model.ainvoke(two_shot_messages(item))
        answer = Answer(str(reply.text))
    except Exception as exc:  # a transport or context-length failure is this variant's failure
        answer = Answer("", ok=False, error=f"{type(exc).__name__}: {exc}")
    finally:
        RUNNING.reset(token)
    calls = recorder.take()
    answer.calls = len(calls)
    settings = {"prompt": "WorFBench two-shot", "prompt_profile": None, "plan_syntax": "text",
                "plan_syntax_used": "text", "retries": 0, "capabilities": len(capabilities),
                "capabilities_passed_as": "the task text", "temperature": getattr(model, "temperature", None)}
    return {"settings": settings, "calls": calls}, {"two-shot, one call": answer}


# --------------------------------------------------------------------------- a planner run


def profile_settings(base: Any, profile: str) -> Any:
    """The run's planner settings: ``base`` under ``profile`` (the calls syntax needs compact)."""
    syntax = base.plan_syntax if not (profile == "full" and base.plan_syntax == "calls") else "json"
    return base.model_copy(update={"prompt_profile": profile, "plan_syntax": syntax})


def syntax_used(settings: Any, capabilities: Sequence[Any]) -> str:
    """The syntax a plan-generation call is written in: the planner's rule (``LLMPlanner._generation_call``)."""
    calls = settings.plan_syntax == "calls" and all(c.kind == "tool" and c.name.isidentifier() for c in capabilities)
    return "calls" if calls else "json"


async def planner_run(model: Any, settings: Any, profile: str, item: dict[str, Any], capabilities: Sequence[Any],
                      recorder: CallRecorder) -> tuple[dict[str, Any], dict[str, Answer]]:
    """One ``create_plan`` under ``profile`` with ``capabilities``: its run record and its three rows."""
    from bench.worfbench_examples import EXAMPLES_FROM, examples_as, planner_examples
    from soothe_planner.errors import PlannerError
    from soothe_planner.models import PlanContext
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.planner.calls import resolve_method

    examples = planner_examples(item)
    planner = LLMPlanner(model, settings=profile_settings(settings, profile).model_copy(
        update={"examples": examples, "examples_as": examples_as()}))
    ran = planner.settings  # resolved: what the planner itself will use
    record_settings = {
        "prompt": "planner", "prompt_profile": ran.prompt_profile, "plan_syntax": ran.plan_syntax,
        "plan_syntax_used": syntax_used(ran, capabilities), "retries": ran.retries,
        "max_plan_steps": ran.max_plan_steps, "prompt_budget_tokens": ran.prompt_budget_tokens,
        "structured_output_method": resolve_method(planner.model, ran.structured_output_method),
        "small_model_rules": planner.small_model, "capabilities": len(capabilities),
        "capabilities_passed_as": "PlanContext.available_capabilities",
        "temperature": getattr(model, "temperature", None),
        **({"examples": len(ran.examples), "examples_from": EXAMPLES_FROM.get(), "examples_as": ran.examples_as}
           if ran.examples else {}),
    }
    token = RUNNING.set(profile)
    try:
        plan = await planner.create_plan(task_of(item), PlanContext(available_capabilities=list(capabilities)))
        full: Answer = _steps_answer([_step(s.id, s.description, s.tool, s.args, s.depends_on) for s in plan.steps], 0)
    except PlannerError as exc:
        full = Answer("", ok=False, error=f"{type(exc).__name__}: {exc}")
    finally:
        RUNNING.reset(token)
    calls = recorder.take()
    full.calls = len(calls)
    stats = planner.stats.as_dict()
    before_reask = next((i for i, c in enumerate(calls) if c["phase"] == REASK_PHASE), len(calls))
    if stats["reask"] == 0:
        off = Answer(full.text, ok=full.ok, error=full.error, notes=full.notes, steps=full.steps, calls=before_reask)
    else:
        off = Answer("", ok=False, error="the first answer needed a re-ask", calls=before_reask)
    single = first_call_answer(calls, record_settings, capabilities)
    answers = {f"{profile}: single call": single, f"{profile}: planner, re-asks off": off,
               f"{profile}: planner, re-asks on": full}
    return {"settings": record_settings, "calls": calls, "planner_stats": stats}, answers


def _step(sid: str, description: str, tool: str | None, args: Any, depends_on: Sequence[str]) -> dict[str, Any]:
    return {"id": sid, "description": description, "tool": tool, "args": dict(args or {}), "depends_on": list(depends_on)}


def first_call_answer(calls: Sequence[dict[str, Any]], settings: dict[str, Any], capabilities: Sequence[Any]) -> Answer:
    """The run's first call read with no repair (see the module docstring): the single-call row."""
    if not calls or calls[0]["phase"] != GENERATE_PHASE:
        return Answer("", ok=False, error="the run made no plan-generation call", calls=min(1, len(calls)))
    first = calls[0]
    if first["error"]:
        return Answer("", ok=False, error=first["error"], calls=1)
    try:
        steps = _read_strictly(first, settings, capabilities)
    except Exception as exc:  # any reading failure is this row's failure; its text is in the call record
        return Answer("", ok=False, error=f"the first reply does not fit: {type(exc).__name__}: {exc}", calls=1)
    return _steps_answer(steps, 1)


def _read_strictly(call: dict[str, Any], settings: dict[str, Any], capabilities: Sequence[Any]) -> list[dict[str, Any]]:
    from soothe_planner.models import PlanContext
    from soothe_planner.parsing import read_plan_calls
    from soothe_planner.parsing.plan_steps import derived_description
    from soothe_planner.planner.generation import plan_schema
    from soothe_planner.wire import COMPACT_MODEL_STEP

    compact = settings["prompt_profile"] == "compact"
    max_steps = int(settings["max_plan_steps"])
    schema = plan_schema(PlanContext(available_capabilities=list(capabilities)), max_steps, False, compact=compact)
    if settings["plan_syntax_used"] == "calls":
        tools = {c.name for c in capabilities if c.kind == "tool"} | {COMPACT_MODEL_STEP}
        data, _ = read_plan_calls(call["text"], tool_schemas={c.name: c.args_schema for c in capabilities
                                                              if c.args_schema}, known_tools=tools, max_steps=max_steps)
    elif settings["structured_output_method"] == "function_calling":
        if not call["tool_calls"]:
            raise ValueError("no tool call in the reply")
        data = call["tool_calls"][0]
    else:
        data = json.loads(call["text"])
    parsed = schema.model_validate(data)
    return [_step(s.id, s.description.strip() or derived_description(s.tool, s.args), s.tool, s.args, s.depends_on)
            for s in parsed.steps]


# --------------------------------------------------------------------------- what each row ran


def labels(variant: Variant, run_records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What ``variant`` ran, over its items: read from each item's run record, never from its name."""
    settings = [r["settings"] for r in run_records]

    def values(key: str) -> list[Any]:
        return sorted({s.get(key) for s in settings}, key=str)

    used: dict[str, int] = {}
    for s in settings:
        used[str(s["plan_syntax_used"])] = used.get(str(s["plan_syntax_used"]), 0) + 1
    counts = [int(s["capabilities"]) for s in settings]
    reasks = "on" if variant.view == "re-asks on" and any(int(s["retries"]) > 0 for s in settings) else "off"
    return {
        "run": variant.run,
        "reading": {"two-shot": "the reply as written (official parser)", "single call": "first call, no repair",
                    "re-asks off": "planner, first answer", "re-asks on": "planner"}[variant.view],
        "prompt": values("prompt"),
        "profile": values("prompt_profile"),
        "plan_syntax": values("plan_syntax"),
        "plan_syntax_used": used,
        "capabilities_passed_as": values("capabilities_passed_as"),
        "capabilities_items": sum(1 for c in counts if c),
        "capabilities_per_item": sum(counts) / len(counts) if counts else 0.0,
        "reasks": reasks,
        "retries": values("retries"),
        "max_plan_steps": values("max_plan_steps"),
        "prompt_budget_tokens": values("prompt_budget_tokens"),
        "structured_output_method": values("structured_output_method"),
        "temperature": values("temperature"),
        "examples_items": sum(1 for s in settings if s.get("examples")),
        "examples_from": [v for v in values("examples_from") if v],
        "examples_as": [v for v in values("examples_as") if v],
        "items": len(settings),
    }


def label_text(label: dict[str, Any]) -> str:
    """A row's label in one line: profile · syntax · capabilities · re-asks."""
    profile = "/".join(str(p) for p in label["profile"] if p) or "none (two-shot prompt)"
    syntax = ", ".join(f"{k} {v}" for k, v in sorted(label["plan_syntax_used"].items()))
    where = "in the prompt text" if label["capabilities_passed_as"] == ["the task text"] else "as capabilities"
    caps = (f"tools {where} on {label['capabilities_items']}/{label['items']} items "
            f"({label['capabilities_per_item']:.1f} per item)")
    examples = ""
    if label.get("examples_items"):
        where = "/".join(label.get("examples_as") or ["briefing"])
        examples = f" · the two-shot prompt's examples ({where}) on {label['examples_items']} items"
    return (f"profile {profile} · syntax {syntax} · {caps}{examples} · re-asks {label['reasks']} · "
            f"{label['reading']}")


def as_dicts(answers: dict[str, Answer]) -> dict[str, dict[str, Any]]:
    return {k: asdict(a) for k, a in answers.items()}
