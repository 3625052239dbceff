"""How a goal-suite run is reported: per goal and in total, and the spread over repeats.

``totals`` counts one run of one suite by outcome (with the workspace violations, calls, tokens
and medians); ``markdown`` is its table. ``summarise`` reads every complete run of a section (the
measured run, or one scripted actor) and gives, per suite and in total, the median, minimum and
maximum of each count (``SPREAD_KEYS``) and per goal its outcomes run by run; ``report`` is the
Markdown a section prints (one run as its tables, several as their spread, never one chosen run).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path
from typing import Any

from bench._common import table
from bench.provenance import git_state

OUTCOMES = ("success", "false_success", "failure")


def _median(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def totals(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts by outcome, workspace violations, sums and medians over the goals run."""
    counts = {k: sum(r["outcome"] == k for r in records) for k in OUTCOMES}
    calls = sum(r["llm_calls"] for r in records)
    return {
        "goals": len(records),
        **counts,
        "timeouts": sum(r["status"] == "timeout" for r in records),
        "goals_with_violations": sum(bool(r["violations"]) for r in records),
        "violations": sum(len(r["violations"]) for r in records),
        "llm_calls": calls,
        "llm_calls_per_success": round(calls / counts["success"], 2) if counts["success"] else None,
        "prompt_tokens": sum(r["prompt_tokens"] for r in records),
        "completion_tokens": sum(r["completion_tokens"] for r in records),
        "calls_without_usage": sum(r["calls_without_usage"] for r in records),
        "wall_s": round(sum(r["wall_s"] for r in records), 3),
        "median_wall_s": _median([r["wall_s"] for r in records]),
        "median_llm_calls": _median([r["llm_calls"] for r in records]),
        "median_prompt_tokens": _median([r["prompt_tokens"] for r in records]),
        "median_completion_tokens": _median([r["completion_tokens"] for r in records]),
    }


def _short(text: str, n: int = 70) -> str:
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= n else text[: n - 1] + "…"


def markdown(records: list[dict[str, Any]], sums: dict[str, Any]) -> str:
    rows = [
        [r["id"], r["outcome"], _short(r["reason"]) or "—",
         ", ".join(f"{v['path']} ({v['change']})" for v in r["violations"]) or "—",
         r["llm_calls"], r["prompt_tokens"], r["completion_tokens"], f"{r['wall_s']:.1f}"]
        for r in records
    ]
    per_goal = table(["goal", "outcome", "reason", "workspace violations", "LLM calls", "prompt tokens",
                      "completion tokens", "wall s"], rows)
    n = sums["goals"]
    summary = table(
        ["successes", "false successes", "failures (timeouts)", "goals with violations", "LLM calls",
         "calls / success", "prompt tokens", "completion tokens", "median wall s", "median LLM calls"],
        [[f"{sums['success']}/{n}", sums["false_success"], f"{sums['failure']} ({sums['timeouts']})",
          sums["goals_with_violations"], sums["llm_calls"],
          "—" if sums["llm_calls_per_success"] is None else sums["llm_calls_per_success"],
          sums["prompt_tokens"], sums["completion_tokens"],
          "—" if sums["median_wall_s"] is None else f"{sums['median_wall_s']:.1f}",
          "—" if sums["median_llm_calls"] is None else sums["median_llm_calls"]]],
    )
    return f"{per_goal}\n\n{summary}"


# --------------------------------------------------------------------------- spread over repeats

SPREAD_KEYS = ("success", "false_success", "failure", "timeouts", "goals_with_violations", "llm_calls", "wall_s")
_ABBREV = {"success": "S", "false_success": "FS", "failure": "F"}


