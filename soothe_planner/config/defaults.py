"""Where does a command find its config when none is named, and how does a user get one to edit?

The package ships ``default.yaml`` (package data, so a pip-installed user has it).
``soothe-planner init [DIR]`` writes it as ``DIR/soothe.yaml``; ``find_config`` is what a command
reads when ``--config`` is not given: ``./soothe.yaml`` if it exists (what ``init`` wrote), else
the shipped file. Read as shipped, its relative paths (the workspace, the checkpoint file) are
anchored at the current folder, never inside the installed package.

Weighed: defaulting to the shipped file alone would ignore the copy ``init`` just wrote; reading
``./soothe.yaml`` first makes ``init`` then ``run`` do what the words say.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from soothe_planner.errors import ConfigError

if TYPE_CHECKING:
    from soothe_planner.config.schema import SootheConfig

__all__ = ["CONFIG_FILE_NAME", "PACKAGED_SOURCE", "find_config", "packaged_config_text", "write_config"]

CONFIG_FILE_NAME = "soothe.yaml"
PACKAGED_SOURCE = "the packaged default config"


def packaged_config_text() -> str:
    """The text of the shipped ``default.yaml``."""
    return resources.files("soothe_planner.config").joinpath("default.yaml").read_text(encoding="utf-8")


def _packaged(base_dir: Path) -> SootheConfig:
    from soothe_planner.config.load import config_from_dict, parse_yaml

    return config_from_dict(parse_yaml(packaged_config_text(), PACKAGED_SOURCE), base_dir=base_dir,
                            source=PACKAGED_SOURCE)


def find_config(path: str | Path | None = None, *, cwd: Path | None = None) -> SootheConfig:
    """The config a command runs with: ``path`` if given, else ``./soothe.yaml``, else the shipped one."""
    from soothe_planner.config.load import load_config

    if path:
        return load_config(path)
    here = cwd if cwd is not None else Path.cwd()
    local = here / CONFIG_FILE_NAME
    if local.is_file():
        return load_config(local)
    return _packaged(here)


def write_config(directory: str | Path = ".", *, force: bool = False) -> Path:
    """Write the shipped config as ``directory/soothe.yaml`` (the folder is created); refuse to overwrite."""
    folder = Path(directory)
    target = folder / CONFIG_FILE_NAME
    if target.exists() and not force:
        raise ConfigError(f"{target}: already exists; edit it, or pass --force to replace it with the default")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        target.write_text(packaged_config_text(), encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{target}: cannot be written: {exc.strerror or exc}") from None
    return target
