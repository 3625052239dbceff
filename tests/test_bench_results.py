"""The figures quoted in ``bench/RESULTS.md`` and the README are the ones in the committed results files.

A quoted figure carries an invisible marker right after it naming where it comes from:
``0.553<!--economy:summary/ours/calls_vs_replan_every_step:.3f-->`` is the value at that path in
``bench/results/economy.json``, written with the format ``.3f`` (any Python format spec; ``%``
for a percentage). A figure edited by hand, or a results file regenerated without its section,
fails here, naming the figure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.results_md import DOCUMENTS, MARKED, RESULTS_MD, lookup

RESULTS_DIR = Path(__file__).resolve().parent.parent / "bench" / "results"


def _markers() -> list[object]:
    return [m for doc in DOCUMENTS for m in MARKED.finditer(doc.read_text())]


def test_results_md_quotes_figures_from_every_benchmark_results_file() -> None:
    quoted = {m["file"] for m in MARKED.finditer(RESULTS_MD.read_text())}
    for name in ("economy", "scale", "breaker", "dataflow", "worfbench_sanity", "worfbench", "local", "local-judged"):
        assert name in quoted, f"bench/RESULTS.md quotes no figure from bench/results/{name}.json"
        assert (RESULTS_DIR / f"{name}.json").is_file()


@pytest.mark.parametrize("marker", _markers(), ids=lambda m: f"{m['file']}:{m['path']}")  # type: ignore[index]
def test_every_quoted_figure_is_the_committed_value(marker: object) -> None:
    m = marker  # a re.Match
    value = lookup(m["file"], m["path"])  # type: ignore[index]
    shown = format(value, m["fmt"])  # type: ignore[index]
    assert shown == m["shown"], (  # type: ignore[index]
        f"RESULTS.md shows {m['shown']} for {m['file']}:{m['path']}, the results file holds "  # type: ignore[index]
        f"{value!r} ({shown}); re-run the benchmark and `python -m bench.results_md`, or fix the figure"
    )
