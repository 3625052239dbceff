"""How much of a WorFBench score is the gold's wording? A diagnostic over saved answers (no model).

The two-shot prompt shows two worked answers of the item's own task type, and on two subsets they
carry the gold's set phrases: os writes every shell step "execute bash code to ..." and ends with
"take answer action" (words from its action list: "bash: execute some bash code, take bash
action", "answer: ... take answer action"); lumos ends its multiple-choice items with "Select the
choice from the four answer choices." WorFEval matches nodes by sentence similarity, so a plan
that says the same in its own words can lose nodes to a plan that uses the phrase. This module
scores the saved answers of a run (``--from TAG``: ``worfbench-TAG.answers.json``) on os and lumos
four ways, with the official evaluator:

- **two-shot, as written** and **two-shot, set phrases in plain words**: the two-shot answers with
  "execute (some) bash code to " cut from a node's start, and the nodes "take answer action",
  "take finish action" and "Select the choice from the four answer choices." written "Give the
  answer", "Finish" and "Pick the right option"; nothing else changes (nodes, edges, order);
- **full planner, as written** and **full planner, in os's set phrases**: the planner's steps with
  a ``bash`` step's node written "execute bash code to <its description>" and a step calling
  ``answer`` or ``finish`` written "take answer action" / "take finish action" (lumos has no tool
  whose phrase the gold uses, so its rows are the same).

Neither rewrite is a way to run the planner: they measure how far the wording moves the metric,
so a reader can tell a gap in the plans from a gap in their phrasing. ``python -m bench
worfbench_wording --from TAG`` writes ``bench/results/worfbench-wording-TAG.json``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from typing import Any

from bench import _common

__all__ = ["in_os_phrases", "in_plain_words", "main"]

SUBSETS = ("os", "lumos")
TWO_SHOT = "two-shot, one call"
PLANNER = "full: planner, re-asks on"
_NODE = re.compile(r"^(\s*\d+\s*[:.]\s*)(.*)$")
_PLAIN = (
    (re.compile(r"^execute (?:some )?bash code to\s+", re.I), ""),
    (re.compile(r"^take answer action\.?$", re.I), "Give the answer"),
    (re.compile(r"^take finish action\.?$", re.I), "Finish"),
    (re.compile(r"^select the choice from the four answer choices\.?$", re.I), "Pick the right option"),
)
_OS_PHRASES = {"answer": "take answer action", "finish": "take finish action"}


def in_plain_words(text: str) -> str:
    """An answer's text with the set phrases of os and lumos written in plain words (nodes only)."""
    out = []
    for line in text.splitlines():
        m = _NODE.match(line)
        if m and not line.lstrip().lower().startswith("edge"):
            node = m.group(2)
            for pattern, plain in _PLAIN:
                node = pattern.sub(plain, node)
            line = m.group(1) + node[:1].upper() + node[1:]
        out.append(line)
    return "\n".join(out)


def in_os_phrases(steps: list[dict[str, Any]]) -> list[tuple[str, str, list[str]]]:
    """The planner's steps as ``(id, node text, depends_on)``, a call of an os action in its set phrase."""
    out = []
    for s in steps:
        text = str(s["description"])
        if s.get("tool") == "bash":
            text = "execute bash code to " + text[:1].lower() + text[1:]
        elif s.get("tool") in _OS_PHRASES:
            text = _OS_PHRASES[str(s["tool"])]
        out.append((str(s["id"]), text, list(s["depends_on"])))
    return out


def main(argv: list[str]) -> int:
    from bench.worfbench import DEFAULT_DATA, gold_text, load_items, load_similarity
    from bench.worfbench_variants import plan_answer
    from bench.worfeval import score_item

    ap = argparse.ArgumentParser(prog="python -m bench worfbench_wording", description=__doc__.splitlines()[0])
    ap.add_argument("--from", dest="tag", required=True, help="the run whose saved answers are scored")
    ap.add_argument("--similarity", choices=("embedding", "exact"), default="embedding")
    args = ap.parse_args(argv)
    saved = _common.RESULTS_DIR / f"worfbench-{args.tag}.answers.json"
    if not saved.exists():
        raise SystemExit(f"--from {args.tag}: {saved.name} is missing")
    runs = json.loads(saved.read_text())["runs"]
    items = {str(it["id"]): it for pool in load_items(DEFAULT_DATA).values() for it in pool}
    similarity = load_similarity(args.similarity)

    def scored(text: str, item_id: str) -> dict[str, float]:
        got = score_item(text, gold_text(items[item_id]), similarity)
        return {"f1_chain": got.f1_chain.f1, "f1_graph": got.f1_graph.f1}

    per_item: dict[str, dict[str, Any]] = {}
    for item_id, run in runs.items():
        if run["subset"] not in SUBSETS:
            continue
        two, full = run["answers"][TWO_SHOT], run["answers"][PLANNER]
        two_text = str(two["text"]) if two["ok"] else ""
        full_text = str(full["text"]) if full["ok"] else ""
        os_text = plan_answer(in_os_phrases(full["steps"]))[0] if full["ok"] else ""
        per_item[item_id] = {
            "subset": run["subset"],
            "two-shot, as written": scored(two_text, item_id),
            "two-shot, set phrases in plain words": scored(in_plain_words(two_text), item_id),
            "full planner, as written": scored(full_text, item_id),
            "full planner, in os's set phrases": scored(os_text, item_id),
        }
    rows = [k for k in next(iter(per_item.values())) if k != "subset"] if per_item else []
    summary = {
        subset: {row: {metric: statistics.mean(v[row][metric] for v in per_item.values() if v["subset"] == subset)
                       for metric in ("f1_chain", "f1_graph")} | {"n": sum(v["subset"] == subset for v in per_item.values())}
                 for row in rows}
        for subset in SUBSETS if any(v["subset"] == subset for v in per_item.values())
    }
    for subset, by_row in summary.items():
        print(f"{subset} ({next(iter(by_row.values()))['n']} items): f1_chain / f1_graph")
        for row, m in by_row.items():
            print(f"  {row:<40} {m['f1_chain']:.3f} / {m['f1_graph']:.3f}")
    path = _common.write_results(f"worfbench-wording-{args.tag}", {
        "from": saved.name, "similarity": args.similarity, "rows": rows, "summary": summary, "per_item": per_item,
    }, settings={"from": args.tag, "similarity": args.similarity})
    print(f"wrote {path.name}")
    return 0
