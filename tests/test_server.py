"""The real LangGraph server: ``langgraph dev`` on 127.0.0.1, driven by ``langgraph-sdk``, then stopped.

The server loads the graph named in the repository's ``langgraph.json`` (``make_graph``), with its
blocking-call guard on (no ``--allow-blocking``), on a scripted model that takes 0.3 s a call and
writes each call's start and end to a log of its own. Checked through the SDK: the input, output
and context schemas; two runs at once on a config with ``global_max_llm_calls: 1`` never overlap
model calls (the peak is read from the model's log, not from the limiter); the approval gate
pauses and resumes with ``Command(resume=...)``; the final states are ``done``. The server needs
no network beyond 127.0.0.1: its analytics, version check and tracing are switched off.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph_api", reason="needs langgraph-cli[inmem] (the dev extra)")
sdk = pytest.importorskip("langgraph_sdk", reason="needs langgraph-sdk (the dev extra)")

pytestmark = pytest.mark.subprocess

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE = ROOT / "examples" / "workspace"
LATENCY_S = 0.3
RUNS = 3  # two concurrent runs and one with approval
STEP = {"id": "answer", "description": "Say what the workspace holds"}
PLAN = {"plan_action": "new", "execution_mode": "sequential", "next_action": "answer", "steps": [STEP]}
DONE = {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "answered"}
SCRIPT = {
    "replies": {"GeneratePlan": [PLAN] * RUNS, "AssessStatus": [DONE] * RUNS, "text": ["It holds notes."] * RUNS},
    "latency_s": LATENCY_S,
    "call_log": "calls.jsonl",
}
QUIET = {  # no analytics, no version check against the package index, no tracing
    "LANGGRAPH_CLI_NO_ANALYTICS": "1",
    "LANGGRAPH_NO_VERSION_CHECK": "true",
    "LANGSMITH_TRACING": "false",
    "LANGCHAIN_TRACING_V2": "false",
}
DROPPED = ("LANGSMITH_API_KEY", "LANGCHAIN_API_KEY", "LANGGRAPH_CLOUD_LICENSE_KEY", "LANGGRAPH_STRICT_MSGPACK",
           "SOOTHE_SCRIPTED_MODEL")  # fmt: skip


@dataclass
class Server:
    url: str
    log: Path
    calls: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout_s: float = 90.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"langgraph dev exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"langgraph dev did not answer /ok in {timeout_s} s:\n{log.read_text()[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Stop the server's whole process group, and check that nothing of it is left."""
    pgid = proc.pid
    for sig, wait_s in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.2)
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return
    raise AssertionError(f"processes of the server's group {pgid} are still running")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    cli = shutil.which("langgraph", path=str(Path(sys.executable).parent)) or shutil.which("langgraph")
    if cli is None:
        pytest.skip("the langgraph command is not installed (pip install 'langgraph-cli[inmem]')")
    tmp = tmp_path_factory.mktemp("server")
    (tmp / "script.json").write_text(json.dumps(SCRIPT))
    config = {
        "models": {"default": "scripted:script.json"},
        "planner": {"max_iterations": 3, "transport_backoff_s": 0, "retries": 1},
        "concurrency": {"global_max_llm_calls": 1, "max_total_llm_calls": 10},
        "execution": {"workspace": str(WORKSPACE), "tools": ["builtin:list_dir", "builtin:read_file"]},
        "checkpoint": {"backend": "memory"},
        "run": {"synthesize": False, "intake": False, "approval": False},
        "server": {"client_context": ["approval"]},  # the scenario's client asks for the gate
    }
    (tmp / "soothe.yaml").write_text(json.dumps(config))
    # The repository's own langgraph.json, its graph path made absolute so the server can run from a
    # scratch folder (the in-memory server keeps its files in the folder it starts in).
    shipped = json.loads((ROOT / "langgraph.json").read_text())
    graphs = {}
    for name, spec in shipped["graphs"].items():
        path, _, attr = spec.rpartition(":")
        graphs[name] = f"{(ROOT / path).resolve()}:{attr}"
    (tmp / "langgraph.json").write_text(json.dumps({"dependencies": ["."], "graphs": graphs}))
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in DROPPED and not k.startswith("LANGFUSE_")}
    env.update(QUIET, PYTHONPATH=str(ROOT), SOOTHE_CONFIG=str(tmp / "soothe.yaml"))
    log = tmp / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [cli, "dev", "--host", "127.0.0.1", "--port", str(port), "--no-browser", "--no-reload",
             "--n-jobs-per-worker", "4", "--config", str(tmp / "langgraph.json")],
            cwd=tmp, env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_ready(url, proc, log)
        yield Server(url=url, log=log, calls=tmp / "calls.jsonl")
    finally:
        _stop(proc)
    text = log.read_text(errors="replace")
    assert "BlockingError" not in text, "a blocking call ran on the server's event loop"


