"""How does every call of a chat model take a slot of the run's LLM-call limiter?

``limit_model(model, controller)`` returns a copy of ``model`` whose class is a subclass of the
model's own class (made once per class and cached) with ``_generate``, ``_agenerate``, ``_stream``
and ``_astream`` overridden to hold one LLM slot for the duration of the provider call — for a
stream, until it ends or is closed.

What was weighed:

- A delegating proxy (a new ``BaseChatModel`` holding the real one) loses the model's own
  ``bind_tools`` and ``with_structured_output``: forwarding them returns runnables bound to the
  *inner* model, whose calls would bypass the limit, and re-implementing them per provider is a
  bug farm. A subclass keeps every provider method native — ``bind_tools``, the three structured
  output methods, ``batch``, LangGraph's ReAct agent — because they all end in the four private
  methods above, on this very object.
- The subclass keeps the original class name, so traces and serialisation look the same. The
  copy shares the original's fields (clients, settings) and leaves the original unlimited.
- Only the streaming methods the original class implements are overridden: LangChain decides
  whether a model can stream by checking whether ``_stream``/``_astream`` are overridden.
- Cache hits never reach these methods, so they take no slot: they are not model calls.
- Re-wrapping is idempotent for the same controller; a model wrapped by two controllers (a
  run-wide one and a planner's own) takes one slot of each, always in the same order, so two
  limiters cannot deadlock each other. Nested paths (an ``_agenerate`` that runs ``_generate`` in a
  worker thread, a stream bridged to a thread) see the held slot through a ``ContextVar`` and take
  no second one: they *join* its lease (``slots.SlotLease``) for as long as they run. So when the
  task that took the slot is cancelled while the provider call goes on in its thread, the slot
  stays taken until that call returns; a thread that starts only after its caller let go takes a
  slot of its own, charged nothing more against the budget.
- ``ainvoke`` first waits for an admission place (see ``ConcurrencyController.admit_llm_call``)
  and gives it back as soon as the provider call holds its LLM slots: LangChain's preparation of
  a call then overlaps other calls' model latency instead of running for the whole flood before
  any slot can be handed on. The slot itself is taken only around the provider call.
- The phase counted in ``calls_by_phase`` comes from the call's ``RunnableConfig`` metadata key
  ``"soothe_phase"``. LangChain gives ``_generate`` the run manager (with that metadata) but calls
  ``_stream`` without it, so the public entry points also note the phase in a ``ContextVar``.
- The four provider methods share one ``_Hold`` (which slots to join or take, in what order, how
  they are marked and let go); each sync method differs from its async twin only in the waits.
  Two pairs stay written twice on purpose: ``ainvoke`` is no copy of ``invoke`` (only it is paced
  by admission places, which have no thread form), and ``_scoped_iter``/``_scoped_aiter`` differ
  only in ``next`` versus ``await anext``, which one function cannot do for both kinds of iterator.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import ensure_config
from pydantic import PrivateAttr

from soothe_planner.concurrency.gate import LLMGate
from soothe_planner.concurrency.slots import HELD_LLM_SLOTS, SlotLease, reset_held
from soothe_planner.errors import ConfigError

__all__ = ["PHASE_METADATA_KEY", "is_limited", "limit_model", "limiting_controllers", "unwrap_model"]

PHASE_METADATA_KEY = "soothe_phase"
"""The ``RunnableConfig`` metadata key that names an LLM call's phase (``plan-assess``, ``step:s1``, ...).