def spread(values: list[float]) -> dict[str, float | None]:
    """Median, minimum and maximum of ``values`` (the median of an even count is the mean of the middle two)."""
    if not values:
        return {"median": None, "min": None, "max": None}
    med = statistics.median(values)
    return {"median": int(med) if float(med).is_integer() else round(med, 3), "min": min(values), "max": max(values)}


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per suite and in total: the spread of each count over the complete runs; per goal its outcomes.

    ``{"runs", "incomplete_runs", "suites": {name: {"runs", "goals", <count>: spread, ...,
    "per_goal": {id: {"runs", "success", "false_success", "failure", "success_rate", "outcomes"}}}},
    "total": {"runs", "goals", <count>: spread, ...}}``, counts being ``SPREAD_KEYS``; with three
    suites or more also ``"total_without": {suite: total of the others}``.
    """
    complete = [r for r in runs if r.get("complete")]
    names = list(dict.fromkeys(name for r in complete for name in r["suites"]))
    suites: dict[str, Any] = {}
    for name in names:
        per_goal: dict[str, dict[str, Any]] = {}
        for run in complete:
            for rec in run["suites"][name]["goals"]:
                g = per_goal.setdefault(rec["id"], {"runs": 0, "success": 0, "false_success": 0, "failure": 0,
                                                    "outcomes": []})
                g["runs"] += 1
                g[rec["outcome"]] += 1
                g["outcomes"].append(rec["outcome"])
        for g in per_goal.values():
            g["success_rate"] = round(g["success"] / g["runs"], 3)
        counts = {k: spread([r["suites"][name]["totals"][k] for r in complete]) for k in SPREAD_KEYS}
        suites[name] = {"runs": len(complete), "goals": len(per_goal), **counts, "per_goal": per_goal}
    out = {"runs": len(complete), "incomplete_runs": len(runs) - len(complete), "suites": suites,
           "total": _total(complete, names, suites)}
    if len(names) > 2:
        # a suite set run together with one more (the package's own beside the shared ones): each total
        # without one suite is a figure of its own, read from the same runs
        out["total_without"] = {left: _total(complete, [n for n in names if n != left], suites) for left in names}
    return out


def _total(complete: list[dict[str, Any]], names: list[str], suites: dict[str, Any]) -> dict[str, Any]:
    """The spread over ``complete`` runs of each count summed over the suites ``names``."""
    total = {k: spread([round(sum(r["suites"][n]["totals"][k] for n in names), 3) for r in complete])
             for k in SPREAD_KEYS}
    return {"runs": len(complete), "goals": sum(suites[n]["goals"] for n in names), **total}


def _fmt(v: float, digits: int) -> str:
    if digits:
        return f"{v:.{digits}f}"
    return str(int(v)) if float(v).is_integer() else f"{v:g}"


def _spread_text(s: dict[str, Any], runs: int, digits: int = 0) -> str:
    """``9 (8–10)``: the median and the range; the median alone for a single run."""
    if s["median"] is None:
        return "—"
    med = _fmt(s["median"], digits)
    return med if runs == 1 else f"{med} ({_fmt(s['min'], digits)}–{_fmt(s['max'], digits)})"


def summary_markdown(summary: dict[str, Any]) -> str:
    """One row per suite (and a total row when there are several): each count as median (min–max)."""
    n = summary["runs"]
    rows = [(name, s) for name, s in summary["suites"].items()]
    if len(rows) > 1:
        rows.append(("total", summary["total"]))
    return table(
        ["suite", "goals", "runs", "successes", "false successes", "failures", "timeouts", "goals with violations",
         "LLM calls", "wall s"],
        [[name, s["goals"], n, *(_spread_text(s[k], n) for k in SPREAD_KEYS[:-1]), _spread_text(s["wall_s"], n, 1)]
         for name, s in rows],
    )


def goals_markdown(suite_summary: dict[str, Any]) -> str:
    """Per goal over the runs: successes k/N, false successes, failures, and each run's outcome in order."""
    return table(
        ["goal", "successes", "false successes", "failures", "outcome by run (S, FS false success, F failure)"],
        [[gid, f"{g['success']}/{g['runs']}", g["false_success"], g["failure"],
          " ".join(_ABBREV[o] for o in g["outcomes"])] for gid, g in suite_summary["per_goal"].items()],
    )


def report(section: dict[str, Any], title: str) -> str:
    """The Markdown for one section (the run, or one scripted actor): one run as before, else the spread."""
    summary = section["summary"]
    complete = [r for r in section["runs"] if r.get("complete")]
    parts: list[str] = []
    if summary["runs"] == 1:
        for name, entry in complete[0]["suites"].items():
            parts.append(f"### {title}, suite {name!r}\n\n{markdown(entry['goals'], entry['totals'])}")
        if len(summary["suites"]) > 1:
            parts.append(f"### {title}, every suite\n\n{summary_markdown(summary)}")
        return "\n\n".join(parts)
    for name, s in summary["suites"].items():
        parts.append(f"### {title}, suite {name!r}: {s['runs']} runs\n\n{goals_markdown(s)}")
    parts.append(f"### {title}: median (min–max) over {summary['runs']} runs\n\n{summary_markdown(summary)}")
    return "\n\n".join(parts)


def close_section(section: dict[str, Any], single: bool) -> None:
    """Add the summary; for a single run of a single suite also the earlier layout's ``goals`` and ``totals``."""
    section["summary"] = summarise(section["runs"])
    entries = list(section["runs"][0]["suites"].values()) if section["runs"] else []
    if single and entries:
        section["goals"] = entries[0]["goals"]
        if "totals" in entries[0]:
            section["totals"] = entries[0]["totals"]


def resummarise(path: Path) -> dict[str, Any]:
    """Write ``path``'s summary again from its own runs with this code's ``summarise`` (the runs, the
    meta data and the provenance are left as they are; ``summary_rewritten`` names the commit that
    rewrote it). A figure a later summary adds — a total without one suite — then comes from the
    same recorded runs, not from a new run."""
    data = json.loads(path.read_text())
    if "runs" not in data:
        raise ValueError(f"{path.name}: no 'runs' to summarise (a scripted file keeps them per actor)")
    data["summary"] = summarise(data["runs"])
    data["summary_rewritten"] = {"by_commit": git_state()["commit"], "from": "the file's own runs"}
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    return data["summary"]


def _cli(argv: list[str] | None = None) -> int:  # not `main`: this module is no benchmark of `python -m bench`
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "--resummarise":
        print("usage: python -m bench.goals_report --resummarise RESULTS.json", file=sys.stderr)
        return 2
    summary = resummarise(Path(args[1]))
    print(summary_markdown(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(_cli())
