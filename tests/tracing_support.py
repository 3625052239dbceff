"""Shared pieces of the tracing tests: an in-memory span capture, a tiny model, span-tree helpers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langfuse import Langfuse
from langfuse._client.resource_manager import LangfuseResourceManager
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

SECRET = "sk-lf-test-secret-value-0123456789"


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


@pytest.fixture
def no_langfuse_env(monkeypatch: pytest.MonkeyPatch) -> None:
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
