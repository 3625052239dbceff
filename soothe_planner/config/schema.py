"""How does one YAML file become a validated ``SootheConfig``, and how is a run built from it?

The file loads into frozen, keyword-only pydantic models and into nothing else; every default is
defined once, on a model field (the ``planner:`` section *is* ``models.PlannerSettings`` and the
``concurrency:`` section *is* ``concurrency.ConcurrencyPolicy``). A mistake is a ``ConfigError``
with one line naming the file, the dotted key path, the value and the rule — an unknown key comes
with the closest known one (``concurrency.max_paralel_steps: unknown key; did you mean
max_parallel_steps?``) — raised before any work starts.

What was weighed:

- **Relative paths** (``execution.workspace``, ``checkpoint.path``, ``scripted:PATH``) are relative
  to the folder of the config file, not to the current directory: a config and the files it names
  travel together, and ``validate`` gives the same answer wherever it is run from. That holds for
  the defaults too: a file with no ``execution:`` or ``checkpoint:`` section gets its workspace
  and its checkpoint beside it (the sections are validated as empty mappings, with the file's
  folder in hand, rather than built by a default factory that knows no folder). A config built
  from a dict in Python resolves them against the current directory.
- **A workspace of ``/`` or of the home folder is refused** unless
  ``execution.allow_broad_workspace: true`` says so: the built-in tools would reach every file
  there (keys, shell profiles, other projects). The message names the rule, not the path, since
  the path may have come from the environment.
- **Secrets never live in the file.** API keys are read from the environment at resolution time
  (``models.api_key_env`` names the variable); Langfuse keys only from ``LANGFUSE_PUBLIC_KEY`` /
  ``LANGFUSE_SECRET_KEY``; a PostgreSQL DSN, which may hold a password, is a ``SecretStr``. Error
  messages never echo a value that came from an environment variable.
- ``${VAR}`` and ``${VAR:-default}`` are expanded in string values after ``yaml`` parsing (safe
  loader only; duplicate keys are an error rather than a silent last-one-wins); ``$${`` is a literal
  ``${``. A missing variable with no default names the variable and the key.
- Loading does not need keys or servers: ``openai.yaml`` loads on a machine with no key; building
  the model (``resolve_*``) is what fails fast, naming the variable to set.
"""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationInfo,
    field_validator,
    model_validator,
)

from soothe_planner.concurrency import ConcurrencyPolicy
from soothe_planner.config.providers import check_model_spec, split_model_spec
from soothe_planner.config.redaction import HIDDEN, scrub
from soothe_planner.execution import StepCalls
from soothe_planner.models import FailurePolicy, PlannerSettings
from soothe_planner.tools import BUILTIN_TOOL_NAMES

__all__ = [
    "CheckpointConfig",
    "ExecutionConfig",
    "LangfuseConfig",
    "ModelsConfig",
    "RunConfig",
    "ServerConfig",
    "SootheConfig",
    "SubagentConfig",
    "TracingConfig",
]

_TOOL_SPEC = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_NAME = re.compile(r"^[A-Za-z_][\w-]*$")


def _base_dir(info: ValidationInfo) -> Path:
    ctx = info.context or {}
    return Path(ctx.get("base_dir") or Path.cwd())


def _anchor(value: Path | str, info: ValidationInfo) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else (_base_dir(info) / path).resolve()


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _check_model_field(spec: str, info: ValidationInfo, base_url: str | None = None) -> str:
    spec = check_model_spec(spec, base_url=base_url)
    kind, name = split_model_spec(spec)
    if kind == "scripted":
        path = _anchor(name, info)
        if not path.is_file():
            raise ValueError(f"script file {name!r} does not exist (looked for {path.name} in {path.parent.name}/)")
        return f"scripted:{path}"
    return spec


