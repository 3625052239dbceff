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

import errno
import os
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
    """Write the shipped config as ``directory/soothe.yaml`` (the folder is created); refuse to overwrite.

    A ``soothe.yaml`` that is a symbolic link is refused, dangling or not, with ``--force`` too:
    writing through it would put the file (or replace one) wherever the link points, outside the
    folder. The open itself does not follow a link (``O_NOFOLLOW``), so one made meanwhile is
    refused as well.
    """
    folder = Path(directory)
    target = folder / CONFIG_FILE_NAME
    if target.is_symlink():
        raise ConfigError(
            f"{target}: is a symbolic link; init never writes through one (it would write where the link "
            "points): remove the link, or edit the file it points to"
        )
    if target.exists() and not force:
        raise ConfigError(f"{target}: already exists; edit it, or pass --force to replace it with the default")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    if not force:
        flags |= os.O_EXCL
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, flags, 0o666)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(packaged_config_text())
    except FileExistsError:
        raise ConfigError(f"{target}: already exists; edit it, or pass --force to replace it with the default") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError(f"{target}: is a symbolic link; init never writes through one") from None
        raise ConfigError(f"{target}: cannot be written: {exc.strerror or exc}") from None
    return target
