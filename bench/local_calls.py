"""Which requests does the loop send to the embedded model, exactly, in one run of a goal?

The requests are not written here: the package writes them. One goal is run through the real
StrangeLoop — the graph the shipped config builds (``find_config`` as shipped, ``resolve_run``,
``ResolvedRun.graph``), on a small workspace written here with the real built-in tools — on the
embedded model's own client (``models.default`` resolved by ``ModelPool`` as a run resolves it,
with its HTTP transport replaced by a recorder). The recorder keeps every request body and
answers it with a canned reply, so what it holds is byte for byte what the loop would send to
the server; the benchmark replays those bodies, streamed, to real servers.

The goal — summarise the workspace's TODO lines by file into a named report — makes one run
send each kind of call once, in the loop's order: intake (turned on here; the shipped config
skips it), generate (the first plan: search, a model step that summarises, a write), the model
step, assess (after the plan ran: "done") and synthesis (the final answer; a plan ending in a
write is not its own answer; turned on here too, as a provider config has it: the shipped config
makes no final-answer call on the embedded model). A capture that sends any other sequence is an error naming what
was sent, so a change of the loop's policy shows here instead of skewing the figures.

A *variant* is another run: the report's name in the goal and one more TODO file in the
workspace change, nothing else. So two variants of one kind share what the loop's prompts share
across runs — system prompt, tool schema, the start of the human turn — and never a whole
prompt: a server can reuse exactly that prefix and no more.

The replies here are canned, so what the later calls see is not what a model's own replies would
have made the loop send; ``local_record.py`` records real runs of suite goals with the model's own
replies, for ``--replay``.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from bench._common import scoped_environ

__all__ = ["CALL_KINDS", "Call", "capture_calls", "goal_for", "is_calls_plan_request", "report_named", "text_of",
           "write_workspace"]

CALL_KINDS = ("intake", "generate", "step", "assess", "crosscheck", "synthesis")
"""The kinds of call, in the order one run of the loop sends them."""

_NOWHERE = "http://127.0.0.1:9/v1"  # the recorder answers; nothing listens here
_WORKSPACE = {
    "README.md": "# notes-tool\n\nA small tool that keeps notes.\n\nTODO: document the --dry-run flag\n",
    "docs/roadmap.md": "# Roadmap\n\n- TODO: decide on the release date for 1.0\n- [ ] TODO publish the benchmark numbers\n",
    "ideas.txt": "a plain-text export\nTODO try a smaller model for the intake step\n",
    "src/notes.py": ('"""Notes."""\n\n\ndef load(path):\n    # TODO: handle empty input files\n'
                     "    with open(path) as fh:\n        return fh.read()\n"),
}
_STRUCTURED = {"RouteIntake": "intake", "GeneratePlan": "generate", "AssessStatus": "assess", "CrossCheck": "crosscheck"}


@dataclass(frozen=True)
class Call:
    """One request of one kind, as the loop sends it."""

    kind: str
    body: dict[str, Any]


_REPORT = re.compile(r"TODO_SUMMARY[_0-9]*\.md")


def goal_for(variant: int) -> str:
    """The goal of run ``variant``: the same request, a report of its own."""
    return _goal("TODO_SUMMARY.md" if variant == 0 else f"TODO_SUMMARY_{variant + 1}.md")


def _goal(report: str) -> str:
    return f"Summarise the TODO lines of the workspace by file in {report}"


def text_of(messages: list[dict[str, Any]], role: str | None = None) -> str:
    """The contents of ``messages`` (only those of ``role``, if given), one after another."""
    return "\n".join(str(m.get("content") or "") for m in messages if role is None or m.get("role") == role)


def report_named(messages: list[dict[str, Any]]) -> tuple[str, str] | None:
    """``(goal, report)`` of the run whose request holds ``messages``, or None if they name no report."""
    found = _REPORT.search(text_of(messages))
    return None if found is None else (_goal(found[0]), found[0])


def write_workspace(folder: Path, variant: int) -> None:
    """The small project the goal runs on; variant ``v`` adds ``notes/run-v.md`` with one TODO."""
    files = {**_WORKSPACE, f"notes/run-{variant}.md": f"TODO: check the exit code of run {variant + 1}\n"}
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


# --------------------------------------------------------------------------- the canned replies


def _calls_plan(report: str) -> str:
    return ('s1 = search_text(pattern="TODO", path=".")\n'
            's2 = answer(s1, task="Summarise the TODO lines by file")\n'
            f's3 = write_file(path="{report}", content=s2)\n')


def is_calls_plan_request(body: dict[str, Any]) -> bool:
    """A plan asked for in the calls syntax: a text request whose briefing asks for one Python call per step."""
    system = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "system"), "") or ""
    return not body.get("tools") and system.startswith("You write a plan as Python")


def _plan(compact: bool, report: str) -> dict[str, Any]:
    search = {"id": "s1", "tool": "search_text", "args": {"pattern": "TODO", "path": "."}, "depends_on": []}
    task = "Summarise the TODO lines by file"
    summarise = {"id": "s2", "tool": "answer", "args": {"task": task}, "depends_on": ["s1"]}
    write = {"id": "s3", "tool": "write_file", "args": {"path": report, "content": "{{s2.output}}"},
             "depends_on": ["s2"]}
    if compact:
        return {"steps": [search, summarise, write]}
    full = [{**search, "description": "Search the workspace for TODO"},
            {"id": "s2", "description": task, "tool": None, "args": {}, "depends_on": ["s1"]},
            {**write, "description": f"Write the summary to {report}"}]
    return {"plan_action": "new", "execution_mode": "dependency", "next_action": "Search for TODO.", "steps": full}


def _structured_answer(name: str, schema: dict[str, Any], messages: list[dict[str, Any]]) -> dict[str, Any]:
    if name == "RouteIntake":
        return {"route": "complex", "answer": ""}
    if name == "DeclareDeliverable":
        named = report_named(messages)
        return {"kind": "file", "files": [named[1] if named else "TODO_SUMMARY.md"], "answer_is": "text",
                "parts": ["the TODO lines by file"],
                "every_match": False, "count_of": ""}
    if name == "CrossCheck":  # the blind second reading of a small model's "done": a TODO line, as the search found it
        found = [line.split(": ", 1)[-1] for line in text_of(messages, "user").splitlines() if "TODO" in line and ": " in line]
        return {"values": found[:1]}
    if name == "AssessStatus":
        return {"status": "done", "goal_progress": 1.0, "confidence": 0.9,
                "summary": "The summary was written to the report file."}
    named = report_named(messages)
    return _plan("plan_action" not in schema.get("properties", {}), named[1] if named else "TODO_SUMMARY.md")


def kind_of(body: dict[str, Any]) -> str:
    """Which kind of call a recorded request is: its structured schema's name, else its system prompt."""
    from soothe_planner.execution.steps import MODEL_STEP_SYSTEM

    tools = body.get("tools") or []
    fmt = body.get("response_format") or {}
    name = tools[0]["function"]["name"] if tools else (fmt.get("json_schema") or {}).get("name", "")
    if name:
        return _STRUCTURED.get(name, name)
    if is_calls_plan_request(body):
        return "generate"
    system = next((m.get("content") for m in body.get("messages", []) if m.get("role") == "system"), "")
    return "step" if system == MODEL_STEP_SYSTEM else "synthesis"