Defined here and only here: the limiter counts calls by it, tracing names generations by it and the
planner sets it, all importing this constant (this is the lowest layer that reads it)."""

# The phase of the public call in progress, for the private methods LangChain calls without a run
# manager (streams).
_CALL_PHASE: ContextVar[str | None] = ContextVar("soothe_call_phase", default=None)
# The admission places of the ``ainvoke`` in progress, given back once its LLM slots are granted.
_ADMISSION: ContextVar[_Admission | None] = ContextVar("soothe_admission", default=None)

_LIMITED_BY_BASE: dict[type[BaseChatModel], type[BaseChatModel]] = {}
_BASE_BY_LIMITED: dict[type[BaseChatModel], type[BaseChatModel]] = {}
_classes_lock = threading.Lock()


def limit_model(model: BaseChatModel, controller: LLMGate) -> BaseChatModel:
    """Return a copy of ``model`` whose every call holds one of ``controller``'s LLM slots."""
    if not isinstance(model, BaseChatModel):
        raise ConfigError(
            f"can only limit a langchain BaseChatModel, got {type(model).__name__}; "
            "wrap the chat model itself, before binding tools or structured output"
        )
    controllers = limiting_controllers(model)
    if controller in controllers:
        return model
    base = _BASE_BY_LIMITED.get(type(model), type(model))
    limited_cls = _limited_class(base)
    ordered = tuple(sorted((*controllers, controller), key=lambda c: c.serial))
    copy = limited_cls.__new__(limited_cls)
    # The same shallow copy pydantic's __copy__ makes, into the limited class.
    object.__setattr__(copy, "__dict__", dict(model.__dict__))
    object.__setattr__(copy, "__pydantic_extra__", _copied(model.__pydantic_extra__))
    object.__setattr__(copy, "__pydantic_fields_set__", set(model.__pydantic_fields_set__))
    private = dict(getattr(model, "__pydantic_private__", None) or {})
    private["_soothe_controllers"] = ordered
    object.__setattr__(copy, "__pydantic_private__", private)
    return copy


def limiting_controllers(model: BaseChatModel) -> tuple[LLMGate, ...]:
    """The controllers whose slots every call of ``model`` takes (empty if it is not limited)."""
    if type(model) not in _BASE_BY_LIMITED:
        return ()
    return tuple(model.__pydantic_private__.get("_soothe_controllers", ()))  # type: ignore[union-attr]


def is_limited(model: BaseChatModel) -> bool:
    return bool(limiting_controllers(model))


def unwrap_model(model: BaseChatModel) -> BaseChatModel:
    """An unlimited copy of a limited model (the model itself if it is not limited)."""
    base = _BASE_BY_LIMITED.get(type(model))
    if base is None:
        return model
    copy = base.__new__(base)
    object.__setattr__(copy, "__dict__", dict(model.__dict__))
    object.__setattr__(copy, "__pydantic_extra__", _copied(model.__pydantic_extra__))
    object.__setattr__(copy, "__pydantic_fields_set__", set(model.__pydantic_fields_set__))
    private = dict(getattr(model, "__pydantic_private__", None) or {})
    private.pop("_soothe_controllers", None)
    object.__setattr__(copy, "__pydantic_private__", private or None)
    return copy


