"""The embedded default model: a verified model file served by llama.cpp on 127.0.0.1.

The front door of ``soothe_planner.local``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from soothe_planner.local.embedded import (
    DEFAULT_MODEL,
    EMBEDDED_MODELS,
    LOCAL_URL_ENV,
    MODEL_ALIAS,
    MODEL_PACKAGES,
    MODEL_SHA256,
    MODEL_SIZE,
    EmbeddedChatOpenAI,
    EmbeddedModel,
    LocalModelServer,
    embedded_model,
    ensure_model_file,
    local_chat_model,
    model_cache_dir,
    part_files,
    shutdown_shared_server,
)

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
