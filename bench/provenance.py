"""What code, config, model and machine produced a results file, so that a reader need not take it on trust?

Every results file carries a ``provenance`` object (``write_results`` adds it):

- ``commit``: ``git rev-parse HEAD`` of the repository the benchmark ran from, when it started
  (``begin()``: the code a run loads is the code of its start; a long run may see commits land
  before it writes, and then ``commit_at_write`` names the later one); ``dirty``: whether the tree
  had uncommitted changes outside ``bench/results/`` (the benchmark's own output folder, which a
  run rewrites), with up to ``DIRTY_LISTED`` of the changed paths in ``dirty_paths``. All ``None``
  where there is no git checkout (an installed package).
- ``config_digest``: sha256 over the config files the run read (each file's name and bytes, in
  order), or, for a benchmark configured by its command line alone, over the resolved settings as
  canonical JSON; ``config_files`` names the files.
- ``model_digest``: sha256 of the model file a local-model run loaded (``None`` for a run that
  loads none: scripted actors, a provider, a server already running elsewhere). Hashing a 1 GB
  GGUF takes seconds, so the digest is cached beside the model file (``<file>.bench-sha256.json``)
  and reused while the file's path, size and modification time are the same.
- ``cpu_model``, ``cores`` (physical), ``threads`` (logical CPUs), ``threads_usable`` (the CPUs
  this process may run on).
- ``load_before`` / ``load_after``: the 1-, 5- and 15-minute load averages when the benchmark
  started (``begin()``, called by ``python -m bench``; otherwise when this module was imported)
  and when its results were written.
- ``date``: when the results were written, UTC, ISO 8601.

Files written before this existed are never given invented values: ``backfill()`` records only
what git knows (the commit that added the file and the last commit that changed its content) and
what the file itself recorded (its date, its load averages, its config path), every other key
``None`` and ``"backfilled": true``. ``python -m bench.provenance --backfill`` applies it to every
committed results file that has no provenance yet.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"
KEYS = ("commit", "dirty", "config_digest", "model_digest", "cpu_model", "cores", "threads",
        "load_before", "load_after", "date")  # fmt: skip
"""The keys every results file's provenance has (``None`` where unknown); ``tests/test_bench_results.py`` checks them."""
DIRTY_LISTED = 20
_CHUNK = 1 << 20


def loadavg() -> list[float]:
    """The 1-, 5- and 15-minute load averages (``/proc/loadavg``); empty where there is none."""
    try:
        with open("/proc/loadavg") as f:
            return [float(x) for x in f.read().split()[:3]]
    except OSError:
        return []


_load_at_start = loadavg()
_git_at_start: dict[str, Any] | None = None


