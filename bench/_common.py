"""What every benchmark shares: where results go (with their provenance), how tables print, where the repository is."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import provenance

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"


def loadavg() -> list[float]:
    """The 1-, 5- and 15-minute load averages (``/proc/loadavg``); empty where there is none.

    Recorded with every timing: on a shared machine it says how far to trust an absolute time.
    """
    return provenance.loadavg()


def write_results(name: str, payload: dict[str, Any], *, directory: Path | None = None,
                  config_files: Iterable[Path] = (), settings: Mapping[str, Any] | None = None,
                  model_file: Path | None = None) -> Path:  # fmt: skip
    """Write ``payload`` (plus when and where it ran, and its provenance) to ``bench/results/<name>.json``.

    ``config_files`` (the config files the run read) or ``settings`` (what configured it, when no
    file did) make its config digest; ``model_file`` is the model file it loaded, if any (see
    ``bench/provenance.py``).
    """
    folder = RESULTS_DIR if directory is None else directory
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    meta = {
        "benchmark": name,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "python": platform.python_version(),
        "machine": platform.machine(),
        "provenance": provenance.collect(config_files=config_files, settings=settings, model_file=model_file),
    }
    path.write_text(json.dumps({**meta, **payload}, indent=2, sort_keys=False) + "\n")
    return path


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A markdown table, numbers formatted compactly."""

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3f}" if abs(v) < 100 else f"{v:.0f}"
        return str(v)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


@contextlib.contextmanager
def scoped_environ(**values: str | None) -> Iterator[None]:
    """Set (a string) or remove (``None``) environment variables for the block; put them back after."""

    def put(settings: Mapping[str, str | None]) -> None:
        for k, v in settings.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

    saved = {k: os.environ.get(k) for k in values}
    try:
        put(values)
        yield
    finally:
        put(saved)