class ModelsConfig(_Section):
    """Which chat models the planner, the executor and subagents use."""

    # base_url comes first so the model strings below are checked knowing whether it is set
    base_url: str | None = Field(
        default=None,
        description="An OpenAI-compatible server (vLLM, Ollama, LM Studio, llama.cpp); the model string is "
        "then the model it serves.",
    )
    default: str = Field(
        default="local",
        description="'local' (the embedded model), 'provider:model' (e.g. 'openai:gpt-4o-mini'), "
        "or 'scripted:PATH' (a JSON list of replies, for tests and demos).",
    )
    assess: str | None = Field(
        default=None, description="An optional, cheaper model for phase 1 (the status assessment)."
    )
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, description="Sampling temperature.")
    max_tokens: int | None = Field(
        default=None, ge=16, description="Output token cap per call (default: planner.max_output_tokens)."
    )
    api_key_env: str | None = Field(
        default=None,
        description="Name of the environment variable holding the API key (default: the provider's own, "
        "e.g. OPENAI_API_KEY). The key itself never goes in the file.",
    )

    @field_validator("base_url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^https?://[^\s/]+", value):
            raise ValueError(f"{value!r} is not an http(s) URL, e.g. 'http://127.0.0.1:8000/v1'")
        return value

    @field_validator("default", "assess")
    @classmethod
    def _spec(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return None
        return _check_model_field(value, info, info.data.get("base_url"))

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", value):
            raise ValueError("must be the NAME of an environment variable (e.g. OPENAI_API_KEY), not a key")
        return value


class SubagentConfig(_Section):
    """A ReAct agent over a subset of the tools, offered to the planner as one capability."""

    description: str = Field(min_length=1, description="What the subagent is for (shown to the planner).")
    tools: list[str] = Field(
        default_factory=list,
        description="Tools it may use: names of tools in execution.tools (e.g. 'read_file') or tool specs.",
    )
    model: str | None = Field(default=None, description="Its own model string (default: models.default).")

    @field_validator("model")
    @classmethod
    def _model(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else _check_model_field(value, info)


def _check_tool_spec(spec: str) -> str:
    if spec.startswith("builtin:"):
        name = spec.removeprefix("builtin:")
        if name not in BUILTIN_TOOL_NAMES:
            import difflib

            close = difflib.get_close_matches(name, BUILTIN_TOOL_NAMES, n=1)
            hint = f"did you mean 'builtin:{close[0]}'? " if close else ""
            raise ValueError(f"unknown built-in tool {spec!r}; {hint}built-ins: {', '.join(BUILTIN_TOOL_NAMES)}")
        return spec
    if not _TOOL_SPEC.match(spec):
        raise ValueError(f"tool spec {spec!r} is not 'builtin:NAME' or 'package.module:attribute'")
    return spec


class ExecutionConfig(_Section):
    """How steps run: tools, subagents, the failure policy and the workspace."""

    failure_policy: str = Field(
        default="block", description="'block' (dependents of a failed step are skipped) or 'retry(n)' then block."
    )
    # before ``workspace``: its validator reads this one
    allow_broad_workspace: bool = Field(
        default=False,
        description="Allow a workspace of the filesystem root or the home folder (refused otherwise: the "
        "built-in tools would reach all of it).",
    )
    step_timeout_s: float | None = Field(
        default=300.0, gt=0, description="A step running longer fails with error_type 'timeout' (null: no limit)."
    )
    workspace: Path = Field(
        default=Path("."),
        validate_default=True,
        description="The folder the built-in tools work in (relative to the config file)."
    )
    tools: list[str] = Field(
        default_factory=lambda: [f"builtin:{n}" for n in BUILTIN_TOOL_NAMES if n != "write_file"],
        description="Tool specs: 'builtin:NAME' or 'package.module:attribute' (a BaseTool or a function).",
    )
    read_only_tools: list[str] = Field(
        default_factory=list,
        description="Names of non-built-in tools that only read (offered while planning; built-ins carry "
        "their own flag).",
    )
    subagents: dict[str, SubagentConfig] = Field(default_factory=dict, description="Subagents by name.")
    step_calls: StepCalls = Field(
        default_factory=StepCalls,
        description="Output caps per kind of model call a step makes (model_step, tool_args, agent); a cap "
        "only lowers models.max_tokens.",
    )
    recover_text_tool_calls: bool = Field(
        default=True,
        description="Run a tool call a model wrote as text in a step's output when the step may use that tool "
        "(off: the step fails with unexecuted_tool_call, as it does for any other text call).",
    )

    @field_validator("failure_policy")
    @classmethod
    def _policy(cls, value: str) -> str:
        return str(FailurePolicy.parse(value))

    @field_validator("workspace")
    @classmethod
    def _workspace(cls, value: Path, info: ValidationInfo) -> Path:
        path = _anchor(value, info)
        if not info.data.get("allow_broad_workspace"):
            broad = {Path("/"): "the filesystem root"}
            with contextlib.suppress(KeyError, RuntimeError):  # no home folder known: nothing to compare
                broad[Path.home().resolve()] = "the home folder"
            if path.resolve() in broad:
                raise ValueError(
                    f"is {broad[path.resolve()]}, so the built-in tools would reach every file in it; "
                    "point execution.workspace at a project folder, or set execution.allow_broad_workspace: true"
                )
        return path

    @field_validator("tools")
    @classmethod
    def _tools(cls, value: list[str]) -> list[str]:
        seen: set[str] = set()
        for spec in value:
            _check_tool_spec(spec)
            if spec in seen:
                raise ValueError(f"tool spec {spec!r} is listed twice")
            seen.add(spec)
        return value

    @field_validator("subagents")
    @classmethod
    def _subagent_names(cls, value: dict[str, SubagentConfig]) -> dict[str, SubagentConfig]:
        for name, sub in value.items():
            if not _NAME.match(name):
                raise ValueError(f"subagent name {name!r} must be letters, digits, '_' or '-'")
            for spec in sub.tools:
                if ":" in spec:
                    _check_tool_spec(spec)
        return value

    @property
    def policy(self) -> FailurePolicy:
        """``failure_policy`` as a ``FailurePolicy``."""
        return FailurePolicy.parse(self.failure_policy)


class CheckpointConfig(_Section):
    """Where the loop's state is saved, so a run can be resumed and shown later."""

    backend: Literal["memory", "sqlite", "postgres"] = Field(
        default="sqlite", description="memory (this process only), sqlite (one machine) or postgres (many workers)."
    )
    path: Path = Field(
        default=Path(".soothe/checkpoints.sqlite"),
        validate_default=True,
        description="The SQLite file (relative to the config file); created on first use.",
    )
    dsn: SecretStr | None = Field(
        default=None, description="PostgreSQL connection string, e.g. ${SOOTHE_PG_DSN} (postgres only)."
    )

    @field_validator("path")
    @classmethod
    def _path(cls, value: Path, info: ValidationInfo) -> Path:
        return _anchor(value, info)

    @model_validator(mode="after")
    def _backend_needs(self) -> CheckpointConfig:
        if self.backend == "postgres":
            if self.dsn is None or not self.dsn.get_secret_value():
                raise ValueError("backend 'postgres' needs a dsn (e.g. dsn: ${SOOTHE_PG_DSN})")
            import importlib.util

            if importlib.util.find_spec("langgraph.checkpoint.postgres") is None:
                raise ValueError("backend 'postgres' needs: pip install 'soothe-planner[postgres]'")
        elif self.dsn is not None:
            raise ValueError(f"dsn is only used by the postgres backend, not {self.backend!r}")
        return self


class LangfuseConfig(_Section):
    """Langfuse tracing. Keys come only from LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY."""

    enabled: bool = Field(default=False, description="Send a trace per run (a no-op when the keys are unset).")
    base_url: str | None = Field(default=None, description="The Langfuse server (default: LANGFUSE_BASE_URL or cloud).")
    tags: list[str] = Field(default_factory=list, description="Tags on every trace.")
    user_id: str | None = Field(default=None, description="User id on every trace.")
    environment: str | None = Field(default=None, description="Environment name, e.g. 'dev' or 'ci'.")
    release: str | None = Field(default=None, description="Release or version label.")
    sample_rate: float = Field(default=1.0, ge=0.0, le=1.0, description="Fraction of runs traced.")


class TracingConfig(_Section):
    """Tracing backends (only Langfuse for now)."""

    langfuse: LangfuseConfig = Field(default_factory=LangfuseConfig, description="Langfuse settings.")


class RunConfig(_Section):
    """Which optional stages of the StrangeLoop run."""

    synthesize: bool = Field(default=True, description="Write a final answer from the step results.")
    approval: bool = Field(default=False, description="Pause for approval of each validated plan.")
    intake: bool = Field(default=True, description="Route a goal first (trivial goals are answered directly).")


ClientKey = Literal["model", "approval", "max_iterations", "max_plan_steps"]
"""The run-context keys there are; ``server.client_context`` says which of them a server's client may set."""
_CLIENT_KEYS_BY_DEFAULT: tuple[ClientKey, ...] = ("max_iterations", "max_plan_steps")


class ServerConfig(_Section):
    """What a LangGraph server's client may change for its run, through the run's context.

    The operator's config decides; a client asks. A key not listed in ``client_context`` is
    refused, and so is a numeric value above its ceiling or a model not listed here. A scripted
    model (``scripted:PATH``) is never a client's to name: it opens a file on the server.
    """

    client_context: list[ClientKey] = Field(
        default_factory=lambda: list(_CLIENT_KEYS_BY_DEFAULT),
        description="Run-context keys a client may set (model, approval, max_iterations, max_plan_steps); "
        "by default only the two caps, each up to its ceiling.",
    )
    max_iterations: int | None = Field(
        default=None, ge=1,
        description="The most iterations a client may ask for (default: planner.max_iterations).",
    )
    max_plan_steps: int | None = Field(
        default=None, ge=1,
        description="The most plan steps a client may ask for (default: planner.max_plan_steps).",
    )
    client_models: list[str] = Field(
        default_factory=list,
        description="Model strings a client may name when 'model' is in client_context (models.default "
        "always may be named); never a scripted model.",
    )

    @field_validator("client_models")
    @classmethod
    def _client_models(cls, value: list[str]) -> list[str]:
        out = []
        for spec in value:
            if split_model_spec(spec.strip())[0] == "scripted":
                raise ValueError(f"{spec!r}: a client may never name a scripted model (it opens a file on the server)")
            out.append(check_model_spec(spec))
        return out


class SootheConfig(_Section):
    """One run's whole configuration. Build it with ``load_config(path)``; every field has a default."""

    models: ModelsConfig = Field(default_factory=ModelsConfig, description="Chat models.")
    planner: PlannerSettings = Field(default_factory=PlannerSettings, description="How the planner behaves.")
    concurrency: ConcurrencyPolicy = Field(default_factory=ConcurrencyPolicy, description="Limits at every level.")
    execution: ExecutionConfig = Field(default_factory=ExecutionConfig, description="How steps run.")
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig, description="Where state is saved.")
    tracing: TracingConfig = Field(default_factory=TracingConfig, description="Tracing.")
    run: RunConfig = Field(default_factory=RunConfig, description="Optional loop stages.")
    server: ServerConfig = Field(
        default_factory=ServerConfig, description="What a LangGraph server's clients may change per run."
    )
    _source: str | None = PrivateAttr(default=None)
    # where ``${VAR}`` values went, and the values: never echoed (see ``load.py``)
    _from_env: frozenset[tuple[str | int, ...]] = PrivateAttr(default=frozenset())
    # (id of this object, its ConcurrencyController): see ``resolve.resolve_controller``
    _controller: tuple[int, Any] | None = PrivateAttr(default=None)
    _env_values: frozenset[str] = PrivateAttr(default=frozenset())

    @property
    def source(self) -> str | None:
        """The file this config was loaded from, if any."""
        return self._source

    @model_validator(mode="before")
    @classmethod
    def _sections_with_paths(cls, data: object) -> object:
        # Validated as present-but-empty so their path defaults see the config file's folder; a
        # default_factory would build them with no validation context, i.e. against the cwd.
        if isinstance(data, dict):
            data = dict(data)
            for section in ("execution", "checkpoint"):
                if data.get(section) is None:
                    data[section] = {}
        return data

    @model_validator(mode="before")
    @classmethod
    def _shared_cap_dsn(cls, data: object) -> object:
        # A cap shared through PostgreSQL uses the checkpoints' database unless it names its own:
        # the replicas that share a cap already share that database (concurrency/shared.py).
        if not isinstance(data, dict):
            return data
        concurrency, checkpoint = data.get("concurrency"), data.get("checkpoint")
        if not (isinstance(concurrency, dict) and concurrency.get("backend") == "postgres"
                and concurrency.get("dsn") is None):
            return data
        if isinstance(checkpoint, CheckpointConfig):
            checkpoint = {"backend": checkpoint.backend, "dsn": checkpoint.dsn}
        if isinstance(checkpoint, dict) and checkpoint.get("backend") == "postgres" and checkpoint.get("dsn"):
            dsn = checkpoint["dsn"]
            secret = dsn.get_secret_value() if isinstance(dsn, SecretStr) else dsn
            return {**data, "concurrency": {**concurrency, "dsn": secret}}
        return data

    def redact_text(self, text: str) -> str:
        """``text`` with every value that came from an environment variable replaced by ``(hidden)``."""
        return scrub(text, self._env_values)

    def redacted_dump(self) -> dict[str, Any]:
        """``model_dump(mode="json")`` with every value that came from an environment variable hidden."""
        data: dict[str, Any] = self.model_dump(mode="json")
        for loc in self._from_env:
            node: object = data
            try:
                for part in loc[:-1]:
                    node = node[part]  # type: ignore[index]
                node[loc[-1]]  # type: ignore[index]  # present in the dump (not dropped by a validator)
            except (KeyError, IndexError, TypeError):
                continue
            node[loc[-1]] = HIDDEN  # type: ignore[index]
        return data

    @model_validator(mode="after")
    def _subagent_tools_exist(self) -> SootheConfig:
        builtin_listed = {s.removeprefix("builtin:") for s in self.execution.tools if s.startswith("builtin:")}
        custom = any(not s.startswith("builtin:") for s in self.execution.tools)
        for name, sub in self.execution.subagents.items():
            for tool in sub.tools:
                if ":" in tool or custom:  # custom tools' names are known only once imported
                    continue
                if tool not in builtin_listed:
                    raise ValueError(
                        f"execution.subagents.{name}.tools names {tool!r}, which is not in execution.tools "
                        f"(listed: {', '.join(sorted(builtin_listed)) or 'none'})"
                    )
        return self
