"""Tracing: one trace per run, spans named by phase, nothing at all when off.

Spans are captured offline: through an in-memory OpenTelemetry exporter handed to the Langfuse
client, and once through a local OTLP/HTTP receiver on 127.0.0.1 standing in for a Langfuse server.
The StrangeLoop's own trace is in ``test_tracing_loop.py``.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, TypedDict

import pytest
from langchain_core.language_models import BaseChatModel
from langfuse import Langfuse
from langfuse._client.resource_manager import LangfuseResourceManager
from langgraph.graph import END, START, StateGraph
from opentelemetry.sdk.trace import TracerProvider
from tracing_support import (
    SECRET,
    Capture,
    Settings,
    TinyModel,
    _drop_client,
    attr,
    capture,
    no_langfuse_env,
    tree,
)

from soothe_planner.config import SootheConfig
from soothe_planner.models import StepResult
from soothe_planner.tracing import run_name_for, trace_id_for, trace_run, trace_step

pytestmark = pytest.mark.usefixtures("no_langfuse_env")
__all__ = ["capture", "no_langfuse_env"]  # fixtures, used by name

# --------------------------------------------------------------------------- helpers


class _S(TypedDict, total=False):
    n: int


def tiny_graph(model: BaseChatModel, *, fail_step: bool = False) -> Any:
    """plan_assess (one phase-tagged call) -> execute (one traced step making one call)."""

    async def plan_assess(state: _S) -> _S:
        await model.ainvoke(
            "assess", config={"run_name": "plan-assess", "metadata": {"soothe_phase": "plan-assess"}}
        )
        return {"n": state.get("n", 0) + 1}

    async def execute(state: _S) -> _S:
        async with trace_step("s1", description="say ok") as span:
            await model.ainvoke("work")
            await span.finish(
                StepResult(
                    step_id="s1",
                    success=not fail_step,
                    output="ok",
                    error="boom" if fail_step else None,
                    error_type="tool_error" if fail_step else None,
                )
            )
        return {}

    g = StateGraph(_S)
    g.add_node("plan_assess", plan_assess)
    g.add_node("execute", execute)
    g.add_edge(START, "plan_assess")
    g.add_edge("plan_assess", "execute")
    g.add_edge("execute", END)
    return g.compile()


# --------------------------------------------------------------------------- identity


def test_trace_id_is_deterministic_per_thread_and_matches_langfuse() -> None:
    assert trace_id_for("t-1") == trace_id_for("t-1")
    assert trace_id_for("t-1") != trace_id_for("t-2")
    assert trace_id_for("t-1", "turn-2") != trace_id_for("t-1")
    assert trace_id_for("t-1") == Langfuse.create_trace_id(seed="soothe-planner:t-1")


def test_run_name_is_an_excerpt_of_the_goal_and_marks_resumes() -> None:
    assert run_name_for("Write  a\nhaiku") == "soothe-run: Write a haiku"
    assert run_name_for("x" * 200).endswith("...") and len(run_name_for("x" * 200)) < 80
    assert run_name_for("go", resumed=True) == "soothe-run (resumed): go"


# --------------------------------------------------------------------------- off means off


def test_disabled_tracing_is_a_no_op_with_no_client() -> None:
    before = dict(LangfuseResourceManager._instances)
    with trace_run(Settings(enabled=False), goal="g", thread_id="t") as handle:
        config = handle.config_for({"configurable": {"thread_id": "t"}})
    assert not handle.enabled and handle.callbacks == [] and handle.url is None and handle.summary() is None
    assert config == {"configurable": {"thread_id": "t"}}
    assert LangfuseResourceManager._instances == before


def test_enabled_without_keys_is_a_no_op_that_says_so_once(caplog: pytest.LogCaptureFixture) -> None:
    import soothe_planner.tracing.runs as tracing

    tracing._warned_missing_keys = False
    before = dict(LangfuseResourceManager._instances)
    for _ in range(3):
        with trace_run(Settings(enabled=True), goal="g", thread_id="t") as handle:
            assert handle.callbacks == []
    warnings = [r for r in caplog.records if "LANGFUSE_PUBLIC_KEY" in r.getMessage()]
    assert len(warnings) == 1
    assert LangfuseResourceManager._instances == before


def test_the_default_config_traces_nothing() -> None:
    with trace_run(SootheConfig(), goal="g", thread_id="t") as handle:
        assert not handle.enabled and handle.config_for({"recursion_limit": 5}) == {"recursion_limit": 5}


def test_no_settings_means_no_tracing() -> None:
    with trace_run(None, goal="g", thread_id="t") as handle:
        assert handle.config_for(None) == {}


def test_trace_step_without_callbacks_costs_nothing() -> None:
    async def run() -> bool:
        async with trace_step("s1") as span:
            await span.finish(StepResult(step_id="s1", success=True))
            return span.active

    assert asyncio.run(run()) is False


# --------------------------------------------------------------------------- the span tree


async def test_run_is_one_trace_with_phase_named_generations_and_step_spans(capture: Capture) -> None:
    graph = tiny_graph(TinyModel())
    settings = Settings(tags=["nightly", "eval"], user_id="ada")
    with trace_run(settings, goal="Say ok twice", thread_id="thread-42", client=capture.client) as handle:
        await graph.ainvoke({"n": 0}, handle.config_for({"configurable": {"thread_id": "thread-42"}}))
    spans = capture.spans()

    assert tree(spans) == [
        (0, "soothe-run: Say ok twice"),
        (1, "plan_assess"),
        (2, "plan-assess"),
        (1, "execute"),
        (2, "step:s1"),
        (3, "step:s1"),
    ]
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id_for("thread-42")}
    root = spans[0]
    assert attr(root, "session.id") == "thread-42"
    assert attr(root, "user.id") == "ada"
    assert set(attr(root, "langfuse.trace.tags")) == {"nightly", "eval"}
    assert attr(root, "langfuse.trace.name") == "soothe-run: Say ok twice"
    generations = [s for s in spans if attr(s, "langfuse.observation.type") == "generation"]
    assert [g.name for g in generations] == ["plan-assess", "step:s1"]
    for g in generations:
        assert json.loads(attr(g, "langfuse.observation.usage_details")) == {
            "input": 11,
            "output": 5,
            "total": 16,
        }
    step = next(s for s in spans if s.name == "step:s1" and attr(s, "langfuse.observation.type") == "chain")
    assert '"completed"' in attr(step, "langfuse.observation.output")


async def test_a_failed_step_is_an_error_span_with_its_reason(capture: Capture) -> None:
    graph = tiny_graph(TinyModel(), fail_step=True)
    with trace_run(None, goal="fail", thread_id="t-fail", client=capture.client) as handle:
        await graph.ainvoke({"n": 0}, handle.config_for())
    step = next(
        s for s in capture.spans() if s.name == "step:s1" and attr(s, "langfuse.observation.type") == "chain"
    )
    assert attr(step, "langfuse.observation.level") == "ERROR"
    assert "tool_error: boom" in attr(step, "langfuse.observation.status_message")


async def test_a_resumed_run_lands_in_the_same_trace(capture: Capture) -> None:
    graph = tiny_graph(TinyModel())
    with trace_run(None, goal="g", thread_id="t-resume", client=capture.client) as first:
        await graph.ainvoke({"n": 0}, first.config_for())
    with trace_run(None, goal="g", thread_id="t-resume", resumed=True, client=capture.client) as second:
        await graph.ainvoke({"n": 0}, second.config_for())
    spans = capture.spans()
    roots = [name for depth, name in tree(spans) if depth == 0]
    assert roots == ["soothe-run: g", "soothe-run (resumed): g"]
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id_for("t-resume")}


async def test_concurrent_runs_never_share_spans(capture: Capture) -> None:
    graph = tiny_graph(TinyModel())
    with (
        trace_run(None, goal="A", thread_id="t-a", client=capture.client) as a,
        trace_run(None, goal="B", thread_id="t-b", client=capture.client) as b,
    ):
        await asyncio.gather(graph.ainvoke({"n": 0}, a.config_for()), graph.ainvoke({"n": 0}, b.config_for()))
    spans = capture.spans()
    for thread, goal in (("t-a", "A"), ("t-b", "B")):
        mine = [s for s in spans if format(s.context.trace_id, "032x") == trace_id_for(thread)]
        assert tree(mine)[0] == (0, f"soothe-run: {goal}")
        assert len(mine) == 6
    assert len(spans) == 12


async def test_no_secret_appears_in_any_span_attribute(capture: Capture) -> None:
    graph = tiny_graph(TinyModel())
    with trace_run(Settings(user_id="u"), goal="g", thread_id="t-s", client=capture.client) as handle:
        await graph.ainvoke({"n": 0}, handle.config_for())
    for span in capture.spans():
        for value in (span.attributes or {}).values():
            assert SECRET not in str(value)
        for value in span.resource.attributes.values():
            assert SECRET not in str(value)


def test_config_for_keeps_caller_callbacks_and_metadata(capture: Capture) -> None:
    from langchain_core.callbacks import StdOutCallbackHandler

    mine = StdOutCallbackHandler()
    with trace_run(None, goal="g", thread_id="t", client=capture.client) as handle:
        config = handle.config_for({"callbacks": [mine], "metadata": {"k": 1}, "recursion_limit": 7})
    assert config["callbacks"][0] is mine and len(config["callbacks"]) == 2
    assert config["metadata"]["k"] == 1 and config["metadata"]["langfuse_session_id"] == "t"
    assert config["recursion_limit"] == 7 and config["run_name"] == "soothe-run: g"


# --------------------------------------------------------------------------- a real OTLP round trip


class _Receiver(BaseHTTPRequestHandler):
    posts: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.posts.append((self.path, dict(self.headers), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.end_headers()

    def do_GET(self) -> None:  # the project lookup behind a trace URL
        payload = json.dumps(
            {
                "data": [
                    {"id": "proj-1", "name": "p", "metadata": {}, "organization": {"id": "o", "name": "o"}}
                ]
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        return


@pytest.fixture
def receiver() -> Iterator[str]:
    _Receiver.posts = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


async def test_spans_reach_an_otlp_endpoint_configured_from_the_environment(
    receiver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    public_key = f"pk-lf-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", public_key)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    monkeypatch.setenv("LANGFUSE_BASE_URL", receiver)
    provider = TracerProvider()
    monkeypatch.setattr("opentelemetry.trace.get_tracer_provider", lambda: provider)
    try:
        graph = tiny_graph(TinyModel())
        config = SootheConfig(tracing={"langfuse": {"enabled": True, "tags": ["wire"], "user_id": "ops"}})
        with trace_run(config, goal="over the wire", thread_id="t-otlp") as handle:
            await graph.ainvoke({"n": 0}, handle.config_for())
        assert handle.url == f"{receiver}/project/proj-1/traces/{trace_id_for('t-otlp')}"
        assert handle.summary() == f"Langfuse trace: {handle.url}"
    finally:
        _drop_client(public_key)

    posts = [(p, h, b) for p, h, b in _Receiver.posts if p == "/api/public/otel/v1/traces"]
    assert posts, "no OTLP export reached the receiver"
    names: list[str] = []
    for _, headers, body in posts:
        if headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        assert SECRET.encode() not in body
        request = ExportTraceServiceRequest.FromString(body)
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                names.extend(span.name for span in ss.spans)
    assert b"ops" in b"".join(
        gzip.decompress(b) if h.get("Content-Encoding") == "gzip" else b for _, h, b in posts
    ), "the configured user id did not reach the server"
    assert sorted(names) == sorted(
        ["soothe-run: over the wire", "plan_assess", "plan-assess", "execute", "step:s1", "step:s1"]
    )


# --------------------------------------------------------------------------- no langfuse


def test_tracing_off_needs_no_langfuse_import() -> None:
    # langfuse is imported on the first traced run only; the disabled path never loads it.
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['langfuse'] = None\n"
        "from soothe_planner.tracing import trace_run\n"
        "with trace_run(None, goal='g', thread_id='t') as h: assert h.callbacks == []\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_tracing_on_without_langfuse_installed_is_a_config_error_saying_how_to_fix_it() -> None:
    import subprocess
    import sys

    code = (
        "import os, sys; sys.modules['langfuse'] = None\n"
        "os.environ['LANGFUSE_PUBLIC_KEY'] = 'pk'; os.environ['LANGFUSE_SECRET_KEY'] = 'sk'\n"
        "from soothe_planner.config import SootheConfig\n"
        "from soothe_planner.errors import ConfigError\n"
        "from soothe_planner.tracing import trace_run\n"
        "try:\n"
        "    with trace_run(SootheConfig(tracing={'langfuse': {'enabled': True}}), goal='g', thread_id='t'):\n"
        "        pass\n"
        "except ConfigError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "pip install langfuse" in out.stdout and "enabled: false" in out.stdout
