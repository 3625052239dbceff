"""What does a WorFBench report say beside the scores: what each row ran, what it cost, what the model wrote?

``bench/worfbench.py`` scores; this module reads, for each row of a saved run, the three things a
reader needs beside a score:

- **the label** (``worfbench_variants.labels``): profile, plan syntax (configured and as used per
  item), capabilities passed (how, on how many items, how many per item), re-asks on or off —
  read back from the run records the harness wrote while the row ran;
- **the cost** per item and per row (``worfbench_calls``): LLM calls, prompt and completion tokens,
  model seconds, computed from the call records the row's answer accounts for;
- **the raw answers**: the model's text of each of those calls.

Runs saved before rows carried records (protocol 1: the four rows of the first model run) have no
call records; their rows get the label of what the issue that reviewed them found they ran
(``LEGACY_LABELS``) and no cost, never an estimate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from bench._common import table
from bench.worfbench_calls import cost_of
from bench.worfbench_variants import VARIANTS, label_text, labels

__all__ = ["CATEGORY", "LEGACY_LABELS", "PAPER_ROWS", "calls_of", "print_tables", "raw_of", "row_label",
           "variant_names"]

# The paper's Table 1 reports categories, not subsets; as we read its grouping, toolbench and
# seal_tools are function-call tasks, lumos problem-solving, os embodied.
CATEGORY = {"toolbench": "Function Call", "seal_tools": "Function Call", "lumos": "Problem-Solving", "os": "Embodied"}
PAPER_ROWS: dict[str, dict[str, tuple[float, float]]] = {  # f1_chain, f1_graph (%), two-shot, Table 1
    "GPT-4": {"Function Call": (74.87, 62.11), "Problem-Solving": (67.18, 55.24), "Embodied": (70.94, 56.17)},
    "Qwen-2-7B": {"Function Call": (70.79, 55.50), "Problem-Solving": (68.65, 52.13), "Embodied": (62.83, 46.25)},
    "Llama-3.1-8B": {"Function Call": (63.30, 43.62), "Problem-Solving": (64.49, 46.79), "Embodied": (56.23, 36.40)},
    "GLM-4-9B": {"Function Call": (59.27, 36.34), "Problem-Solving": (58.91, 40.15), "Embodied": (53.17, 36.15)},
    "Phi-3-small": {"Function Call": (57.66, 40.71), "Problem-Solving": (55.76, 39.75), "Embodied": (54.77, 37.52)},
}
LEGACY_LABELS = {
    "single call (two-shot)": "legacy run: WorFBench two-shot prompt, tools in the prompt text, one call",
    "structured single call": "legacy run: a separate call with the full profile's plan schema, no capabilities, "
                              "no re-ask (the planner rows ran the compact profile)",
    "planner, no re-ask": "legacy run: planner, compact profile, no capabilities (only answer steps), "
                          "first answer",
    "planner, full": "legacy run: planner, compact profile, no capabilities (only answer steps), re-asks on",
}


def _variant(name: str) -> Any:
    return next((v for v in VARIANTS if v.name == name), None)


def variant_names(item_runs: Iterable[dict[str, Any]]) -> list[str]:
    """The rows the saved items hold: the known rows in table order, then any other (a legacy run's)."""
    seen: dict[str, None] = {}
    for run in item_runs:
        seen.update(dict.fromkeys(run["answers"]))
    known = [v.name for v in VARIANTS if v.name in seen]
    return known + [name for name in seen if name not in known]


def calls_of(item_run: dict[str, Any], name: str) -> list[dict[str, Any]] | None:
    """The call records row ``name``'s answer accounts for (a prefix of its run's); None for a legacy run."""
    variant = _variant(name)
    if variant is None or "runs" not in item_run:
        return None
    return list(item_run["runs"][variant.run]["calls"][: int(item_run["answers"][name]["calls"])])


def raw_of(item_run: dict[str, Any], name: str) -> list[str]:
    """What the model wrote for row ``name``: each of its calls' text (a legacy run saved it whole)."""
    calls = calls_of(item_run, name)
    if calls is None:
        return list(item_run["answers"][name].get("raw") or [])
    return [c["text"] for c in calls]


def item_cost(item_run: dict[str, Any], name: str) -> dict[str, Any] | None:
    calls = calls_of(item_run, name)
    return None if calls is None else cost_of(calls)


def row_label(name: str, item_runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Row ``name``'s label over ``item_runs`` (``labels``; a legacy row's from ``LEGACY_LABELS``)."""
    variant = _variant(name)
    if variant is None or any("runs" not in r for r in item_runs):
        return {"legacy": True, "text": LEGACY_LABELS.get(name, "legacy run: not recorded")}
    found = labels(variant, [r["runs"][variant.run] for r in item_runs])
    return {**found, "text": label_text(found)}


def print_tables(summary: dict[str, dict[str, dict[str, Any]]], row_labels: dict[str, dict[str, Any]],
                 cost: dict[str, dict[str, Any] | None], similarity: str) -> None:
    print("\nWhat each row ran\n")
    print(table(["variant", "ran"], [[v, row_labels[v]["text"]] for v in summary]))
    print(f"\nWorFEval (official; node similarity: {similarity}), all items, and ours (lexical), "
          "with each row's cost per item\n")
    keys = ["f1_chain", "f1_graph", "f1_chain_corrected", "f1_graph_corrected", "parsed_by_official_parser",
            "ours_validity", "ours_node_f1", "ours_edge_f1"]
    money = ["llm_calls", "prompt_tokens", "completion_tokens", "model_seconds"]

    def spent(v: str, key: str) -> Any:
        c = cost.get(v)
        value = None if c is None else c.get(f"{key}_per_item")
        return "—" if value is None else value

    print(table(["variant", "items", *keys, *(f"{k}/item" for k in money)],
                [[v, d["all"]["n"], *(d["all"][k] for k in keys), *(spent(v, k) for k in money)]
                 for v, d in summary.items()]))
    subsets = sorted({k for d in summary.values() for k in d if k != "all"})
    first = next(iter(summary))
    print("\nPer subset, f1_chain / f1_graph (official), corrected in brackets\n")
    print(table(
        ["subset", *summary],
        [[f"{s} ({summary[first][s]['n']})",
          *(f"{d[s]['f1_chain']:.3f} / {d[s]['f1_graph']:.3f} ({d[s]['f1_chain_corrected']:.3f} / "
            f"{d[s]['f1_graph_corrected']:.3f})" for d in summary.values())] for s in subsets],
    ))
    print("\nThe paper's Table 1 (two-shot, f1_chain / f1_graph, %), by category, for reference\n")
    cats = list(dict.fromkeys(CATEGORY.values()))
    print(table(["model", *cats], [[m, *(f"{r[c][0]:.2f} / {r[c][1]:.2f}" for c in cats)] for m, r in PAPER_ROWS.items()]))
