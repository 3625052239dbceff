"""How do you test code that talks to a chat model without a model, through the real code path?

``ScriptedChatModel`` is a real ``BaseChatModel`` fed a script of replies. Structured output goes
through LangChain's own machinery: a reply given as a dict or a pydantic object is *rendered* as
what the caller's structured-output method expects from a provider — a tool call for
``function_calling`` and ``bind_tools``, JSON text for ``json_schema`` and ``json_mode`` — and is
then parsed by LangChain's production parsers. So a wrong field fails validation exactly where it
would with a real model, ``include_raw=True`` yields a real ``parsing_error``, and repair paths can
be tested with realistic garbage.

Reply kinds, in the order they are recognised:

- an exception instance: raised by the call (``httpx.ReadTimeout``, a rate-limit error, …);
- an ``AIMessage``: returned as is (copied), e.g. with hand-written ``tool_calls``;
- a pydantic object or a dict: rendered for the request (see above; a plain call gets JSON text;
  with several tools bound, a ``{"name": ..., "args": ...}`` dict or the model class names the tool);
- a ``str``: message text. A structured call gets it *raw*: JSON text for the JSON methods; for
  ``function_calling`` a tool call whose arguments are the string parsed as JSON when it is an
  object, else a message with that text and no tool call;
- a callable ``reply(call: ScriptedCall)`` (sync or async): its return value is the reply.

Every call is recorded in ``.calls`` as a ``ScriptedCall``. Calling past the end of the script
raises ``ScriptExhaustedError``: a test that makes more calls than it planned fails loudly rather
than looping. Token usage is reported as ``ceil(characters / 4)`` so tracing and benchmarks have
numbers to count. ``FunctionChatModel(fn)`` answers every call with ``fn(call)``, for dynamic
scripts (benchmarks, fault injection).

Both are ``RecordingChatModel``s — the recording and the rendering, with the source of replies
left to the subclass — and neither is the other. A function model used to be a scripted model
whose ``remaining`` raised and whose ``reset`` did nothing: code written against a
``ScriptedChatModel`` broke on it. ``remaining`` and ``reset`` now exist only where there is a
script; code that only reads ``.calls`` takes a ``RecordingChatModel``.

What was weighed: LangChain's stock fakes raise ``NotImplementedError`` for ``bind_tools`` and
``with_structured_output``, and mocks skip the parsers; both would leave the production path
untested. The JSON methods are built from LangChain's public parsers the way provider packages
build them, since ``BaseChatModel`` only implements ``function_calling``.

``calls.py`` holds what a call records, ``rendering.py`` how a reply becomes a provider's answer,
``models.py`` the three models; this front door re-exports them.
"""

from __future__ import annotations

from soothe_planner.testing.calls import Reply, ScriptedCall
from soothe_planner.testing.models import FunctionChatModel, RecordingChatModel, ScriptedChatModel

__all__ = ["FunctionChatModel", "RecordingChatModel", "Reply", "ScriptedCall", "ScriptedChatModel"]
