"""Hostile and careless config files: bounded, anchored, and never echoing what came from the environment.

- With no ``execution:`` or ``checkpoint:`` section, the workspace and the checkpoint sit beside
  the config file whatever the current directory; a workspace of ``/`` or the home folder needs
  an explicit key.
- An alias bomb, a file past the size limit, thousands of levels of nesting, and an alias that
  contains itself are each one ``ConfigError`` (exit 2 from ``validate``), found before any
  expansion runs.
- A value filled in from an environment variable never appears in an error or in ``validate``.
- YAML merge keys work (later keys override); a key written twice is still refused.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from soothe_planner.cli.app import main
from soothe_planner.config import load_config, parse_yaml, resolve_tools
from soothe_planner.errors import ConfigError

EXE = Path(sys.executable).parent / "soothe-planner"

# A bomb of under 400 bytes: nine levels of nine aliases, about 387 million values once expanded.
BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 9)}]" for i in range(8)]
)


def _write(tmp_path: Path, text: str, name: str = "soothe.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- item 5: anchored defaults


def test_default_workspace_and_checkpoint_sit_beside_the_config_whatever_the_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "project").mkdir()
    cfg = _write(tmp_path / "project", "planner: {retries: 1}\n")
    monkeypatch.chdir("/")
    config = load_config(cfg)
    assert config.execution.workspace == cfg.parent
    assert config.checkpoint.path == cfg.parent / ".soothe" / "checkpoints.sqlite"


def test_an_empty_section_is_anchored_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = _write(tmp_path, "execution:\ncheckpoint:\n")
    monkeypatch.chdir("/")
    config = load_config(cfg)
    assert config.execution.workspace == tmp_path and config.checkpoint.path.parent.parent == tmp_path


@pytest.mark.parametrize("workspace", ["/", "~", "${HOME}", "/tmp/.."])
def test_a_workspace_of_root_or_home_needs_an_explicit_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workspace: str
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    cfg = _write(tmp_path, f"execution:\n  workspace: '{workspace}'\n")
    with pytest.raises(ConfigError, match=r"execution\.workspace.*allow_broad_workspace: true") as info:
        load_config(cfg)
    assert str(home) not in str(info.value)  # the rule is named, the (possibly interpolated) path is not
    allowed = _write(tmp_path, f"execution:\n  allow_broad_workspace: true\n  workspace: '{workspace}'\n", "ok.yaml")
    assert load_config(allowed).execution.workspace.resolve() in (Path("/"), home)


def test_validate_refuses_a_root_workspace_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _write(tmp_path, "execution: {workspace: /}\n")
    assert main(["validate", str(cfg)]) == 2
    assert "allow_broad_workspace" in capsys.readouterr().err


# --------------------------------------------------------------------------- item 22: bounds


def test_the_540_byte_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    assert len(BOMB) < 600
    with pytest.raises(ConfigError, match=r"more than 100000 values once its aliases are expanded"):
        load_config(_write(tmp_path, BOMB))


@pytest.mark.subprocess
def test_validate_refuses_the_alias_bomb_with_exit_2(tmp_path: Path) -> None:
    done = subprocess.run([str(EXE), "validate", str(_write(tmp_path, BOMB))],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "aliases are expanded" in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_many_plain_aliases_under_the_bound_still_load(tmp_path: Path) -> None:
    text = (
        "tracing:\n  langfuse:\n    tags: &t [one, two]\n"
        "execution:\n  subagents:\n"
        + "".join(f"    s{i}: {{description: d, tools: *r}}\n" for i in range(50))
    )
    text = text.replace("execution:\n", "execution:\n  read_only_tools: &r []\n", 1)
    config = load_config(_write(tmp_path, text))
    assert len(config.execution.subagents) == 50


def test_a_file_over_the_size_limit_is_refused_without_being_parsed(tmp_path: Path) -> None:
    cfg = tmp_path / "big.yaml"
    cfg.write_text("# padding\n" * 120_000 + "planner: {retries: 1}\n")  # 1.2 MB of comments
    with pytest.raises(ConfigError, match=r"over the 1048576-byte limit"):
        load_config(cfg)


@pytest.mark.parametrize("style", ["flow", "block"])
def test_thousands_of_nesting_levels_are_a_config_error_not_a_recursion_error(tmp_path: Path, style: str) -> None:
    depth = 3000
    if style == "flow":
        text = "planner: " + "[" * depth + "]" * depth + "\n"
    else:
        text = "planner:\n  " + "- " * depth + "x\n"
    with pytest.raises(ConfigError, match=r"soothe\.yaml:\d+:\d+: nested deeper than 64 levels"):
        load_config(_write(tmp_path, text))


def test_validate_refuses_deep_nesting_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _write(tmp_path, "planner: " + "[" * 3000 + "]" * 3000 + "\n")
    assert main(["validate", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "nested deeper than 64 levels" in err and "RecursionError" not in err


def test_an_alias_inside_itself_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="an alias refers to a node that contains it"):
        load_config(_write(tmp_path, "tracing:\n  langfuse:\n    tags: &t [a, *t]\n"))


def test_a_fifo_is_not_read_as_a_config(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.yaml")
    with pytest.raises(ConfigError, match="not a regular file"):
        load_config(tmp_path / "pipe.yaml")


# --------------------------------------------------------------------------- item 23: interpolated values

KEY = "sk-live-0123456789abcdef"


def test_an_interpolated_value_is_never_echoed_in_a_validation_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_MODEL", KEY)  # a key pasted where the model name belongs
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, "models:\n  default: ${MY_MODEL}\n"))
    assert KEY not in str(info.value) and "(hidden)" in str(info.value)
    assert "models.default" in str(info.value)


def test_an_interpolated_value_is_scrubbed_from_rule_text_at_another_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MY_MODEL", KEY)
    # the bad value sits at a key that did not come from the environment, but it quotes one that did
    text = "models:\n  assess: openai:${MY_MODEL}\n  default: 'nope:${MY_MODEL}'\n"
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text))
    assert KEY not in str(info.value)


def test_validate_never_prints_an_interpolated_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MY_KEY", KEY)
    cfg = _write(tmp_path, "models:\n  default: openai:${MY_KEY}\n  api_key_env: OPENAI_API_KEY\n")
    assert main(["validate", str(cfg)]) == 0
    text_out = capsys.readouterr().out
    assert main(["validate", "--json", str(cfg)]) == 0
    json_out = capsys.readouterr().out
    assert KEY not in text_out and KEY not in json_out
    assert "(hidden)" in text_out
    assert json.loads(json_out)["config"]["models"]["default"] == "(hidden)"


def test_resolution_errors_hide_interpolated_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_SPEC", "no_such_module_anywhere_x.secretive:tool_attr")
    config = load_config(_write(tmp_path, "execution:\n  tools: ['${TOOL_SPEC}']\n"))
    with pytest.raises(ConfigError) as info:
        resolve_tools(config)
    assert "secretive" not in str(info.value) and "(hidden)" in str(info.value)


# --------------------------------------------------------------------------- item 24: merge keys


def test_a_merge_key_override_is_accepted_and_the_later_key_wins(tmp_path: Path) -> None:
    text = """
execution:
  subagents:
    reader: &reader
      description: reads the notes
      tools: [read_file]
    summariser:
      <<: *reader
      description: summarises the notes
"""
    config = load_config(_write(tmp_path, text))
    summariser = config.execution.subagents["summariser"]
    assert summariser.description == "summarises the notes" and summariser.tools == ["read_file"]


def test_merge_keys_follow_yaml_precedence() -> None:
    data = parse_yaml("a: &a {x: 1, y: 1}\nb: &b {y: 2, z: 2}\nc:\n  <<: [*a, *b]\n  z: 3\n", "t")
    assert data["c"] == {"x": 1, "y": 1, "z": 3}  # earlier merged mappings win, own keys win over all


@pytest.mark.parametrize(
    "text",
    [
        "planner:\n  retries: 1\n  retries: 2\n",
        "base: &b {x: 1}\nc:\n  <<: *b\n  y: 1\n  y: 2\n",
    ],
)
def test_a_key_written_twice_is_still_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="duplicate key"):
        parse_yaml(text, "t")
