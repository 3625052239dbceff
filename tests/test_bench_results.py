"""The figures quoted in ``bench/RESULTS.md`` and the README are the ones in the committed results files.

A quoted figure carries an invisible marker right after it naming where it comes from:
``0.553<!--economy:summary/ours/calls_vs_replan_every_step:.3f-->`` is the value at that path in
``bench/results/economy.json``, written with the format ``.3f`` (any Python format spec; ``%``
for a percentage). A figure edited by hand, or a results file regenerated without its section,
fails here, naming the figure.

Every results file also says what produced it (``bench/provenance.py``): a ``provenance`` object
with every key of ``KEYS``. A file written by the benchmarks names its commit, date and CPU; a file
written before provenance existed is marked ``backfilled`` and names the commit that added it. A
figure quoted in either document must come from a file whose commit is in HEAD's history: a
figure measured on code that was never merged here cannot be quoted.
"""

from __future__ import annotations

import functools
import json
import subprocess
from pathlib import Path

import pytest

from bench.provenance import KEYS
from bench.results_md import DOCUMENTS, MARKED, RESULTS_MD, lookup

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = ROOT / "bench" / "results"
RESULTS_FILES = sorted(RESULTS_DIR.glob("*.json"))


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


def _provenance(path: Path) -> dict[str, object]:
    found = json.loads(path.read_text()).get("provenance")
    assert isinstance(found, dict), (
        f"{path.name} has no provenance object: write it with bench._common.write_results, or, for a file "
        "written before provenance existed and already committed, `python -m bench.provenance --backfill`"
    )
    return found


@pytest.mark.parametrize("path", RESULTS_FILES, ids=lambda p: p.name)
def test_every_results_file_says_what_produced_it(path: Path) -> None:
    prov = _provenance(path)
    missing = [k for k in KEYS if k not in prov]
    assert not missing, f"{path.name}: provenance lacks {missing}"
    if prov.get("backfilled"):
        assert prov.get("commit_added") and prov.get("commit_content"), f"{path.name}: a backfill names its commits"
        assert prov["commit"] is None and prov["config_digest"] is None and prov["model_digest"] is None, (
            f"{path.name}: a backfilled file records only what git and the file itself knew"
        )
    else:
        unknown = [k for k in ("commit", "date", "cpu_model", "threads") if prov.get(k) in (None, "")]
        assert not unknown, f"{path.name}: written by a benchmark, but its provenance has no {unknown}"


@functools.cache
def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)


def _recorded_commits(name: str) -> list[str]:
    prov = _provenance(RESULTS_DIR / f"{name}.json")
    keys = ("commit_added", "commit_content") if prov.get("backfilled") else ("commit",)
    return [str(prov[k]) for k in keys]


QUOTED = sorted({m["file"] for doc in DOCUMENTS for m in MARKED.finditer(doc.read_text())})


@pytest.mark.parametrize("name", QUOTED)
def test_every_quoted_figure_comes_from_code_in_heads_history(name: str) -> None:
    if _git("rev-parse", "--git-dir").returncode != 0:
        pytest.skip("not a git checkout: no history to check the results files' commits against")
    for commit in _recorded_commits(name):
        if _git("cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
            if _git("rev-parse", "--is-shallow-repository").stdout.strip() == "true":
                pytest.skip(f"shallow clone: commit {commit[:12]} of {name}.json is not in it "
                            "(`git fetch --unshallow` to check)")  # fmt: skip
            pytest.fail(f"{name}.json records commit {commit[:12]}, which this repository does not have: "
                        "its figures come from code that is not here")  # fmt: skip
        ancestor = _git("merge-base", "--is-ancestor", commit, "HEAD")
        assert ancestor.returncode == 0, (
            f"{name}.json records commit {commit[:12]}, which is not an ancestor of HEAD: its figures were "
            "measured on code that is not in this branch's history; re-run the benchmark here"
        )


def test_a_path_names_a_key_holding_a_colon_by_its_slug_and_only_one_key(monkeypatch: pytest.MonkeyPatch) -> None:
    import bench.results_md as results_md

    data = {"summary": {"full: planner, re-asks on": {"all": {"f1": 0.5}}, "a b": 1, "a-b": 2}}
    monkeypatch.setattr(results_md, "_load", lambda name: data)
    assert results_md.slug("full: planner, re-asks on") == "full-planner-re-asks-on"
    assert lookup("x", "summary/full-planner-re-asks-on/all/f1") == 0.5
    assert lookup("x", "summary/a-b") == 2  # an exact key wins
    with pytest.raises(KeyError, match="names 0 keys"):
        lookup("x", "summary/nothing")
