"""Which figures in ``bench/RESULTS.md`` and the README come from which results file, and how are they refreshed?

A quoted figure carries an invisible marker naming its source:
``0.553<!--economy:summary/ours/calls_vs_replan_every_step:.3f-->`` is the value at that path
(keys separated by ``/``, list positions as numbers) in ``bench/results/economy.json``, written
with the Python format spec ``.3f``. ``tests/test_bench_results.py`` checks every marked figure
against the committed files, in both documents.

``python -m bench.results_md`` rewrites every marked figure from the current results files (after
re-running a benchmark), and expands a placeholder ``{{economy:summary/ours/calls_per_goal:.2f}}``
into a marked figure. It changes numbers only: prose that says which side wins must be re-read by
whoever re-ran the benchmark.
"""

from __future__ import annotations

import json
import re
import sys
from functools import cache
from pathlib import Path
from typing import Any

RESULTS_MD = Path(__file__).resolve().parent / "RESULTS.md"
README = Path(__file__).resolve().parent.parent / "README.md"
DOCUMENTS = (RESULTS_MD, README)
RESULTS_DIR = Path(__file__).resolve().parent / "results"
MARKED = re.compile(r"(?P<shown>[-+]?[\d,]*\.?\d+%?)<!--(?P<file>[\w.-]+):(?P<path>[^:>]+):(?P<fmt>[^>]*)-->")
PLACEHOLDER = re.compile(r"\{\{(?P<file>[\w.-]+):(?P<path>[^:}]+):(?P<fmt>[^}]*)\}\}")


@cache
def _load(name: str) -> Any:
    return json.loads((RESULTS_DIR / f"{name}.json").read_text())


def slug(key: str) -> str:
    """``key`` as a path may name it: lower case, every run of other characters one ``-``
    (a path cannot hold ``:``, which row names such as ``full: planner, re-asks on`` do)."""
    return re.sub(r"[^a-z0-9]+", "-", key.lower()).strip("-")


def lookup(name: str, path: str) -> Any:
    data = _load(name)
    for key in path.split("/"):
        if isinstance(data, list):
            data = data[int(key)]
        elif key in data:
            data = data[key]
        else:
            matches = [k for k in data if slug(k) == key]
            if len(matches) != 1:
                raise KeyError(f"{path}: {key!r} names {len(matches)} keys of {name}.json")
            data = data[matches[0]]
    return data


def _marked(m: re.Match[str]) -> str:
    value = format(lookup(m["file"], m["path"]), m["fmt"])
    return f"{value}<!--{m['file']}:{m['path']}:{m['fmt']}-->"


def refresh(text: str) -> str:
    return PLACEHOLDER.sub(_marked, MARKED.sub(_marked, text))


def main(argv: list[str] | None = None) -> int:
    for path in [Path(a) for a in argv] if argv else DOCUMENTS:
        before = path.read_text()
        after = refresh(before)
        path.write_text(after)
        changed = sum(a != b for a, b in zip(MARKED.findall(before), MARKED.findall(after), strict=False))
        print(f"{path.name}: {len(MARKED.findall(after))} marked figures, {changed} changed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
