"""Where does a WorFBench run keep its answers between sessions: part files, their merge, the answers file?

A model run of 120 items takes hours on a small machine, so it is split into parts (``--part K/N``)
that write their file after every item and can be resumed (``--resume``); ``--merge N`` reads them
as one run and ``--rescore`` reads the answers file a report wrote. Every file names the run it
belongs to (seed, sample size, config file, ``--items-of``), and, from protocol 2 on, which runs each item had
(``run_names``); a file of another run is refused with what it holds, never mixed in. Files are
named ``<stem>.part-K-of-N.json`` and ``<stem>.answers.json``: ``worfbench``, or ``worfbench-TAG``
for a run given ``--tag``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from bench import _common
from bench.worfbench_variants import RUNS

__all__ = ["PROTOCOL", "RunKey", "merge_parts", "read_run", "resumed", "run_names", "saved_answers"]

PROTOCOL = 2
"""The saved runs' form: 2 = each item's runs with their settings and call records, the rows read from them."""


@dataclasses.dataclass(frozen=True)
class RunKey:
    """What makes saved answers this run's: the sample (seed, size) and the config file's name."""

    seed: int
    n: int
    config: str
    items_of: str | None = None
    """The results file whose items the sample was cut to (``--items-of``), if any."""


def resumed(name: str, key: RunKey, runs: tuple[str, ...]) -> tuple[dict[str, dict[str, Any]], float]:
    """The answers and seconds already in part file ``name`` (none if it does not exist)."""
    path = _common.RESULTS_DIR / f"{name}.json"
    if not path.exists():
        return {}, 0.0
    data = read_run(path, key)
    if data.get("protocol") != PROTOCOL:
        raise SystemExit(f"{path.name} is from the harness before each item's runs were recorded (protocol "
                         f"{data.get('protocol', 1)}); it cannot be resumed: --tag NAME writes a new run's files")
    if tuple(data["run_names"]) != runs:
        raise SystemExit(f"{path.name} ran {', '.join(data['run_names'])}; resume it with --runs "
                         f"{','.join(data['run_names'])}")
    return dict(data["runs"]), float(data["elapsed_s"])


def read_run(path: Path, key: RunKey) -> dict[str, Any]:
    """A saved run (a part, or the answers file), refused if it is not this run's."""
    data: dict[str, Any] = json.loads(path.read_text())
    if "runs" not in data:
        raise SystemExit(f"{path.name} is from the earlier protocol (no saved answers to score); run it again")
    if (data["seed"], data["items_requested"], data["config"]) != (key.seed, key.n, key.config):
        raise SystemExit(
            f"{path.name} is from seed {data['seed']}, {data['items_requested']} items, {data['config']}; "
            f"expected seed {key.seed}, {key.n} items, {key.config}"
        )
    if data.get("items_of") != key.items_of:
        raise SystemExit(f"{path.name} holds the items of {data.get('items_of') or 'the whole sample'}; "
                         f"expected those of {key.items_of or 'the whole sample'} (--items-of)")
    return data


def merge_parts(parts: int, key: RunKey, *, stem: str = "worfbench",
                partial: bool = False) -> tuple[dict[str, dict[str, Any]], float]:
    """The parts' answers, one run; refuses parts of a different run (or other runs per item), and
    missing parts unless ``partial``.

    The seconds are the sum of the parts' own: their model time, whether they ran side by side (the
    wall clock then showed less) or one after another (it showed as much); a part file does not say.
    """
    found: dict[str, dict[str, Any]] = {}
    elapsed = 0.0
    ran: set[tuple[Any, ...]] = set()
    for k in range(parts):
        path = _common.RESULTS_DIR / f"{stem}.part-{k}-of-{parts}.json"
        if not path.exists():
            if partial:
                print(f"--merge {parts} --partial: {path.name} is missing; its items are not in this report")
                continue
            raise SystemExit(f"--merge {parts}: {path.name} is missing; run --part {k}/{parts} first "
                             "(or --partial to report the parts written so far)")
        data = read_run(path, key)
        ran.add((data.get("protocol", 1), *data.get("run_names", ())))
        if len(ran) > 1:
            raise SystemExit(f"--merge {parts}: {path.name} ran other runs than the parts before it "
                             f"({sorted(ran)}); every part must run the same")
        elapsed += float(data["elapsed_s"])
        found.update(data["runs"])
    return found, elapsed


def saved_answers(key: RunKey, stem: str = "worfbench") -> tuple[dict[str, dict[str, Any]], float]:
    path = _common.RESULTS_DIR / f"{stem}.answers.json"
    if not path.exists():
        raise SystemExit(f"--rescore: {path.name} is missing; run the benchmark first")
    data = read_run(path, key)
    return data["runs"], float(data["elapsed_s"])


def run_names(found: dict[str, dict[str, Any]], order: list[str]) -> list[str]:
    names = {r for i in order for r in found[i].get("runs", {})}
    return [r for r in RUNS if r in names]
