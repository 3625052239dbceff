"""Which failures of a model call are worth repeating, and how long to wait before repeating them?

A transport failure — a timeout, a dropped connection, a rate limit, an HTTP 5xx — says nothing
about the request, so the same request is sent again. Everything else is not retried here: a
``ValueError``/``TypeError``/``KeyError`` is a bug in the request (retrying hides it), a parse
or validation failure is the re-ask ladder's business (``calls.py``), and errors this package
raises on purpose (a spent budget, an exhausted test script) pass through untouched.

The retrying is tenacity's, not a hand-written loop: exponential backoff from
``transport_backoff_s`` (doubling per retry, the doubling capped at ``MAX_BACKOFF_S``) plus a
random jitter of up to one ``transport_backoff_s``, so planners that failed together do not all come back in the
same instant; ``transport_retries`` retries after the first request. ``transport_backoff_s=0``
means no waiting at all (tests).

Two things were weighed:

- **The slot is released while sleeping.** Each request takes its LLM slot inside the attempt
  (``Caller._request``); tenacity sleeps between attempts, after the slot is given back. A call
  that slept on its slot would hold one of ``global_max_llm_calls`` idle for the whole backoff
  while other calls queue behind it.
- **Provider SDKs do not retry as well.** The OpenAI SDK retries twice by default, inside the
  provider call — that is, inside the slot — and its retries multiply with these: 3 × 3 = 9 HTTP
  requests for one call. The models this package builds set ``max_retries=0``
  (``config/resolve.py``, ``local/embedded.py``); a model you build yourself should too.

LangGraph's ``RetryPolicy`` was the other candidate: it retries a whole graph node, so a planner
used outside a graph would have no retries, and a retry would repeat the node's earlier calls.
"""

from __future__ import annotations

from collections.abc import Callable

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

__all__ = ["MAX_BACKOFF_S", "TRANSPORT_ERRORS", "is_transport_error", "transport_retrying"]

MAX_BACKOFF_S = 30.0
"""The exponential part of a wait stops growing here, however many retries are configured."""


def _transport_errors() -> tuple[type[BaseException], ...]:
    kinds: list[type[BaseException]] = [TimeoutError, ConnectionError]
    try:
        import httpx

        kinds += [httpx.TransportError]  # connect/read/write errors and httpx timeouts
    except ImportError:  # pragma: no cover - httpx ships with langchain-openai
        pass
    try:
        import openai

        # APITimeoutError is an APIConnectionError; InternalServerError is every status >= 500
        kinds += [openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError]
    except ImportError:  # pragma: no cover
        pass
    return tuple(kinds)


TRANSPORT_ERRORS: tuple[type[BaseException], ...] = _transport_errors()
"""Every error retried as a transport failure (one tuple, so the policy reads in one place)."""

_NEVER_RETRIED = (ValueError, TypeError, KeyError)


def is_transport_error(exc: BaseException) -> bool:
    """A failure of the wire, worth retrying the same request — never a bug in the request."""
    return isinstance(exc, TRANSPORT_ERRORS) and not isinstance(exc, _NEVER_RETRIED)


def transport_retrying(
    retries: int, backoff_s: float, *, before_sleep: Callable[[RetryCallState], None] | None = None
) -> AsyncRetrying:
    """The retry loop for one request: ``async for attempt in ...: with attempt: ...``.

    The last error is raised as itself when the retries run out (never a ``RetryError``), and a
    non-transport error is raised at once.
    """
    return AsyncRetrying(
        stop=stop_after_attempt(retries + 1),
        wait=wait_exponential(multiplier=backoff_s, exp_base=2, max=MAX_BACKOFF_S) + wait_random(0, backoff_s),
        retry=retry_if_exception(is_transport_error),
        before_sleep=before_sleep,
        reraise=True,
    )
