"""Which model does a model string in the configuration name, and can it be built here?

A model string is one of:

- ``local`` — the embedded model (``local_llm.py``), needing the ``local`` extra;
- ``scripted:PATH`` — a JSON list of replies for ``testing.ScriptedChatModel`` (tests, demos);
- ``provider:model`` — LangChain's ``init_chat_model`` spelling (``openai:gpt-4o-mini``,
  ``anthropic:claude-3-5-haiku-latest``); with ``models.base_url`` set, the provider must be
  ``openai`` (any OpenAI-compatible server: vLLM, Ollama, LM Studio, llama.cpp) or the string
  may be a bare model name. A provider outside the table below is passed to LangChain's own
  ``init_chat_model`` when the ``langchain`` package is installed (it knows more providers, and
  says which integration package a provider needs).

What was weighed: ``init_chat_model`` lives in the ``langchain`` package, which this package does
not depend on; the table below does the same job for the providers people use (the integration
package, its chat class and its key variable), and it lets a configuration be checked *before*
anything runs — an unknown provider, or one whose integration is not installed, is a load-time
error that lists what would work. Whether the key is set is checked at resolution, not at load,
so ``validate`` works on a machine that has no keys.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
from dataclasses import dataclass

__all__ = ["PROVIDERS", "Provider", "check_model_spec", "init_chat_model_available", "provider_of", "split_model_spec"]


@dataclass(frozen=True)
class Provider:
    """A LangChain chat-model integration: where its class lives and which variable holds its key."""

    module: str
    class_name: str
    package: str
    key_env: str | None

    def installed(self) -> bool:
        return importlib.util.find_spec(self.module) is not None

    def chat_class(self) -> type:
        cls: type = getattr(importlib.import_module(self.module), self.class_name)
        return cls


PROVIDERS: dict[str, Provider] = {
    "openai": Provider("langchain_openai", "ChatOpenAI", "langchain-openai", "OPENAI_API_KEY"),
    "azure_openai": Provider("langchain_openai", "AzureChatOpenAI", "langchain-openai", "AZURE_OPENAI_API_KEY"),
    "anthropic": Provider("langchain_anthropic", "ChatAnthropic", "langchain-anthropic", "ANTHROPIC_API_KEY"),
    "google_genai": Provider(
        "langchain_google_genai", "ChatGoogleGenerativeAI", "langchain-google-genai", "GOOGLE_API_KEY"
    ),
    "mistralai": Provider("langchain_mistralai", "ChatMistralAI", "langchain-mistralai", "MISTRAL_API_KEY"),
    "groq": Provider("langchain_groq", "ChatGroq", "langchain-groq", "GROQ_API_KEY"),
    "deepseek": Provider("langchain_deepseek", "ChatDeepSeek", "langchain-deepseek", "DEEPSEEK_API_KEY"),
    "fireworks": Provider("langchain_fireworks", "ChatFireworks", "langchain-fireworks", "FIREWORKS_API_KEY"),
    "together": Provider("langchain_together", "ChatTogether", "langchain-together", "TOGETHER_API_KEY"),
    "xai": Provider("langchain_xai", "ChatXAI", "langchain-xai", "XAI_API_KEY"),
    "ollama": Provider("langchain_ollama", "ChatOllama", "langchain-ollama", None),
    "bedrock_converse": Provider("langchain_aws", "ChatBedrockConverse", "langchain-aws", None),
}

# A bare model name is common in other tools' configs; these prefixes say which provider was meant.
_NAME_HINTS = {"gpt-": "openai", "o1": "openai", "o3": "openai", "o4": "openai", "claude": "anthropic",
               "gemini": "google_genai", "mistral": "mistralai", "deepseek": "deepseek", "grok": "xai"}


def init_chat_model_available() -> bool:
    """Whether LangChain's ``init_chat_model`` (the ``langchain`` package) can be imported here."""
    try:
        return importlib.util.find_spec("langchain.chat_models") is not None
    except (ImportError, ValueError):  # a parent package that is missing or half-installed
        return False


def split_model_spec(spec: str) -> tuple[str, str]:
    """``"openai:gpt-4o"`` → ``("openai", "gpt-4o")``; ``"local"`` → ``("local", "")``."""
    if spec == "local":
        return "local", ""
    kind, sep, rest = spec.partition(":")
    if not sep:
        return "", spec
    return kind, rest


def provider_of(spec: str) -> str:
    return split_model_spec(spec)[0]


def check_model_spec(spec: str, *, base_url: str | None = None) -> str:
    """``spec`` unchanged if it names a model this machine can build, else ``ValueError`` saying why."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError("a model string is empty; use 'local', 'provider:model' or 'scripted:PATH'")
    spec = spec.strip()
    kind, name = split_model_spec(spec)
    if kind == "local":
        from soothe_planner.errors import ConfigError
        from soothe_planner.local import embedded_model

        try:
            embedded_model(name)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        return spec
    if kind == "scripted":
        if not name:
            raise ValueError(f"{spec!r} names no script file; write 'scripted:path/to/replies.json'")
        return spec
    if not kind:
        if base_url:  # a bare name is the model served at base_url
            return spec
        hint = next((p for prefix, p in _NAME_HINTS.items() if spec.lower().startswith(prefix)), None)
        way_out = f"write it as '{hint}:{spec}'" if hint else "write it as 'provider:model'"
        raise ValueError(f"model {spec!r} names no provider; {way_out} (or 'local' for the embedded model)")
    if not name:
        raise ValueError(f"model {spec!r} names no model after the provider; e.g. 'openai:gpt-4o-mini'")
    provider = PROVIDERS.get(kind)
    if provider is None:
        close = difflib.get_close_matches(kind, PROVIDERS, n=1)
        if not close and init_chat_model_available() and not base_url:
            return spec  # init_chat_model builds it, or says why not, when the model is resolved
        did_you_mean = f"did you mean {close[0]!r}? " if close else ""
        other = ("" if init_chat_model_available()
                 else "; other providers need LangChain's init_chat_model: pip install langchain")
        raise ValueError(
            f"unknown provider {kind!r} in {spec!r}; {did_you_mean}known providers: "
            f"{', '.join(sorted(PROVIDERS))}, plus 'local' and 'scripted:PATH'{other}"
        )
    if base_url and kind != "openai":
        raise ValueError(
            f"models.base_url points at an OpenAI-compatible server, so the model must be 'openai:NAME' "
            f"or a bare NAME, not {spec!r}"
        )
    if not provider.installed():
        raise ValueError(f"{spec!r} needs the {provider.package} package: pip install {provider.package}")
    return spec