def reply(body: dict[str, Any]) -> dict[str, Any]:
    """A canned ``chat.completion`` for ``body``: the run's one plan, "done", and short texts."""
    tools = body.get("tools") or []
    fmt = body.get("response_format") or {}
    messages = body.get("messages") or []
    message: dict[str, Any] = {"role": "assistant", "content": "The TODO lines are summarised by file in the report."}
    if kind_of(body) == "step":
        data = text_of(messages, "user")
        message["content"] = "\n".join(line for line in data.splitlines() if "TODO" in line and ":" in line)
    elif is_calls_plan_request(body):
        named = report_named(messages)
        message["content"] = _calls_plan(named[1] if named else "TODO_SUMMARY.md")
    elif tools:
        fn = tools[0]["function"]
        args = json.dumps(_structured_answer(fn["name"], fn.get("parameters") or {}, messages))
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": fn["name"], "arguments": args}}]}
    elif fmt.get("type") == "json_schema":
        spec = fmt["json_schema"]
        message["content"] = json.dumps(_structured_answer(spec["name"], spec.get("schema") or {}, messages))
    return {"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}


# --------------------------------------------------------------------------- the recorded run


def _recording_model(config: Any, seen: list[dict[str, Any]]) -> Any:
    """The run's own model for ``config`` (built as a run builds it), its HTTP sent to the recorder."""
    import httpx

    from soothe_planner.config import SCRIPTED_MODEL_ENV, ModelPool
    from soothe_planner.local import LOCAL_URL_ENV

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        seen.append(body)
        return httpx.Response(200, json=reply(body))

    # The URL pointer makes the pool build the embedded model's client without starting a server.
    with scoped_environ(**{LOCAL_URL_ENV: _NOWHERE, SCRIPTED_MODEL_ENV: None}):
        built = ModelPool(config).get()
    clients = {"client", "async_client", "root_client", "root_async_client", "http_client", "http_async_client"}
    fields = {name: getattr(built, name) for name in built.model_fields_set if name not in clients}
    return type(built)(**fields, http_client=httpx.Client(transport=httpx.MockTransport(handler)),
                       http_async_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)))


