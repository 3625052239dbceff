"""The documentation site cannot hide an undocumented key: every config key and every CLI option
has a description, the generated config reference covers the shipped configs, and every YAML
example in the docs loads.

The config reference and the CLI reference are generated at build time (``docs/hooks/`` and
mkdocs-click), from the same ``description=`` and ``help=`` strings checked here; CI builds the
site with ``mkdocs build --strict`` after the tests, which catches broken links and references.
The keys and options listed as known gaps are marked strict ``xfail``: a new gap fails, and a gap
that gets its description fails too until it is taken off the list.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import click
import pytest
import yaml

from soothe_planner.cli import cli
from soothe_planner.config import load_config

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _hook() -> Any:
    spec = importlib.util.spec_from_file_location("config_reference", DOCS / "hooks" / "config_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


config_reference = _hook()
KEYS = config_reference.config_keys()

# Fields declared without a description in soothe_planner/models.py (PlannerSettings) and options
# without help in soothe_planner/cli/app.py; give them one there and drop them from these lists.
UNDESCRIBED_KEYS: set[str] = set()
UNDESCRIBED_OPTIONS: set[str] = set()


def _known_gap(name: str, gaps: set[str]) -> Any:
    marks = [pytest.mark.xfail(strict=True, reason="a known gap; describe it, then drop it from the list")]
    return pytest.param(name, marks=marks if name in gaps else [], id=name)


@pytest.mark.parametrize("path", [_known_gap(k.path, UNDESCRIBED_KEYS) for k in KEYS])
def test_every_config_key_has_a_description(path: str) -> None:
    key = next(k for k in KEYS if k.path == path)
    assert key.description, f"config key {path} ({key.owner.__name__}) has no description= on its Field"


def _options(command: click.Command, prefix: str = "") -> list[tuple[str, click.Option]]:
    found = [(f"{prefix}{opt.opts[0]}".strip(), opt) for opt in command.params if isinstance(opt, click.Option)]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += _options(sub, f"{prefix}{name} ")
    return found


OPTIONS = _options(cli)


def test_the_cli_walk_finds_every_command() -> None:
    commands = {name.rsplit(" ", 1)[0] for name, _ in OPTIONS if " " in name}
    assert commands == set(cli.commands), "a command with no option of its own would not be checked"


@pytest.mark.parametrize("name", [_known_gap(n, UNDESCRIBED_OPTIONS) for n, _ in OPTIONS])
def test_every_cli_option_has_help(name: str) -> None:
    option = dict(OPTIONS)[name]
    assert (option.help or "").strip(), f"soothe-planner {name} has no help= text"


def _leaf_paths(data: dict[str, Any], prefix: str = "") -> set[str]:
    out: set[str] = set()
    for key, value in data.items():
        if prefix == "execution.subagents.":
            out |= _leaf_paths(value, "execution.subagents.<name>.")
        elif isinstance(value, dict) and key != "max_output_tokens_per_call":
            out |= _leaf_paths(value, f"{prefix}{key}.")
        else:
            out.add(f"{prefix}{key}")
    return out


SHIPPED = [ROOT / "soothe_planner" / "config" / "default.yaml", *sorted((ROOT / "config").glob("*.yaml"))]


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_the_config_reference_documents_every_key_a_shipped_config_sets(path: Path) -> None:
    documented = {k.path for k in KEYS}
    used = _leaf_paths(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert used and used <= documented, sorted(used - documented)


def test_the_config_reference_has_a_table_for_every_section_and_a_row_for_every_key() -> None:
    text = config_reference.render()
    for section, _model, members in config_reference.sections(KEYS):
        assert (f"## `{section}`" if section else "## Top level") in text
        for key in members:
            assert f"| `{key.path.rpartition('.')[2]}` |" in text, key.path
    assert "## `execution.subagents.<name>`" in text and "## `tracing.langfuse`" in text


YAML_BLOCK = re.compile(r"```yaml\n(.+?)\n```", re.S)
DOC_YAML = [(page, block) for page in sorted(DOCS.rglob("*.md")) for block in YAML_BLOCK.findall(page.read_text())]


@pytest.mark.parametrize(
    "block", [b for _, b in DOC_YAML], ids=[f"{p.relative_to(DOCS).as_posix()}#{i}" for i, (p, _) in enumerate(DOC_YAML)]
)
def test_every_yaml_example_in_the_docs_is_a_valid_config(
    block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOOTHE_PG_DSN", "postgresql://user@127.0.0.1/soothe")
    file = tmp_path / "soothe.yaml"
    file.write_text(block + "\n", encoding="utf-8")
    load_config(file)


def test_the_docs_show_yaml_examples() -> None:
    assert len(DOC_YAML) >= 5, "the YAML examples moved: the test above would check nothing"


def test_the_own_tools_guide_declares_what_the_checks_read() -> None:
    """The guide's example tools, run as printed, declare a write and a count the way the checks read them."""
    from soothe_planner import StepExecutor

    page = (DOCS / "how-to" / "own-tools.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.+?)\n```", page, flags=re.S)
    assert len(blocks) == 1
    namespace: dict[str, Any] = {}
    exec(compile(blocks[0], "own-tools.md", "exec"), namespace)  # defines tools; touches no file
    caps = {c.name: c for c in StepExecutor(tools=namespace["tools"]).capabilities()}
    assert caps["save"].writes_path_arg == "target" and not caps["save"].counts
    assert caps["tally"].counts and caps["tally"].writes_path_arg is None