def _peak(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one moment (an end before a start at the same instant)."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1]))
    now = peak = 0
    for _, step in edges:
        now += step
        peak = max(peak, now)
    return peak


async def _scenario(url: str, calls_log: Path) -> dict[str, Any]:
    client = sdk.get_client(url=url)
    assistant = (await client.assistants.search(graph_id="strange_loop"))[0]["assistant_id"]
    transcript: dict[str, Any] = {}

    schemas = await client.assistants.get_schemas(assistant)
    transcript["schemas"] = {
        kind: sorted((schemas.get(kind) or {}).get("properties", {}))
        for kind in ("input_schema", "output_schema", "context_schema")
    }

    # Two runs at once, on two threads; the config allows one model call in flight.
    threads = [(await client.threads.create())["thread_id"] for _ in range(2)]
    finals = await asyncio.gather(*(
        client.runs.wait(t, assistant, input={"goal": f"What is in the workspace? ({i})"})
        for i, t in enumerate(threads)
    ))  # fmt: skip
    records = [json.loads(line) for line in calls_log.read_text().splitlines()]
    by_thread = {t: [(r["start"], r["end"]) for r in records if r["thread_id"] == t] for t in threads}
    transcript["concurrent"] = {
        "statuses": [f["status"] for f in finals],
        "calls_per_run": [len(by_thread[t]) for t in threads],
        "peak_calls_in_flight": _peak([(r["start"], r["end"]) for r in records]),
        # the runs were in progress at the same time: each began before the other's last call ended
        "runs_overlapped": all(
            min(s for s, _ in by_thread[a]) < max(e for _, e in by_thread[b])
            for a, b in ((threads[0], threads[1]), (threads[1], threads[0]))
        ),
        "final_answers": [f["final_answer"] for f in finals],
        "last_messages": [f["messages"][-1]["type"] + ": " + f["messages"][-1]["content"] for f in finals],
    }

    # The approval gate, asked for in this run's context.
    thread = (await client.threads.create())["thread_id"]
    paused = await client.runs.wait(thread, assistant, input={"goal": "What is in the workspace? (approved)"},
                                    context={"approval": True})  # fmt: skip
    state = await client.threads.get_state(thread)
    interrupts = [i for task in state["tasks"] for i in task.get("interrupts", [])]
    digest = interrupts[0]["value"]["sha256"] if interrupts else None  # an approval names the plan it approves
    resumed = await client.runs.wait(thread, assistant, command={"resume": {"approved": True, "sha256": digest}})
    transcript["approval"] = {
        "paused_at": state["next"],
        "status_while_paused": paused.get("status"),
        "interrupt_keys": sorted(interrupts[0]["value"]) if interrupts else [],
        "sha256": (interrupts[0]["value"].get("sha256") or "")[:12] if interrupts else "",
        "resumed_status": resumed["status"],
        "sealed": bool(resumed.get("sealed_plan")),
    }
    return transcript


def test_the_real_server_serves_schemas_caps_concurrent_runs_and_resumes_an_approval(server: Server) -> None:
    transcript = asyncio.run(_scenario(server.url, server.calls))
    print("\nSDK transcript:\n" + json.dumps(transcript, indent=2))  # shown with pytest -s

    schemas = transcript["schemas"]
    assert {"goal", "messages", "thread_id", "max_iterations"} <= set(schemas["input_schema"])
    assert {"status", "final_answer", "messages", "error", "plan_manager"} <= set(schemas["output_schema"])
    assert schemas["context_schema"] == ["approval", "max_iterations", "max_plan_steps", "model"]

    concurrent = transcript["concurrent"]
    assert concurrent["statuses"] == ["done", "done"]
    assert concurrent["calls_per_run"] == [3, 3]  # generate, the step's agent, assess
    assert concurrent["runs_overlapped"], "the two runs did not run at the same time; the cap was not tested"
    assert concurrent["peak_calls_in_flight"] == 1
    # the plan ended in its one model step, so that step's output is the answer
    assert concurrent["last_messages"] == ["ai: It holds notes."] * 2

    approval = transcript["approval"]
    assert approval["paused_at"] == ["approve"]
    # the human-in-the-loop request (action_request, config, description) beside the earlier keys
    assert approval["interrupt_keys"] == ["action_request", "config", "description", "plan", "rendering", "sha256"]
    assert len(approval["sha256"]) == 12
    assert approval["resumed_status"] == "done" and approval["sealed"]
