"""One LLM-call cap across real processes over PostgreSQL (``concurrency.backend: postgres``).

Three worker processes (``shared_cap_child.py``) build their runs through the server's graph
factory on configs that differ only in the model's name, all sharing one PostgreSQL for
checkpoints and for the cap. The model is a scripted OpenAI-compatible server in this test
process on 127.0.0.1: it answers each call after a fixed latency and records the call's start,
end, caller (the model name) and run (a marker in the goal). From that record, kept by the model
and not by the limiter:

- the calls in flight across all processes never exceed ``global_max_llm_calls``, and reach it;
- worker 0 is SIGKILLed while one of its calls is in flight: the rows it held carry an expiry
  at most ``lease_s`` after the kill (the database's clock), the other workers' runs all finish,
  and once those rows expired the others have the whole cap again;
- worker 0's runs are resumed by a fourth process: each continues its call count from the
  checkpoint and stops at the per-run budget (``max_total_llm_calls``), not at a fresh one.

Skipped, with the reason, when no PostgreSQL answers (``.ci/postgres.sh`` starts one).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from test_concurrency_shared import _dsn

pytestmark = [pytest.mark.postgres, pytest.mark.subprocess]

CHILD = Path(__file__).with_name("shared_cap_child.py")
WORKSPACE = Path(__file__).resolve().parents[1] / "examples" / "workspace"
CAP = 3
LEASE_S = 3.0
BUDGET = 9  # a long run: (assess, plan, step) x 3, then the budget stops it
LATENCY_S = 0.3
RUNS_PER_WORKER = 4
DEADLINE_S = 150.0  # a hang guard only; nothing asserts on speed
RUN_MARK = re.compile(r"\[run ([\w-]+)\]")


@dataclass
class Call:
    caller: str
    run: str
    schema: str
    start: float
    end: float = 0.0


@dataclass
class ModelServer:
    """The scripted model: short runs are done after two steps; long runs never are."""

    calls: list[Call] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    in_call: dict[str, int] = field(default_factory=dict)
    steps: dict[str, int] = field(default_factory=dict)
    serial: int = 0

    def reply(self, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        text = json.dumps(body.get("messages"))
        found = RUN_MARK.search(text)
        run = found.group(1) if found else "?"
        tools = body.get("tools") or []
        schema = tools[0]["function"]["name"] if tools else "text"
        with self.lock:
            self.serial += 1
            serial = self.serial
            if schema == "text":
                self.steps[run] = self.steps.get(run, 0) + 1
            steps = self.steps.get(run, 0)
        if schema == "AssessStatus":
            done = run.startswith("short") and steps >= 2
            return schema, {"status": "done" if done else "continue", "goal_progress": 1.0 if done else 0.3,
                            "confidence": 0.9, "summary": "two steps ran" if done else "more to do"}
        if schema == "GeneratePlan":
            return schema, {"plan_action": "new", "execution_mode": "sequential", "next_action": "work",
                            "steps": [{"id": f"s{serial}", "description": f"Work on the goal [run {run}]"}]}
        return schema, {"text": "worked: ok"}


def _handler(model: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            caller = str(body.get("model"))
            schema, reply = model.reply(body)
            run = (RUN_MARK.search(json.dumps(body.get("messages"))) or [None, "?"])[1]
            call = Call(caller, str(run), schema, time.time())
            with model.lock:
                model.calls.append(call)
                model.in_call[caller] = model.in_call.get(caller, 0) + 1
            time.sleep(LATENCY_S)
            call.end = time.time()
            with model.lock:
                model.in_call[caller] -= 1
            if schema == "text":
                message: dict[str, Any] = {"role": "assistant", "content": reply["text"]}
            else:
                message = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": schema, "arguments": json.dumps(reply)}}]}
            data = json.dumps({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": caller,
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }).encode()
            try:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # its caller was killed mid-call

    return Handler


@pytest.fixture
def model_server() -> Iterator[tuple[ModelServer, str]]:
    model = ModelServer()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(model))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield model, f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def _peak(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


def _config(tmp: Path, name: str, url: str, dsn: str, scope: str) -> Path:
    config = {
        "models": {"base_url": url, "default": f"openai:{name}"},
        "planner": {"max_iterations": 8, "transport_backoff_s": 0, "retries": 1},
        "concurrency": {"backend": "postgres", "scope": scope, "lease_s": LEASE_S,
                        "global_max_llm_calls": CAP, "max_total_llm_calls": BUDGET},
        "execution": {"workspace": str(WORKSPACE), "tools": ["builtin:list_dir"]},
        "checkpoint": {"backend": "postgres", "dsn": dsn},
        "run": {"synthesize": False, "intake": False, "approval": False},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(json.dumps(config))
    return path


def _env(config: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LANGFUSE_", "LANGSMITH_", "SOOTHE_SCRIPTED"))}
    env.update(LANGGRAPH_STRICT_MSGPACK="true", OPENAI_API_KEY="unused-by-the-scripted-server",
               SOOTHE_CONFIG=str(config), PYTHONPATH=os.pathsep.join([str(CHILD.parent.parent), env.get("PYTHONPATH", "")]))
    return env


def _start(config: Path, dsn: str, mode: str, runs: list[str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(CHILD), dsn, mode, *runs], env=_env(config), text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _until(predicate: Any, what: str, procs: list[subprocess.Popen[str]]) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        for p in procs:
            if p.poll() is not None and p.returncode != 0:
                pytest.fail(f"a worker exited with {p.returncode} while waiting for {what}:\n{p.stderr.read()[-3000:]}")  # type: ignore[union-attr]
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def _outcomes(proc: subprocess.Popen[str]) -> dict[str, dict[str, Any]]:
    out, err = proc.communicate(timeout=DEADLINE_S)
    assert proc.returncode == 0, err[-3000:]
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return {o["thread"]: o for o in lines}


def _rows_of(dsn: str, scope: str, pid: int) -> tuple[list[tuple[int, float]], float]:
    import psycopg

    with psycopg.connect(dsn) as conn:
        now = conn.execute("SELECT extract(epoch FROM now())").fetchone()[0]  # type: ignore[index]
        rows = conn.execute(
            "SELECT slot, extract(epoch FROM expires_at) FROM soothe_llm_slots WHERE scope = %s AND holder LIKE %s",
            (scope, f"%:{pid}:%"),
        ).fetchall()
    return [(int(r[0]), float(r[1])) for r in rows], float(now)


def test_three_processes_share_one_cap_a_killed_one_gives_its_slots_back_and_budgets_survive_a_resume(
    model_server: tuple[ModelServer, str], tmp_path: Path,
) -> None:
    dsn = _dsn()
    model, url = model_server
    scope = f"procs-{uuid.uuid4().hex[:8]}"
    tag = uuid.uuid4().hex[:6]  # thread ids stay unique in a database kept between runs
    names = ["worker-0", "worker-1", "worker-2"]
    runs: dict[str, list[str]] = {
        name: [f"{tag}-{name}-{i}:Say what the workspace holds [run {'long' if name == 'worker-0' else 'short'}"
               f"-{name}-{i}]" for i in range(RUNS_PER_WORKER)]
        for name in names
    }
    workers = [_start(_config(tmp_path, name, url, dsn, scope), dsn, "run", runs[name]) for name in names]
    procs = list(workers)
    resumer: subprocess.Popen[str] | None = None
    try:
        for w in workers:
            assert w.stdout is not None and w.stdin is not None
            line = w.stdout.readline()
            assert line.strip() == "ready", f"{line!r}\n{w.stderr.read()[-3000:] if w.poll() is not None else ''}"  # type: ignore[union-attr]
        for w in workers:
            w.stdin.write("go\n")  # type: ignore[union-attr]
            w.stdin.flush()  # type: ignore[union-attr]

        # Kill worker 0 mid-call, once some of its runs have checkpointed a few calls.
        victim = workers[0]

        def mid_call() -> bool:
            with model.lock:
                done = sum(1 for c in model.calls if c.caller == "worker-0" and c.end)
                return done >= 4 and model.in_call.get("worker-0", 0) > 0

        _until(mid_call, "a call of worker 0 in flight", procs)
        os.kill(victim.pid, signal.SIGKILL)
        killed_at = time.time()
        victim.wait()
        dead_rows, db_now = _rows_of(dsn, scope, victim.pid)

        survivors = {}
        for w in workers[1:]:
            survivors.update(_outcomes(w))
        finished_at = time.time()

        # worker 0's runs, resumed by another process on the same database and cap
        resumer = _start(_config(tmp_path, "resumer", url, dsn, scope), dsn, "resume", runs["worker-0"])
        procs.append(resumer)
        resumed = _outcomes(resumer)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()

    calls = list(model.calls)
    print(f"\n{len(calls)} calls; worker 0 held slots {[s for s, _ in dead_rows]} when killed; "
          f"their leases ran {[round(e - db_now, 2) for _, e in dead_rows]} s past the kill")

    # 1. the cap held across processes, and was reached
    assert _peak([(c.start, c.end) for c in calls]) == CAP

    # 2. the killed worker held a slot, and its leases end within lease_s of the kill
    assert dead_rows, "worker 0 held no slot when it was killed mid-call"
    assert all(expiry <= db_now + LEASE_S + 0.01 for _, expiry in dead_rows)
    assert [o["status"] for o in survivors.values()] == ["done"] * 2 * RUNS_PER_WORKER, survivors
    # once the dead worker's leases had expired, the others ran the whole cap again
    expired_at = max(expiry for _, expiry in dead_rows)
    after = [(c.start, c.end) for c in calls if c.caller != "worker-0" and c.caller != "resumer"
             and c.start >= expired_at and c.start <= finished_at]
    assert after, "the other workers had no calls left once the leases expired; the take-over was not tested"
    assert _peak(after) == CAP
    assert killed_at < expired_at

    # 3. each resumed run went on from its checkpointed count and stopped at the run's budget
    resumed_runs = {t: o for t, o in resumed.items() if o["status"] != "nothing to resume"}
    assert resumed_runs, resumed
    assert any(o["spent_before"] > 0 for o in resumed_runs.values()), resumed
    for thread, outcome in resumed_runs.items():
        run = RUN_MARK.search(next(r for r in runs["worker-0"] if r.startswith(thread + ":"))).group(1)  # type: ignore[union-attr]
        by_resumer = sum(1 for c in calls if c.caller == "resumer" and c.run == run)
        assert outcome["status"] == "failed" and "budget" in (outcome["error"] or ""), outcome
        assert outcome["llm_calls"] == BUDGET
        assert outcome["spent_before"] + by_resumer == BUDGET, (outcome, by_resumer)
