"""Tracing: one trace per run, spans named by phase, nothing at all when off.

Spans are captured offline: through an in-memory OpenTelemetry exporter handed to the Langfuse
client, and once through a local OTLP/HTTP receiver on 127.0.0.1 standing in for a Langfuse server.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, TypedDict

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langfuse import Langfuse
from langfuse._client.resource_manager import LangfuseResourceManager
from langgraph.graph import END, START, StateGraph
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from soothe_planner.config import SootheConfig
from soothe_planner.models import StepResult
from soothe_planner.tracing import run_name_for, trace_id_for, trace_run, trace_step

SECRET = "sk-lf-test-secret-value-0123456789"


# --------------------------------------------------------------------------- helpers


class TinyModel(BaseChatModel):
    """A chat model that answers "ok" and reports token usage, like a provider would."""

    @property
    def _llm_type(self) -> str:
        return "tiny"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        usage = {"input_tokens": 11, "output_tokens": 5, "total_tokens": 16}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("ok", usage_metadata=usage))])  # type: ignore[arg-type]


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


@dataclass
class Capture:
    client: Langfuse
    exporter: InMemorySpanExporter
    public_key: str

    def spans(self) -> list[ReadableSpan]:
        self.client.flush()
        return sorted(self.exporter.get_finished_spans(), key=lambda s: s.start_time or 0)


@dataclass
class Settings:
    enabled: bool = True
    base_url: str | None = None
    tags: list[str] = field(default_factory=list)
    user_id: str | None = None
    environment: str | None = None
    release: str | None = None
    sample_rate: float = 1.0


def _drop_client(public_key: str) -> None:
    instance = LangfuseResourceManager._instances.pop(public_key, None)
    if instance is not None:
        instance.shutdown()


@pytest.fixture(autouse=True)
def _no_langfuse_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "LANGFUSE_PUBLIC_KEY",
        "LANGFUSE_SECRET_KEY",
        "LANGFUSE_BASE_URL",
        "LANGFUSE_HOST",
        "LANGFUSE_TRACING_ENABLED",
        "LANGFUSE_SAMPLE_RATE",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def capture() -> Iterator[Capture]:
    # The Langfuse client is a process-wide singleton per public key: a fresh key per test keeps
    # each test's exporter its own, and the teardown removes it from the registry.
    public_key = f"pk-lf-test-{uuid.uuid4().hex}"
    exporter = InMemorySpanExporter()
    client = Langfuse(
        public_key=public_key,
        secret_key=SECRET,
        base_url="http://127.0.0.1:9",
        span_exporter=exporter,
        tracer_provider=TracerProvider(),
    )
    yield Capture(client, exporter, public_key)
    _drop_client(public_key)


def tree(spans: list[ReadableSpan]) -> list[tuple[int, str]]:
    """(depth, name) in depth-first order, children by start time."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {s.context.span_id for s in spans}
    for s in spans:
        parent = s.parent.span_id if s.parent is not None and s.parent.span_id in ids else None
        by_parent.setdefault(parent, []).append(s)
    out: list[tuple[int, str]] = []

    def walk(parent: int | None, depth: int) -> None:
        for s in sorted(by_parent.get(parent, []), key=lambda s: s.start_time or 0):
            out.append((depth, s.name))
            walk(s.context.span_id, depth + 1)

    walk(None, 0)
    return out


def attr(span: ReadableSpan, key: str) -> Any:
    return (span.attributes or {}).get(key)


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
    import soothe_planner.tracing as tracing

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


# --------------------------------------------------------------------------- the real loop


def _loop_script() -> list[Any]:
    """Intake, a generation (iteration 0 has nothing to assess), assess + generate, then an assessment
    that says done."""
    return [
        {"route": "complex"},
        {
            "plan_action": "new",
            "steps": [
                {"id": "s1", "description": "fetch alpha", "tools": ["fetch"]},
                {"id": "s2", "description": "fetch beta", "tools": ["fetch"]},
            ],
        },
        {"status": "continue", "goal_progress": 0.5, "summary": "half way"},
        {
            "plan_action": "new",
            "steps": [
                {"id": "s3", "description": "fetch gamma", "tools": ["fetch"], "depends_on": ["s1", "s2"]}
            ],
        },
        {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "all fetched"},
    ]


def _loop(script: list[Any], **kwargs: Any) -> tuple[Any, Any]:
    from langchain_core.tools import tool

    from soothe_planner.execution import StepExecutor
    from soothe_planner.graph.loop import build_strange_loop
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import ScriptedChatModel

    @tool
    def fetch(topic: str) -> str:
        """Fetch notes on a topic."""
        return f"notes on {topic}"

    model = ScriptedChatModel(script)
    planner = LLMPlanner(model)
    executor = StepExecutor(tools=[fetch], controller=planner.controller)
    return build_strange_loop(planner, executor, **kwargs), model


ITERATION = [
    (1, "plan_assess"),
    (2, "plan-assess"),
    (3, "plan-assess"),
    (2, "after_assess"),
    (1, "plan_generate"),
    (2, "plan-generate"),
    (3, "plan-generate"),
    (2, "after_generate"),
    (1, "validate"),
    (2, "after_validate"),
    (1, "execute"),
]

