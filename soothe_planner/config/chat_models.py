"""How is a chat model built from a model string?

``provider:name`` strings name a provider of the package's table (``providers.py``), ``local`` the
embedded model, ``scripted:PATH`` a scripted model (``scripted.py``), and any other provider goes
to LangChain's ``init_chat_model``. A missing API key names its environment variable. Every model
the package builds has its SDK's own retries off: they would run inside the LLM slot and multiply
the planner's transport retries (``planner/transport.py``). ``ModelPool`` builds each model string
once per run, so every part of the run shares one instance per model (see ``resolve.py``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from pydantic import SecretStr

from soothe_planner.config.providers import PROVIDERS, split_model_spec
from soothe_planner.config.redaction import redacted
from soothe_planner.config.scripted import load_script
from soothe_planner.errors import ConfigError

if TYPE_CHECKING:
    from soothe_planner.config.schema import SootheConfig

__all__ = ["SCRIPTED_MODEL_ENV", "ModelPool", "resolve_chat_model", "uses_openai_compatible_server"]

SCRIPTED_MODEL_ENV = "SOOTHE_SCRIPTED_MODEL"
"""A path to a JSON list of replies: every model of the run becomes one shared ScriptedChatModel."""


def _max_tokens(config: SootheConfig) -> int:
    return config.models.max_tokens or config.planner.max_output_tokens


def _api_key(config: SootheConfig, spec: str, default_env: str | None, required: bool) -> SecretStr | None:
    env_name = config.models.api_key_env or default_env
    if env_name is None:
        return None
    value = os.environ.get(env_name)
    if not value:
        if required or config.models.api_key_env:
            raise ConfigError(
                f"model {spec!r} needs an API key: set the environment variable {env_name}"
                + ("" if config.models.api_key_env else " (or name another one in models.api_key_env)")
            )
        return None
    return SecretStr(value)


def _build_model(config: SootheConfig, spec: str) -> BaseChatModel:
    kind, name = split_model_spec(spec)
    max_tokens = _max_tokens(config)
    temperature = config.models.temperature
    if kind == "local":
        from soothe_planner.local import local_chat_model

        return local_chat_model(max_tokens=max_tokens, temperature=temperature, model=name)
    if kind == "scripted":
        # its errors are printed and saved: a path that came from the environment is not shown
        label = f"${SCRIPTED_MODEL_ENV}" if name == os.environ.get(SCRIPTED_MODEL_ENV) else config.redact_text(name)
        return load_script(name, label=label)
    if config.models.base_url:
        from langchain_openai import ChatOpenAI

        key = _api_key(config, spec, None, required=False)
        # OpenAI-compatible servers (llama.cpp among them) ignore max_completion_tokens, which is what
        # ChatOpenAI sends for max_tokens; the plain field in the body is what they honour.
        return ChatOpenAI(
            base_url=config.models.base_url,
            model=name,
            api_key=key or SecretStr("not-needed"),
            temperature=temperature,
            max_tokens=max_tokens,
            extra_body={"max_tokens": max_tokens},
            max_retries=0,  # the planner's transport policy retries; the SDK's 2 would multiply it
        )
    if kind not in PROVIDERS:
        return _init_chat_model(config, spec, max_tokens, temperature)
    provider = PROVIDERS[kind]
    key = _api_key(config, spec, provider.key_env, required=provider.key_env is not None)
    kwargs: dict[str, Any] = {"model": name, "temperature": temperature, "max_tokens": max_tokens}
    if key is not None:
        kwargs["api_key"] = key
    try:
        chat_class = provider.chat_class()
        if "max_retries" in getattr(chat_class, "model_fields", {}):
            # SDK retries run inside the LLM slot and multiply the planner's own (planner/transport.py)
            kwargs["max_retries"] = 0
        built: BaseChatModel = chat_class(**kwargs)
        return built
    except Exception as exc:
        raise ConfigError(f"model {spec!r} could not be built: {type(exc).__name__}: {exc}") from None


def _init_chat_model(config: SootheConfig, spec: str, max_tokens: int, temperature: float) -> BaseChatModel:
    """A provider outside the table, built by LangChain's ``init_chat_model`` (the ``langchain`` package)."""
    try:
        from langchain.chat_models import init_chat_model
    except ImportError:
        raise ConfigError(
            f"model {spec!r}: its provider is not in the package's table, and LangChain's init_chat_model "
            "is not installed to build it: pip install langchain"
        ) from None
    kwargs: dict[str, Any] = {"temperature": temperature, "max_tokens": max_tokens}
    key = _api_key(config, spec, None, required=False)  # only when models.api_key_env names one
    if key is not None:
        kwargs["api_key"] = key
    try:
        model = init_chat_model(spec, **kwargs)
    except Exception as exc:
        raise ConfigError(f"model {spec!r} could not be built by init_chat_model: {type(exc).__name__}: {exc}") from None
    if not isinstance(model, BaseChatModel):
        raise ConfigError(f"model {spec!r}: init_chat_model returned a {type(model).__name__}, not a chat model")
    return model


@dataclass
class ModelPool:
    """Builds each model string once, so every part of a run shares one instance per model."""

    config: SootheConfig
    built: dict[str, BaseChatModel] = field(default_factory=dict)

    def get(self, spec: str | None = None) -> BaseChatModel:
        scripted = os.environ.get(SCRIPTED_MODEL_ENV)
        spec = f"scripted:{scripted}" if scripted else (spec or self.config.models.default)
        if spec not in self.built:
            self.built[spec] = _build_model(self.config, spec)
        return self.built[spec]


@redacted
def resolve_chat_model(config: SootheConfig, spec: str | None = None) -> BaseChatModel:
    """The chat model named by ``spec`` (default: ``models.default``); ``ConfigError`` if it cannot be built."""
    return ModelPool(config).get(spec)


def uses_openai_compatible_server(config: SootheConfig) -> bool:
    return split_model_spec(config.models.default)[0] == "local" or config.models.base_url is not None