async def _run(variant: int, model: str, profile: str, method: str, syntax: str) -> list[dict[str, Any]]:
    from soothe_planner.config import CheckpointConfig, find_config, resolve_persistence, resolve_run
    from soothe_planner.graph import goal_input, run_config

    with tempfile.TemporaryDirectory(prefix="bench-local-") as tmp:
        workspace = Path(tmp)
        write_workspace(workspace, variant)
        shipped = find_config(cwd=workspace)  # no soothe.yaml there: the shipped config, anchored here
        config = shipped.model_copy(update={
            "models": shipped.models.model_copy(update={"default": model}),
            "planner": shipped.planner.model_copy(update={"prompt_profile": profile, "plan_syntax": syntax,
                                                          "structured_output_method": method}),
            "run": shipped.run.model_copy(update={"intake": True, "synthesize": True, "approval": False}),
            "checkpoint": CheckpointConfig(backend="memory"),
        })
        seen: list[dict[str, Any]] = []
        resolved = resolve_run(config, _recording_model(config, seen))
        async with resolve_persistence(config) as persistence:
            graph = resolved.graph(checkpointer=persistence.checkpointer, store=persistence.store)
            thread = f"bench-local-{variant}"
            options: Any = run_config(thread, config.planner.max_iterations)  # a RunnableConfig
            # the goal's file is given as its deliverable, as a caller who knows it would: the scenario
            # times the plan, step and assessment calls, not the declaration (one more short call)
            named = report_named([{"role": "user", "content": goal_for(variant)}])
            deliverable = f"file:{named[1]}" if named else None
            values = await graph.ainvoke(goal_input(goal_for(variant), thread_id=thread, deliverable=deliverable),
                                         options)
        if values.get("status") != "done":
            raise RuntimeError(f"the recorded run ended {values.get('status')!r}: {values.get('error')}")
        return seen


@lru_cache(maxsize=64)
def _captured(variant: int, model: str, profile: str, method: str, syntax: str) -> tuple[Call, ...]:
    bodies = asyncio.run(_run(variant, model, profile, method, syntax))
    calls = tuple(Call(kind_of(b), b) for b in bodies)
    sent = tuple(c.kind for c in calls)
    if sent != CALL_KINDS:
        raise RuntimeError(f"one run of the loop sent {list(sent)}, the benchmark expects {list(CALL_KINDS)}: "
                           "the loop's policy changed, so bench/local_calls.py's scenario must follow it")
    return calls


def capture_calls(variant: int = 0, *, model: str = "local", prompt_profile: str = "compact",
                  structured_output_method: str = "function_calling", plan_syntax: str = "auto") -> list[Call]:
    """The six requests of ``CALL_KINDS`` of run ``variant``, in the order the loop sent them.

    ``model`` is a ``models.default`` string (``local``, ``local:1.5b``): the requests carry its
    name and its client's settings. The planner runs with ``prompt_profile`` and
    ``structured_output_method`` and ``plan_syntax``; everything else is the shipped config's.
    """
    return list(_captured(variant, model, prompt_profile, structured_output_method, plan_syntax))
