"""A ``provider:model`` outside the package's table goes to LangChain's ``init_chat_model``."""

from __future__ import annotations

import importlib.machinery
import sys
import types
from typing import Any

import pytest

from soothe_planner.config import config_from_dict, resolve_chat_model
from soothe_planner.errors import ConfigError
from soothe_planner.testing import ScriptedChatModel


def _fake_langchain(monkeypatch: pytest.MonkeyPatch, seen: list[tuple[str, dict[str, Any]]], result: Any) -> None:
    """A stand-in ``langchain.chat_models`` (the real package is not a dependency of this one)."""
    root = types.ModuleType("langchain")
    chat = types.ModuleType("langchain.chat_models")
    root.__spec__ = importlib.machinery.ModuleSpec("langchain", None, is_package=True)
    chat.__spec__ = importlib.machinery.ModuleSpec("langchain.chat_models", None)

    def init_chat_model(spec: str, **kwargs: Any) -> Any:
        seen.append((spec, kwargs))
        if isinstance(result, Exception):
            raise result
        return result

    chat.init_chat_model = init_chat_model  # type: ignore[attr-defined]
    root.chat_models = chat  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "langchain", root)
    monkeypatch.setitem(sys.modules, "langchain.chat_models", chat)


def test_an_unknown_provider_is_built_by_init_chat_model_with_the_configured_limits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedChatModel([])
    _fake_langchain(monkeypatch, seen, model)
    config = config_from_dict({"models": {"default": "cohere:command-r", "temperature": 0.2, "max_tokens": 300}})
    assert resolve_chat_model(config) is model
    assert seen == [("cohere:command-r", {"temperature": 0.2, "max_tokens": 300})]


def test_init_chat_models_refusal_is_a_config_error_naming_the_model(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_langchain(monkeypatch, [], ValueError("Unsupported model_provider='nosuch'"))
    config = config_from_dict({"models": {"default": "nosuch:model-1"}})
    with pytest.raises(ConfigError, match="model 'nosuch:model-1' could not be built by init_chat_model"):
        resolve_chat_model(config)


def test_without_langchain_an_unknown_provider_is_refused_at_load_saying_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "langchain", None)  # importing it fails, as when it is not installed
    with pytest.raises(ConfigError, match=r"unknown provider 'cohere'.*pip install langchain"):
        config_from_dict({"models": {"default": "cohere:command-r"}})


def test_a_misspelt_known_provider_is_still_caught_at_load(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_langchain(monkeypatch, [], ScriptedChatModel([]))
    with pytest.raises(ConfigError, match="did you mean 'openai'"):
        config_from_dict({"models": {"default": "opnai:gpt-4o"}})
