"""The figures quoted in ``bench/RESULTS.md`` are the ones in the committed results files.

A quoted figure carries an invisible marker right after it naming where it comes from:
``0.553<!--economy:summary/ours/calls_vs_replan_every_step:.3f-->`` is the value at that path in
``bench/results/economy.json``, written with the format ``.3f`` (any Python format spec; ``%``
for a percentage). A figure edited by hand, or a results file regenerated without its section,
fails here, naming the figure.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
RESULTS_MD = BENCH / "RESULTS.md"
MARKER = re.compile(r"(?P<shown>[-+]?[\d,]*\.?\d+%?)<!--(?P<file>[\w.-]+):(?P<path>[^:>]+):(?P<fmt>[^>]*)-->")


def _lookup(data: Any, path: str) -> Any:
    for key in path.split("/"):
        data = data[int(key)] if isinstance(data, list) else data[key]
    return data


def _markers() -> list[re.Match[str]]:
    return list(MARKER.finditer(RESULTS_MD.read_text()))


def test_results_md_quotes_figures_from_every_benchmark_results_file() -> None:
    quoted = {m["file"] for m in _markers()}
    for name in ("economy", "scale", "breaker", "dataflow", "worfbench_sanity"):
        assert name in quoted, f"bench/RESULTS.md quotes no figure from bench/results/{name}.json"


@pytest.mark.parametrize("marker", _markers(), ids=lambda m: f"{m['file']}:{m['path']}")
def test_every_quoted_figure_is_the_committed_value(marker: re.Match[str]) -> None:
    data = json.loads((BENCH / "results" / f"{marker['file']}.json").read_text())
    value = _lookup(data, marker["path"])
    assert format(value, marker["fmt"]) == marker["shown"], (
        f"RESULTS.md shows {marker['shown']} for {marker['file']}:{marker['path']}, "
        f"the results file holds {value!r} ({format(value, marker['fmt'])}); re-run the benchmark "
        "and rewrite its section, or fix the figure"
    )
