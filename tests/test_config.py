"""YAML → SootheConfig: the examples load, every mistake is one clear line, and resolution fails fast."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from soothe_planner.cli import main
from soothe_planner.concurrency import ConcurrencyPolicy
from soothe_planner.config import (
    SootheConfig,
    config_from_dict,
    load_config,
    resolve_chat_model,
    resolve_executor,
    resolve_persistence,
    resolve_planner,
    resolve_run,
    resolve_tools,
)
from soothe_planner.errors import ConfigError
from soothe_planner.models import PlannerSettings

ROOT = Path(__file__).resolve().parents[1]
BAD = sorted((Path(__file__).parent / "data" / "bad_configs").glob("*.yaml"))
SCRIPT = Path(__file__).parent / "data" / "cli" / "todo_done.json"


def _expectations(path: Path) -> tuple[list[str], list[str]]:
    lines = path.read_text().splitlines()
    expect = [line.removeprefix("# expect: ") for line in lines if line.startswith("# expect: ")]
    secrets = [line.removeprefix("# secret: ") for line in lines if line.startswith("# secret: ")]
    return expect, secrets


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SOOTHE_TEST_UNSET_VAR", "OPENAI_MODEL", "SOOTHE_MODEL", "SOOTHE_CI_MODEL", "SOOTHE_LANGFUSE",
                 "OPENAI_API_KEY", "SOOTHE_SCRIPTED_MODEL"):
        monkeypatch.delenv(name, raising=False)


# --------------------------------------------------------------------------- the examples


@pytest.mark.parametrize("name", ["default.yaml", "openai.yaml", "ci.yaml"])
def test_every_example_config_loads_without_keys(name: str) -> None:
    config = load_config(ROOT / "config" / name)
    assert config.source == str(ROOT / "config" / name)
    assert config.execution.workspace == ROOT / "examples" / "workspace"


def test_default_config_runs_on_the_embedded_model_with_function_calling() -> None:
    config = load_config(ROOT / "config" / "default.yaml")
    assert config.models.default == "local:1.5b"
    assert config.planner.structured_output_method == "function_calling"
    assert config.checkpoint.path == ROOT / ".soothe" / "checkpoints.sqlite"


def test_sample_workspace_has_a_few_todo_lines() -> None:
    files = [p for p in (ROOT / "examples" / "workspace").rglob("*") if p.is_file()]
    assert 3 <= len(files) <= 5
    assert sum(p.read_text().count("TODO") for p in files) >= 4


def test_env_overrides_the_example_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOOTHE_CI_MODEL", f"scripted:{SCRIPT}")
    assert load_config(ROOT / "config" / "ci.yaml").models.default == f"scripted:{SCRIPT}"


# --------------------------------------------------------------------------- defaults live once


def test_empty_file_gives_the_model_defaults(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text("")
    config = load_config(tmp_path / "c.yaml")
    assert config.planner == PlannerSettings()
    assert config.concurrency == ConcurrencyPolicy()
    assert config.model_dump(exclude={"execution", "checkpoint"}) == SootheConfig().model_dump(
        exclude={"execution", "checkpoint"}
    )


def test_planner_and_concurrency_sections_are_the_library_models() -> None:
    fields = SootheConfig.model_fields
    assert fields["planner"].annotation is PlannerSettings
    assert fields["concurrency"].annotation is ConcurrencyPolicy


def _sections(model: type[BaseModel]) -> list[type[BaseModel]]:
    out = [model]
    for f in model.model_fields.values():
        ann = f.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel) and ann not in (PlannerSettings, ConcurrencyPolicy):
            out += _sections(ann)
    return out


def test_every_config_field_is_documented_and_every_section_frozen_and_strict() -> None:
    from soothe_planner.config import SubagentConfig

    for section in {*_sections(SootheConfig), SubagentConfig}:
        assert section.model_config.get("frozen") and section.model_config.get("extra") == "forbid", section
        for name, f in section.model_fields.items():
            assert f.description, f"{section.__name__}.{name} has no description"


def test_config_is_frozen() -> None:
    config = SootheConfig()
    with pytest.raises(Exception, match="frozen"):
        config.models = config.models  # type: ignore[misc]


def test_relative_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yaml").write_text("execution: {workspace: ws}\ncheckpoint: {path: state/x.sqlite}\n")
    config = load_config(tmp_path / "sub" / "c.yaml")
    assert config.execution.workspace == tmp_path / "sub" / "ws"
    assert config.checkpoint.path == tmp_path / "sub" / "state" / "x.sqlite"


# --------------------------------------------------------------------------- interpolation


def test_env_interpolation_with_default_and_escape() -> None:
    env = {"STEPS": "5"}
    config = config_from_dict(
        {"planner": {"max_plan_steps": "${STEPS}", "max_iterations": "${ITERS:-7}"},
         "tracing": {"langfuse": {"release": "$${NOT_A_VAR}"}}},
        env=env,
    )
    assert config.planner.max_plan_steps == 5 and config.planner.max_iterations == 7
    assert config.tracing.langfuse.release == "${NOT_A_VAR}"


def test_a_value_from_the_environment_is_never_echoed_in_an_error() -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict({"planner": {"max_iterations": "${X}"}}, env={"X": "sk-very-secret"})
    assert "sk-very-secret" not in str(info.value) and "planner.max_iterations = (hidden)" in str(info.value)


def test_secrets_are_not_in_repr() -> None:
    pytest.importorskip("langgraph.checkpoint.postgres", reason="needs the postgres extra")
    config = config_from_dict(
        {"checkpoint": {"backend": "postgres", "dsn": "${DSN}"}}, env={"DSN": "postgresql://u:pw-123@h/db"}
    )
    assert "pw-123" not in repr(config) and "pw-123" not in str(config)
    assert config.checkpoint.dsn is not None and "pw-123" in config.checkpoint.dsn.get_secret_value()


# --------------------------------------------------------------------------- the bad-config corpus


def test_the_bad_config_corpus_is_large_enough() -> None:
    assert len(BAD) >= 25


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_bad_config_gives_its_expected_one_line_message(path: Path) -> None:
    expect, secrets = _expectations(path)
    assert expect, f"{path.name} has no '# expect:' line"
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    for fragment in expect:
        assert fragment in message
    for secret in secrets:
        assert secret not in message


@pytest.mark.parametrize("path", BAD, ids=[p.stem for p in BAD])
def test_validate_exits_2_with_the_message_on_stderr(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("soothe-planner: error: ") and err.count("\n") == 1
    assert all(fragment in err for fragment in _expectations(path)[0])


@pytest.mark.subprocess
def test_validate_through_the_console_script() -> None:
    exe = Path(sys.executable).parent / "soothe-planner"
    bad = subprocess.run([str(exe), "validate", str(BAD[1])], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "did you mean max_parallel_steps?" in bad.stderr and "Traceback" not in bad.stderr
    good = subprocess.run([str(exe), "validate", str(ROOT / "config" / "default.yaml")], capture_output=True,
                          text=True, timeout=60)
    assert good.returncode == 0 and "valid" in good.stdout


def test_missing_and_folder_paths_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "nope.yaml")
    with pytest.raises(ConfigError, match="is a folder"):
        load_config(tmp_path)


# --------------------------------------------------------------------------- resolution


def test_openai_without_a_key_fails_fast_naming_the_variable() -> None:
    config = load_config(ROOT / "config" / "openai.yaml")
    with pytest.raises(ConfigError, match="set the environment variable OPENAI_API_KEY"):
        resolve_planner(config)


def test_openai_with_a_key_builds_chat_openai_and_keeps_the_key_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_openai import ChatOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-123456")
    model = resolve_chat_model(load_config(ROOT / "config" / "openai.yaml"))
    assert isinstance(model, ChatOpenAI) and model.model_name == "gpt-4o-mini"
    assert "sk-test-123456" not in repr(model)


def test_base_url_builds_an_openai_compatible_client_with_max_tokens_in_the_body() -> None:
    from langchain_openai import ChatOpenAI

    config = config_from_dict({"models": {"base_url": "http://127.0.0.1:1/v1", "default": "qwen", "max_tokens": 99}})
    model = resolve_chat_model(config)
    assert isinstance(model, ChatOpenAI) and model.openai_api_base == "http://127.0.0.1:1/v1"
    assert model.extra_body == {"max_tokens": 99}
    planner = resolve_planner(config)
    assert planner.settings.structured_output_method == "function_calling"


@pytest.mark.parametrize("spec", ["local", "local:0.5b", "local:1.5b"])
def test_every_embedded_model_gets_function_calling_under_auto(spec: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the embedded server answers json_schema with HTTP 500: "auto" must not pick it for any embedded model
    monkeypatch.setenv("SOOTHE_LOCAL_LLM_URL", "http://127.0.0.1:1/v1")  # no server is started
    planner = resolve_planner(config_from_dict({"models": {"default": spec}}))
    assert planner.settings.structured_output_method == "function_calling"


def test_explicit_model_wins_and_keeps_the_configured_method() -> None:
    from soothe_planner.testing import ScriptedChatModel

    model = ScriptedChatModel([])
    config = config_from_dict({"models": {"base_url": "http://127.0.0.1:1/v1", "default": "qwen"}})
    planner = resolve_planner(config, model)
    assert planner.settings.structured_output_method == "auto"


def test_planner_and_executor_share_one_controller_and_one_model() -> None:
    config = config_from_dict({"models": {"default": f"scripted:{SCRIPT}"}, "execution": {"workspace": str(ROOT)}})
    run = resolve_run(config)
    assert run.planner.controller is run.controller is run.executor.controller
    assert run.executor.agent_model is not None


def test_builtin_tools_resolve_over_the_workspace() -> None:
    config = load_config(ROOT / "config" / "default.yaml")
    tools = resolve_tools(config)
    assert [t.name for t in tools] == ["list_dir", "read_file", "search_text", "write_file", "count_files", "count_lines"]
    assert "README.md" in tools[0].invoke({})


def test_imported_tool_specs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_tools.py").write_text(
        "from langchain_core.tools import tool\n"
        "@tool\ndef shout(text: str) -> str:\n    '''Upper-case the text.'''\n    return text.upper()\n"
        "def whisper(text: str, times: int = 1) -> str:\n    '''Lower-case the text.'''\n    return text.lower()\n"
        "NOT_A_TOOL = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    config = config_from_dict({"execution": {"tools": ["my_tools:shout", "my_tools:whisper"],
                                             "read_only_tools": ["shout"]}})
    executor = resolve_executor(config, _scripted())
    assert sorted(executor.tools) == ["shout", "whisper"]
    assert [t.name for t in executor.read_only_tools] == ["shout"]
    for spec, message in [
        ("my_tools:NOT_A_TOOL", "'my_tools:NOT_A_TOOL' is a int, not a BaseTool or a function"),
        ("my_tools:missing", "'my_tools' has no attribute 'missing'"),
        ("no_such_module_xyz:tool", "cannot import module 'no_such_module_xyz'"),
    ]:
        with pytest.raises(ConfigError, match=message):
            resolve_tools(config_from_dict({"execution": {"tools": [spec]}}))


def test_read_only_tool_that_does_not_exist_is_an_error() -> None:
    config = config_from_dict({"execution": {"workspace": str(ROOT), "read_only_tools": ["grep"]}})
    with pytest.raises(ConfigError, match=r"execution\.read_only_tools: 'grep' not among the tools"):
        resolve_executor(config, _scripted())


def test_missing_workspace_is_an_error_at_resolution(tmp_path: Path) -> None:
    config = config_from_dict({"execution": {"workspace": str(tmp_path / "missing")}})
    with pytest.raises(ConfigError, match=r"execution\.workspace: .* is not an existing folder"):
        resolve_tools(config)


def test_subagents_are_react_agents_over_their_tool_subset() -> None:
    config = config_from_dict({"execution": {
        "workspace": str(ROOT / "examples" / "workspace"),
        "subagents": {"reader": {"description": "Reads files", "tools": ["read_file"]}},
    }})
    executor = resolve_executor(config, _scripted())
    assert "reader" in executor.subagents
    caps = {c.name: c for c in executor.capabilities()}
    assert caps["reader"].kind == "subagent" and caps["reader"].description == "Reads files"


def test_step_call_caps_and_text_call_recovery_reach_the_executor() -> None:
    config = config_from_dict({"execution": {
        "workspace": str(ROOT / "examples" / "workspace"),
        "step_calls": {"model_step": 300, "agent": None},
        "recover_text_tool_calls": False,
    }})
    executor = resolve_executor(config, _scripted())
    assert (executor.calls.model_step, executor.calls.tool_args, executor.calls.agent) == (300, 512, None)
    assert executor.runner.recover_text_tool_calls is False
    with pytest.raises(ConfigError, match=r"execution\.step_calls\.tool_args"):
        config_from_dict({"execution": {"step_calls": {"tool_args": 2}}})


def test_scripted_model_file_formats(tmp_path: Path) -> None:
    from soothe_planner.testing import FunctionChatModel, ScriptedChatModel

    (tmp_path / "list.json").write_text('["hello"]')
    assert isinstance(resolve_chat_model(config_from_dict({"models": {"default": "scripted:list.json"}},
                                                          base_dir=tmp_path)), ScriptedChatModel)
    model = resolve_chat_model(config_from_dict({"models": {"default": f"scripted:{SCRIPT}"}}))
    assert isinstance(model, FunctionChatModel)
    (tmp_path / "bad.json").write_text('"just a string"')
    with pytest.raises(ConfigError, match="must hold a JSON list of replies"):
        resolve_chat_model(config_from_dict({"models": {"default": "scripted:bad.json"}}, base_dir=tmp_path))


async def test_persistence_opens_the_configured_backend(tmp_path: Path) -> None:
    config = config_from_dict({"checkpoint": {"backend": "sqlite", "path": "state/ck.sqlite"}}, base_dir=tmp_path)
    async with resolve_persistence(config) as p:
        assert p.backend == "sqlite" and p.store is not None
    assert (tmp_path / "state" / "ck.sqlite").exists()
    async with resolve_persistence(config_from_dict({"checkpoint": {"backend": "memory"}})) as p:
        assert p.backend == "memory"


def _scripted() -> object:
    from soothe_planner.testing import ScriptedChatModel

    return ScriptedChatModel([])
