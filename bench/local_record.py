"""Which requests does the loop send on real goals, and what did the model itself answer?

``python -m bench local --record`` runs chosen goals of the goal suites (``bench/goals_suite.py``)
through the real StrangeLoop on a chat model — the ``ours`` strategy of ``bench goals``, the
shipped config with ``models.default`` set to ``--model`` — and keeps every request the loop sends
with the model's own reply, in the order sent, into a JSON file under ``bench/data/``. Nothing is
canned: each later request carries what the model's earlier replies made the loop do, so an
assessment sees the evidence a real run produced, a replan follows a real failure.

How a request is caught: the run's model is the one the run would build (``ModelPool``), its HTTP
clients given a transport that passes each request on — to the embedded server the pool started,
as a CLI run starts it, or, in a test, to a scripted function — and records the body (messages,
tools or ``response_format``, the plan's ``grammar``), the reply and the wall time. The kind of
each call (``local_calls.kind_of``) is named from its schema or its system prompt.

Per goal the file keeps the suite, id, goal text and checks, and how the run was judged (the
suite's outcome, status, reason); per call what the replay's judge needs (``expect``, derived
here, after the run, by ``local_expect.expectations``): the status an assessment should have, the
items a step was given that the goal needs, and for a plan the state the planner's own validator
saw (the DAG so far, the deliverable, the step cap). The file carries its provenance (commit,
model file digest, date: ``bench/provenance.py``). Temporary paths of the run are written as
``<workspace>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from bench._common import REPO_ROOT, scoped_environ
from bench.local_calls import kind_of

__all__ = ["DATA_DIR", "DEFAULT_GOALS", "Answer", "Tape", "record", "recording_model", "reply_text", "write_recording"]

DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_RECORDING = DATA_DIR / "local_recording.json"
SUITES_DIR = REPO_ROOT.parent / "shared" / "data"
DEFAULT_GOALS = (
    # one iteration and done, and runs that went on (continue, replan) before they were done, in the
    # 1.5B's suite runs (bench/results/goals-head-1x.json, goals-crosscheck-3x.json)
    "goals/todo-report", "goals/install-command", "goals/meta-file",
    "goals-harbor/backup-failure-contact", "goals-harbor/release-info",
    "goals-fieldnotes/contact-card", "goals-fieldnotes/action-lines",
)
"""``suite/goal`` of the goals recorded by default: 7 goals of 3 visible suites."""
MIN_GOALS, MIN_SUITES = 5, 2
FORMAT = 1
_KINDS = {"DeclareDeliverable": "deliverable"}
_NOWHERE = "http://127.0.0.1:9/v1"  # a scripted recording answers itself; nothing listens here

Answer = Callable[[dict[str, Any]], dict[str, Any]]
"""A scripted model: a request body → its ``chat.completion`` reply."""


def reply_text(message: dict[str, Any]) -> str:
    """What a reply says, as a streamed replay collects it: its text, then its tool calls' arguments."""
    text = str(message.get("content") or "")
    for call in message.get("tool_calls") or []:
        text += str((call.get("function") or {}).get("arguments") or "")
    return text


class Tape:
    """The calls of the goal being recorded, in the order sent; ``validator`` is the planner's last plan check."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.validator: dict[str, Any] | None = None

    def add(self, body: dict[str, Any], reply: dict[str, Any], seconds: float) -> None:
        kind = kind_of(body)
        kind = _KINDS.get(kind, kind)
        message = ((reply.get("choices") or [{}])[0]).get("message") or {}
        call = {"index": len(self.calls), "kind": kind, "body": body,
                "reply": {"text": reply_text(message), "message": message,
                          "finish_reason": ((reply.get("choices") or [{}])[0]).get("finish_reason")},
                "usage": reply.get("usage"), "seconds": round(seconds, 3)}
        if kind == "generate" and self.validator is not None:
            call["validator"] = self.validator
        self.calls.append(call)


def _completion(content: bytes) -> dict[str, Any]:
    """A server's reply as a ``chat.completion``; a streamed one (server-sent events) as the text it carried."""
    try:
        data: dict[str, Any] = json.loads(content)
        return data
    except ValueError:
        from bench.local_servers import _output_of

        lines = [line[6:].strip() for line in content.decode("utf-8", "replace").splitlines() if line.startswith("data: ")]
        text = "".join(_output_of(json.loads(line))[0] for line in lines if line and line != "[DONE]")
        return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": None}], "streamed": True}