# Iteration 0 has no evidence and no plan: its assessment is known, so the node makes no call.
FIRST_ITERATION = [(1, "plan_assess"), (2, "after_assess"), *ITERATION[4:]]

TWO_ITERATION_TREE = [
    (0, "soothe-run: Fetch three topics"),
    (1, "intake"),
    (2, "intake"),
    (3, "intake"),
    (2, "route_after_intake"),
    *FIRST_ITERATION,
    (2, "step:s1"),
    (3, "fetch"),
    (2, "step:s2"),
    (3, "fetch"),
    (2, "after_execute"),
    (1, "record_iteration"),
    *ITERATION,
    (2, "step:s3"),
    (3, "fetch"),
    (2, "after_execute"),
    (1, "record_iteration"),
    (1, "plan_assess"),
    (2, "plan-assess"),
    (3, "plan-assess"),
    (2, "after_assess"),
    (1, "goal_completion"),
]


async def test_two_iteration_loop_is_one_readable_trace_with_a_generation_per_call(capture: Capture) -> None:
    from soothe_planner.graph.loop import goal_input, run_config

    graph, model = _loop(_loop_script())
    goal = "Fetch three topics"
    with trace_run(Settings(tags=["loop"]), goal=goal, thread_id="t-loop", client=capture.client) as handle:
        final = await graph.ainvoke(
            goal_input(goal, thread_id="t-loop"), handle.config_for(run_config("t-loop"))
        )
    assert final["status"] == "done" and model.remaining == 0
    spans = capture.spans()

    assert tree(spans) == TWO_ITERATION_TREE
    generations = [s for s in spans if attr(s, "langfuse.observation.type") == "generation"]
    # intake, generate, assess + generate, then the assessment that ends the loop
    assert [g.name for g in generations] == [
        "intake", "plan-generate", "plan-assess", "plan-generate", "plan-assess",
    ]  # fmt: skip
    assert len(generations) == len(model.calls) == 5
    for g in generations:
        usage = json.loads(attr(g, "langfuse.observation.usage_details"))
        assert usage["input"] > 0 and usage["output"] > 0
    assert [s.name for s in spans if attr(s, "langfuse.observation.type") == "tool"] == ["fetch"] * 3
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id_for("t-loop")}
    assert attr(spans[0], "session.id") == "t-loop"
    for span in spans:
        for value in (span.attributes or {}).values():
            assert SECRET not in str(value)


async def test_a_run_resumed_after_approval_continues_the_same_trace(capture: Capture) -> None:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    from soothe_planner.graph.loop import goal_input, run_config

    graph, _ = _loop(_loop_script(), checkpointer=InMemorySaver(), approval=True)
    goal = "Fetch three topics"
    config = run_config("t-approve")
    with trace_run(None, goal=goal, thread_id="t-approve", client=capture.client) as first:
        paused = await graph.ainvoke(goal_input(goal, thread_id="t-approve"), first.config_for(config))
    assert "__interrupt__" in paused
    with trace_run(None, goal=goal, thread_id="t-approve", resumed=True, client=capture.client) as second:
        await graph.ainvoke(Command(resume={"approved": True}), second.config_for(config))
    spans = capture.spans()
    roots = [name for depth, name in tree(spans) if depth == 0]
    assert roots == ["soothe-run: Fetch three topics", "soothe-run (resumed): Fetch three topics"]
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id_for("t-approve")}
    assert first.trace_id == second.trace_id


async def test_the_executor_puts_each_tool_call_under_its_step_span(capture: Capture) -> None:
    from langchain_core.tools import tool

    from soothe_planner.execution import StepExecutor
    from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import ScriptedChatModel

    @tool
    def fetch(topic: str) -> str:
        """Fetch notes on a topic."""
        if "beta" in topic:
            raise ValueError("beta is unavailable")
        return f"notes on {topic}"

    # s2 fails for good, so the next round is a replan known without an assessment call
    replan = {"plan_action": "new", "steps": [{"id": "s3", "description": "fetch gamma", "tools": ["fetch"]}]}
    script = [*_loop_script()[:2], replan, {"status": "done", "goal_progress": 1.0, "summary": "enough"}]
    planner = LLMPlanner(ScriptedChatModel(script))
    graph = build_strange_loop(
        planner, StepExecutor(tools=[fetch], controller=planner.controller, step_timeout_s=5)
    )
    with trace_run(None, goal="g", thread_id="t-steps", client=capture.client) as handle:
        await graph.ainvoke(goal_input("g", thread_id="t-steps"), handle.config_for(run_config("t-steps")))
    spans = capture.spans()
    shape = tree(spans)
    execute = shape.index((1, "execute"))
    assert shape[execute + 1 : execute + 5] == [(2, "step:s1"), (3, "fetch"), (2, "step:s2"), (3, "fetch")]
    steps = {s.name: s for s in spans if s.name.startswith("step:")}
    assert attr(steps["step:s1"], "langfuse.observation.level") in (None, "DEFAULT")
    assert attr(steps["step:s2"], "langfuse.observation.level") == "ERROR"
    assert "beta is unavailable" in attr(steps["step:s2"], "langfuse.observation.status_message")


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