def _copied(extra: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if extra is None else dict(extra)


def _limited_class(base: type[BaseChatModel]) -> type[BaseChatModel]:
    with _classes_lock:
        cls = _LIMITED_BY_BASE.get(base)
        if cls is not None:
            return cls
        namespace: dict[str, Any] = {
            "__module__": base.__module__,
            "__qualname__": base.__qualname__,
            "__doc__": base.__doc__,
            "_soothe_controllers": PrivateAttr(default=()),
            "invoke": _make_invoke(base),
            "ainvoke": _make_ainvoke(base),
            "stream": _make_stream(base),
            "astream": _make_astream(base),
            "_generate": _make_generate(base),
            "_agenerate": _make_agenerate(base),
        }
        streams_sync = base._stream is not BaseChatModel._stream
        streams_async = base._astream is not BaseChatModel._astream
        if streams_sync:
            namespace["_stream"] = _make_private_stream(base)
        if streams_sync or streams_async:
            # With only ``_stream`` implemented, LangChain's default ``_astream`` bridges it in a
            # thread; overriding ``_astream`` takes the slot on the loop instead of blocking a
            # worker thread while waiting.
            namespace["_astream"] = _make_private_astream(base)
        cls = type(base.__name__, (base,), namespace)
        _LIMITED_BY_BASE[base] = cls
        _BASE_BY_LIMITED[cls] = base
        return cls


# -- phase --------------------------------------------------------------------------------------


def _phase_of_config(config: RunnableConfig | None) -> str | None:
    metadata = ensure_config(config).get("metadata") or {}
    phase = metadata.get(PHASE_METADATA_KEY)
    return str(phase) if phase is not None else None


def _phase(run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None) -> str | None:
    if run_manager is not None:
        phase = (run_manager.metadata or {}).get(PHASE_METADATA_KEY)
        if phase is not None:
            return str(phase)
    return _CALL_PHASE.get()


def _controllers(model: BaseChatModel) -> tuple[LLMGate, ...]:
    return tuple(model.__pydantic_private__.get("_soothe_controllers", ()))  # type: ignore[union-attr]


# -- public entry points: only note the phase ---------------------------------------------------


def _make_invoke(base: type[BaseChatModel]) -> Callable[..., Any]:
    def invoke(self: BaseChatModel, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        token = _CALL_PHASE.set(_phase_of_config(config))
        try:
            return base.invoke(self, input, config, **kwargs)
        finally:
            _CALL_PHASE.reset(token)

    return invoke


def _make_ainvoke(base: type[BaseChatModel]) -> Callable[..., Any]:
    async def ainvoke(
        self: BaseChatModel, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Any:
        admission = await _admit(_controllers(self))
        token = _CALL_PHASE.set(_phase_of_config(config))
        admission_token = _ADMISSION.set(admission) if admission is not None else None
        try:
            return await base.ainvoke(self, input, config, **kwargs)
        finally:
            if admission_token is not None:
                _ADMISSION.reset(admission_token)
            if admission is not None:
                admission.end()
            _CALL_PHASE.reset(token)

    return ainvoke


class _Admission:
    """The admission places one ``ainvoke`` holds until its LLM slots are granted (or it ends)."""

    __slots__ = ("_controllers", "_lock")

    def __init__(self, controllers: list[LLMGate]) -> None:
        self._controllers = controllers
        self._lock = threading.Lock()

    def end(self) -> None:
        """Give the places back; only the first call does anything."""
        with self._lock:
            controllers, self._controllers = self._controllers, []
        for controller in reversed(controllers):
            controller.end_admission()


async def _admit(controllers: tuple[LLMGate, ...]) -> _Admission | None:
    if _ADMISSION.get() is not None:
        return None  # inside a paced call already: its place covers this one
    taken: list[LLMGate] = []
    try:
        for controller in controllers:
            if await controller.admit_llm_call():
                taken.append(controller)
    except BaseException:
        for controller in reversed(taken):
            controller.end_admission()
        raise
    return _Admission(taken) if taken else None


def _end_admission() -> None:
    admission = _ADMISSION.get()
    if admission is not None:
        admission.end()


def _make_stream(base: type[BaseChatModel]) -> Callable[..., Iterator[Any]]:
    def stream(
        self: BaseChatModel, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[Any]:
        inner = base.stream(self, input, config, **kwargs)
        return _scoped_iter(inner, _CALL_PHASE, _phase_of_config(config))

    return stream


def _make_astream(base: type[BaseChatModel]) -> Callable[..., AsyncIterator[Any]]:
    def astream(
        self: BaseChatModel, input: Any, config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        inner = base.astream(self, input, config, **kwargs)
        return _scoped_aiter(inner, _CALL_PHASE, _phase_of_config(config))

    return astream


def _scoped_iter(inner: Iterator[Any], var: ContextVar[Any], value: Any) -> Iterator[Any]:
    """Iterate ``inner`` with ``var`` set only while ``inner`` runs, never while the consumer does."""
    try:
        while True:
            token = var.set(value)
            try:
                item = next(inner)
            except StopIteration:
                return
            finally:
                var.reset(token)
            yield item
    finally:
        close = getattr(inner, "close", None)
        if close is not None:
            close()


async def _scoped_aiter(
    inner: AsyncIterator[Any], var: ContextVar[Any], value: Any
) -> AsyncGenerator[Any, None]:
    try:
        while True:
            token = var.set(value)
            try:
                item = await inner.__anext__()
            except StopAsyncIteration:
                return
            finally:
                var.reset(token)
            yield item
    finally:
        aclose = getattr(inner, "aclose", None)
        if aclose is not None:
            await aclose()


# -- the provider calls: hold the slots ---------------------------------------------------------


class _Hold:
    """The LLM slots one provider call holds: a lease of each controller that limits the model.

    Written once for the four provider methods: which slots to join and which to take, in the
    controllers' order (lowest serial first, so two limiters never deadlock), how they are marked
    as held and how they are let go. The sync and async methods differ only in how they wait for
    a slot (``take_sync``/``take``), and the async ones end the ``ainvoke``'s admission after.
    """

    __slots__ = ("controllers", "leases", "phase")

    def __init__(
        self, model: BaseChatModel, run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun | None
    ) -> None:
        self.phase = _phase(run_manager)
        self.controllers = _controllers(model)
        self.leases: list[SlotLease] = []

    def _to_take(self) -> Iterator[tuple[LLMGate, bool]]:
        """Join each slot this context holds; yield ``(controller, counted)`` for each one to take.

        Lazy: the caller takes (and appends) each slot before the next controller is looked at, so
        the leases stay in the controllers' order, which ``marked`` pairs them by.
        """
        for controller in self.controllers:
            held = controller.held_lease()
            if held is not None and held.join():
                self.leases.append(held)
            else:
                # no slot here, or the caller let go before this thread started: the call was counted already
                yield controller, held is not None

    def take_sync(self) -> None:
        for controller, counted in self._to_take():
            self.leases.append(controller.lease_llm_slot_sync(self.phase, counted=counted))

    async def take(self) -> None:
        for controller, counted in self._to_take():
            self.leases.append(await controller.lease_llm_slot(self.phase, counted=counted))

    def marked(self) -> dict[int, SlotLease]:
        """``HELD_LLM_SLOTS`` with these leases added, for the provider call to see."""
        return {**HELD_LLM_SLOTS.get(), **{c.serial: lease for c, lease in zip(self.controllers, self.leases, strict=False)}}

    @contextmanager
    def marking(self) -> Iterator[None]:
        """Mark the leases as held for the block (a nested path joins them instead of taking more)."""
        token = HELD_LLM_SLOTS.set(self.marked()) if self.leases else None
        try:
            yield
        finally:
            if token is not None:
                reset_held(token)

    def leave(self) -> None:
        """Let go of every lease taken or joined so far, the last first."""
        for lease in reversed(self.leases):
            lease.leave()


def _make_generate(base: type[BaseChatModel]) -> Callable[..., ChatResult]:
    def _generate(
        self: BaseChatModel,
        messages: list[Any],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        hold = _Hold(self, run_manager)
        try:
            hold.take_sync()
            with hold.marking():
                return base._generate(self, messages, stop=stop, run_manager=run_manager, **kwargs)
        finally:
            hold.leave()

    return _generate


def _make_agenerate(base: type[BaseChatModel]) -> Callable[..., Any]:
    async def _agenerate(
        self: BaseChatModel,
        messages: list[Any],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        hold = _Hold(self, run_manager)
        try:
            await hold.take()
            _end_admission()
            with hold.marking():
                return await base._agenerate(self, messages, stop=stop, run_manager=run_manager, **kwargs)
        finally:
            hold.leave()

    return _agenerate


def _make_private_stream(base: type[BaseChatModel]) -> Callable[..., Iterator[ChatGenerationChunk]]:
    def _stream(
        self: BaseChatModel,
        messages: list[Any],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        hold = _Hold(self, run_manager)
        try:
            hold.take_sync()
            inner = base._stream(self, messages, stop=stop, run_manager=run_manager, **kwargs)
            # Mark the slots as held only while the provider's generator runs: between chunks the
            # consumer's own calls must take their own slots.
            yield from _scoped_iter(inner, HELD_LLM_SLOTS, hold.marked())
        finally:
            hold.leave()

    return _stream


def _make_private_astream(base: type[BaseChatModel]) -> Callable[..., AsyncIterator[ChatGenerationChunk]]:
    async def _astream(
        self: BaseChatModel,
        messages: list[Any],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> AsyncIterator[ChatGenerationChunk]:
        hold = _Hold(self, run_manager)
        try:
            await hold.take()
            _end_admission()
            inner = base._astream(self, messages, stop=stop, run_manager=run_manager, **kwargs)
            scoped = _scoped_aiter(inner, HELD_LLM_SLOTS, hold.marked())
            try:
                async for chunk in scoped:
                    yield chunk
            finally:
                # ``async for`` does not close what it iterates; closing here ends the provider's
                # stream now rather than whenever the event loop finalises it.
                await scoped.aclose()
        finally:
            hold.leave()

    return _astream
