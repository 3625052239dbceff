"""YAML to ``SootheConfig``, and the one place that builds planners, executors, runs and their graph from it.

The front door of ``soothe_planner.config``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from soothe_planner.config.agent import (
    create_planner_agent,
    policy_config,
)
from soothe_planner.config.defaults import (
    CONFIG_FILE_NAME,
    find_config,
    packaged_config_text,
    write_config,
)
from soothe_planner.config.load import (
    config_from_dict,
    format_validation_error,
    interpolate,
    load_config,
    parse_yaml,
)
from soothe_planner.config.providers import (
    PROVIDERS,
    Provider,
    check_model_spec,
    provider_of,
    split_model_spec,
)
from soothe_planner.config.resolve import (
    SCRIPTED_MODEL_ENV,
    ModelPool,
    ResolvedRun,
    build_graph,
    loop_options,
    resolve_chat_model,
    resolve_checkpointer,
    resolve_controller,
    resolve_executor,
    resolve_loop_planner,
    resolve_persistence,
    resolve_planner,
    resolve_run,
    resolve_seal_key,
    resolve_tools,
)
from soothe_planner.config.schema import (
    CheckpointConfig,
    ExecutionConfig,
    LangfuseConfig,
    ModelsConfig,
    RunConfig,
    ServerConfig,
    SootheConfig,
    SubagentConfig,
    TracingConfig,
)

__all__ = [
    "CONFIG_FILE_NAME",
    "PROVIDERS",
    "SCRIPTED_MODEL_ENV",
    "CheckpointConfig",
    "ExecutionConfig",
    "LangfuseConfig",
    "ModelPool",
    "ModelsConfig",
    "Provider",
    "ResolvedRun",
    "RunConfig",
    "ServerConfig",
    "SootheConfig",
    "SubagentConfig",
    "TracingConfig",
    "build_graph",
    "check_model_spec",
    "config_from_dict",
    "create_planner_agent",
    "find_config",
    "format_validation_error",
    "interpolate",
    "load_config",
    "loop_options",
    "packaged_config_text",
    "parse_yaml",
    "policy_config",
    "provider_of",
    "resolve_chat_model",
    "resolve_checkpointer",
    "resolve_controller",
    "resolve_executor",
    "resolve_loop_planner",
    "resolve_persistence",
    "resolve_planner",
    "resolve_run",
    "resolve_seal_key",
    "resolve_tools",
    "split_model_spec",
    "write_config",
]