class _Recorder(httpx.BaseTransport, httpx.AsyncBaseTransport):
    """Each chat request answered by ``answer`` (scripted) or passed on to the server, and put on ``tape``."""

    def __init__(self, tape: Tape, answer: Answer | None) -> None:
        self.tape, self.answer = tape, answer
        self._sync = httpx.HTTPTransport() if answer is None else None
        self._async = httpx.AsyncHTTPTransport() if answer is None else None

    def _keep(self, request: httpx.Request, status: int, content: bytes, started: float,
              content_type: str = "application/json") -> httpx.Response:
        if status == 200 and request.url.path.endswith("/chat/completions"):
            self.tape.add(json.loads(request.content), _completion(content), time.perf_counter() - started)
        return httpx.Response(status, content=content, headers={"content-type": content_type})

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = time.perf_counter()
        if self.answer is not None:
            return self._keep(request, 200, json.dumps(self.answer(json.loads(request.content))).encode(), started)
        assert self._sync is not None
        response = self._sync.handle_request(request)
        return self._keep(request, response.status_code, response.read(), started,
                          response.headers.get("content-type", "application/json"))

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        started = time.perf_counter()
        if self.answer is not None:
            return self._keep(request, 200, json.dumps(self.answer(json.loads(request.content))).encode(), started)
        assert self._async is not None
        response = await self._async.handle_async_request(request)
        return self._keep(request, response.status_code, await response.aread(), started,
                          response.headers.get("content-type", "application/json"))


def recording_model(config: Any, tape: Tape, answer: Answer | None = None) -> Any:
    """The run's own model for ``config``, built as a run builds it, every request going through the tape.

    With ``answer`` (a scripted model) no server is started; without it the pool starts the
    embedded server as a CLI run does (or uses ``SOOTHE_LOCAL_LLM_URL``, a server already running).
    """
    from soothe_planner.config import SCRIPTED_MODEL_ENV, ModelPool
    from soothe_planner.local import LOCAL_URL_ENV

    env = {LOCAL_URL_ENV: _NOWHERE, SCRIPTED_MODEL_ENV: None} if answer is not None else {SCRIPTED_MODEL_ENV: None}
    with scoped_environ(**env):
        built = ModelPool(config).get()
    clients = {"client", "async_client", "root_client", "root_async_client", "http_client", "http_async_client"}
    fields = {name: getattr(built, name) for name in built.model_fields_set if name not in clients}
    transport = _Recorder(tape, answer)
    return type(built)(**fields, http_client=httpx.Client(transport=transport),
                       http_async_client=httpx.AsyncClient(transport=transport))


@contextlib.contextmanager
def _plan_checks_seen(tape: Tape) -> Iterator[None]:
    """While recording, every plan check the planner builds is also kept on ``tape`` (as data), for the judge."""
    from soothe_planner.planner import llm_planner

    real = llm_planner.decision_validator

    def spy(goal: str, context: Any, pm: Any, deliverable: Any = None, **flags: Any) -> Any:
        tape.validator = {
            "goal": goal,
            "context": context.model_copy(update={"workspace": None, "thread_id": None}).model_dump(mode="json"),
            "plan": pm.to_dict() if pm is not None else None,
            "deliverable": deliverable.model_dump(mode="json") if deliverable is not None else None,
            **flags,
        }
        return real(goal, context, pm, deliverable, **flags)

    llm_planner.decision_validator = spy
    try:
        yield
    finally:
        llm_planner.decision_validator = real


# --------------------------------------------------------------------------- choosing goals


@dataclass(frozen=True)
class Chosen:
    suite: Any  # goals_suite.Suite
    goal: Any  # goals_suite.Goal


def choose(names: Sequence[str], suites_dir: Path = SUITES_DIR) -> list[Chosen]:
    """``suite/goal`` names (a suite by its folder under ``suites_dir``, or a path) → the goals, in order.

    At least ``MIN_GOALS`` goals of at least ``MIN_SUITES`` suites: fewer say little of a kind of call.
    """
    from bench.goals_suite import SuiteError, load_suite

    loaded: dict[str, Any] = {}
    chosen: list[Chosen] = []
    for name in names:
        folder, _, gid = name.strip().rpartition("/")
        if not folder or not gid:
            raise SuiteError(f"--goals: {name!r} is not SUITE/GOAL (e.g. goals-harbor/release-info)")
        path = Path(folder) if ("/" in folder or Path(folder).is_dir()) else suites_dir / folder
        if folder not in loaded:
            loaded[folder] = load_suite(path)
        (goal,) = loaded[folder].select([gid])
        chosen.append(Chosen(loaded[folder], goal))
    suites = {c.suite.name for c in chosen}
    if len(chosen) < MIN_GOALS or len(suites) < MIN_SUITES:
        raise SuiteError(f"--goals: {len(chosen)} goal(s) of {len(suites)} suite(s); a recording needs at least "
                         f"{MIN_GOALS} goals of at least {MIN_SUITES} suites")
    return chosen