def begin() -> None:
    """Mark the start of a benchmark: the load average now is its ``load_before``, and the checkout
    now (its commit, whether it is dirty) is the code the run loaded."""
    global _load_at_start, _git_at_start
    _load_at_start = loadavg()
    _git_at_start = git_state()


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def git_state() -> dict[str, Any]:
    """``commit``, ``dirty`` and ``dirty_paths`` of the checkout (``None`` outside one)."""
    head = _git("rev-parse", "HEAD")
    if head is None:
        return {"commit": None, "dirty": None, "dirty_paths": None}
    status = _git("status", "--porcelain=v1", "--", ".", ":(exclude)bench/results") or ""
    paths = [line[3:] for line in status.splitlines() if line.strip()]
    return {"commit": head.strip(), "dirty": bool(paths), "dirty_paths": paths[:DIRTY_LISTED]}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def config_digest(files: Iterable[Path] = (), settings: Mapping[str, Any] | None = None) -> str | None:
    """sha256 over the config files (name and bytes, in order), or over ``settings`` as canonical JSON."""
    paths = list(files)
    if not paths and settings is None:
        return None
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    if settings is not None:
        digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def model_digest(path: Path | None) -> str | None:
    """sha256 of a model file, cached beside it by path, size and modification time; ``None`` for no file."""
    if path is None or not path.is_file():
        return None
    st = path.stat()
    key = {"path": str(path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    cache = path.with_name(path.name + ".bench-sha256.json")
    with contextlib.suppress(OSError, ValueError, AttributeError):
        cached = json.loads(cache.read_text())
        if {k: cached.get(k) for k in key} == key and isinstance(cached.get("sha256"), str):
            return str(cached["sha256"])
    sha = sha256_file(path)
    with contextlib.suppress(OSError):  # a read-only model folder: the digest is right, only recomputed next time
        cache.write_text(json.dumps({**key, "sha256": sha}) + "\n")
    return sha


def embedded_model_file(spec: str | None, base_url: str | None = None) -> Path | None:
    """The GGUF file a ``local``/``local:NAME`` model string loads here; ``None`` for any other model.

    ``None`` too when the run talks to a server it did not start (``base_url``, or
    ``SOOTHE_LOCAL_LLM_URL``): which file that server loaded is not known here.
    """
    if not spec or base_url or os.environ.get("SOOTHE_LOCAL_LLM_URL"):
        return None
    kind, _, name = spec.partition(":")
    if kind != "local":
        return None
    from soothe_planner.local import embedded_model, model_cache_dir

    return model_cache_dir() / embedded_model(name).filename


def cpu() -> dict[str, Any]:
    """``cpu_model``, ``cores`` (physical), ``threads`` (logical) and ``threads_usable`` (this process's)."""
    model, cores = None, set()
    try:
        physical = core = ""
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            name, _, value = (part.strip() for part in line.partition(":"))
            if name == "model name" and model is None:
                model = value
            elif name == "physical id":
                physical = value
            elif name == "core id":
                core = value
                cores.add((physical, core))
    except OSError:
        pass
    threads = os.cpu_count()
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else threads
    return {"cpu_model": model or platform.processor() or None, "cores": len(cores) or threads,
            "threads": threads, "threads_usable": usable}  # fmt: skip


def collect(*, config_files: Iterable[Path] = (), settings: Mapping[str, Any] | None = None,
            model_file: Path | None = None) -> dict[str, Any]:  # fmt: skip
    """The provenance of results written now: every key of ``KEYS``, and a few that explain them."""
    files = [Path(p) for p in config_files]
    now = git_state()
    git = _git_at_start or now
    moved = {"commit_at_write": now["commit"]} if now["commit"] != git["commit"] else {}
    return {
        "commit": git["commit"],
        **moved,
        "dirty": git["dirty"],
        "dirty_paths": git["dirty_paths"],
        "config_digest": config_digest(files, settings),
        "config_files": [_shown(p) for p in files],
        "model_digest": model_digest(model_file),
        "model_file": model_file.name if model_file is not None and model_file.is_file() else None,
        **cpu(),
        "load_before": _load_at_start,
        "load_after": loadavg(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _shown(path: Path) -> str:
    """A path as the results file shows it: relative to the repository, else its last two parts (no machine paths)."""
    try:
        return path.resolve().relative_to(REPO_ROOT).as_posix()
    except ValueError:
        return "/".join(path.parts[-2:])


# --------------------------------------------------------------------------- files written before


def backfill(path: Path) -> dict[str, Any] | None:
    """What git and the file itself say of a results file written without provenance; ``None`` if git knows nothing.

    ``commit_added`` is the commit that added the file; ``commit_content`` the last commit that
    changed it before provenance was added: the code that produced the figures is at or before
    ``commit_content``.
    """
    rel = path.resolve().relative_to(REPO_ROOT).as_posix()
    added = (_git("log", "--diff-filter=A", "--format=%H %cI", "--", rel) or "").split("\n")
    changed = (_git("log", "-1", "--format=%H %cI", "--", rel) or "").strip()
    added_lines = [line for line in added if line.strip()]
    if not added_lines or not changed:
        return None
    commit_added, date_added = added_lines[-1].split(" ", 1)  # the first time it was added
    commit_content, date_content = changed.split(" ", 1)
    data = json.loads(path.read_text())
    load_before = data.get("load_before", data.get("load_average_at_start"))
    load_after = data.get("load_after", data.get("load_average_at_end"))
    own_config = data.get("config") if isinstance(data.get("config"), str) else None
    return {
        "backfilled": True,
        "commit_added": commit_added,
        "date_added": date_added,
        "commit_content": commit_content,
        "date_content": date_content,
        **dict.fromkeys(KEYS),
        "config_files": [own_config] if own_config else [],
        "threads": data.get("cpus") if isinstance(data.get("cpus"), int) else None,
        "load_before": load_before if isinstance(load_before, list) else None,
        "load_after": load_after if isinstance(load_after, list) else None,
        "date": data.get("finished_at"),  # the file's own record of when it was written
    }


def backfill_all(folder: Path = RESULTS_DIR) -> list[str]:
    """Add a backfilled provenance to every committed results file that has none; the names changed."""
    changed = []
    for path in sorted(folder.glob("*.json")):
        data = json.loads(path.read_text())
        if "provenance" in data:
            continue
        found = backfill(path)
        if found is None:
            print(f"{path.name}: not committed yet, so git knows nothing of it: left as it is", file=sys.stderr)
            continue
        data["provenance"] = found
        path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
        changed.append(path.name)
    return changed


def _cli(argv: list[str] | None = None) -> int:  # not `main`: this module is no benchmark of `python -m bench`
    args = sys.argv[1:] if argv is None else argv
    if args == ["--backfill"]:
        names = backfill_all()
        print(f"backfilled {len(names)} file(s)" + (": " + ", ".join(names) if names else ""))
        return 0
    print(json.dumps(collect(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