# --------------------------------------------------------------------------- the recording


def recording_config(model: str, *, profile: str = "auto", method: str = "auto", syntax: str = "auto") -> Any:
    """The shipped config (read as a run in a folder without ``soothe.yaml`` reads it) on ``model``."""
    from soothe_planner.config import find_config

    with tempfile.TemporaryDirectory(prefix="bench-record-") as empty:
        shipped = find_config(cwd=Path(empty))
    planner = {k: v for k, v in (("prompt_profile", profile), ("structured_output_method", method),
                                 ("plan_syntax", syntax)) if v != "auto"}
    return shipped.model_copy(update={"models": shipped.models.model_copy(update={"default": model}),
                                      "planner": shipped.planner.model_copy(update=planner)})


async def _record_goals(chosen: Sequence[Chosen], config: Any, answer: Answer | None,
                        max_seconds: float | None, echo: bool) -> list[dict[str, Any]]:
    from bench.goals import run_goal
    from bench.local_expect import expectations

    out = []
    for c in chosen:
        tape = Tape()
        model = recording_model(config, tape, answer)
        with _plan_checks_seen(tape):
            record = await run_goal(c.goal, c.suite, "ours", config, model, max_seconds)
        entry = {"suite": c.suite.name, "id": c.goal.id, "goal": c.goal.text,
                 "checks": [_check_data(ch) for ch in c.goal.checks], "expect_goal": c.goal.expect,
                 "outcome": record["outcome"], "status": record["status"], "reason": record["reason"],
                 "iterations": record["detail"].get("iterations"), "wall_s": record["wall_s"], "calls": tape.calls}
        expectations(entry)
        out.append(entry)
        if echo:
            statuses = [" or ".join(x["expect"]["status"]) for x in tape.calls if x["kind"] == "assess"]
            print(f"· {c.suite.name}/{c.goal.id}: {record['outcome']}, {len(tape.calls)} calls; "
                  f"assessments should be: {', '.join(statuses) or 'none asked'}", flush=True)
    return out


def _check_data(check: Any) -> dict[str, Any]:
    return {"kind": check.kind, "strings": list(check.strings), "pattern": check.pattern, "path": check.path}


def record(chosen: Sequence[Chosen], model: str, *, answer: Answer | None = None, max_seconds: float | None = None,
           echo: bool = False, **planner: str) -> dict[str, Any]:
    """Run ``chosen`` on ``model`` (scripted by ``answer``, else the real one) and return the recording."""
    config = recording_config(model, **planner)
    try:
        goals = asyncio.run(_record_goals(chosen, config, answer, max_seconds, echo))
    finally:
        if answer is None:
            from soothe_planner.local.embedded import shutdown_shared_server

            shutdown_shared_server()
    return {"format": FORMAT, "model": model, "scripted": answer is not None,
            "planner": {"prompt_profile": config.planner.prompt_profile, "plan_syntax": config.planner.plan_syntax,
                        "structured_output_method": config.planner.structured_output_method},
            "goals": goals}


_TEMP = re.compile(re.escape(tempfile.gettempdir()) + r"/goal-[^/\"\s\\]*/workspace")


def write_recording(recording: dict[str, Any], path: Path, *, model_file: Path | None = None) -> Path:
    """Write ``recording`` with its provenance; temporary paths of the runs become ``<workspace>``."""
    from bench import provenance

    settings = {k: recording[k] for k in ("model", "scripted", "planner")}
    meta = {"provenance": provenance.collect(settings=settings, model_file=model_file)}
    text = json.dumps({**meta, **recording}, indent=1, ensure_ascii=False)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_TEMP.sub("<workspace>", text) + "\n")
    return path


def load_recording(path: Path) -> dict[str, Any]:
    """A recording written by ``write_recording``; a missing or foreign file is a ``SystemExit`` saying so."""
    if not path.is_file():
        raise SystemExit(f"no recording at {path.name}: record one first (python -m bench local --record)")
    data: dict[str, Any] = json.loads(path.read_text())
    if data.get("format") != FORMAT or not data.get("goals"):
        raise SystemExit(f"{path.name}: not a recording of this format (record one with --record)")
    return data
