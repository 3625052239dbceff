"""How good are the plans, measured against gold workflow graphs nobody on this project wrote?

WorFBench (``Benchmarking Agentic Workflow Generation``) pairs tasks with gold step DAGs. This
benchmark samples a fixed, seeded set of items across its subsets (toolbench, seal_tools, lumos,
os) and scores predicted graphs with ``bench.worfbench_score``: graph validity, node F1 (one-to-one
lexical matching) and edge F1 (transitive reductions).

Modes:

- ``--sanity``: each gold plan is fed through a scripted model into ``LLMPlanner.create_plan`` and
  the resulting ``Plan`` is scored against the gold: every score must be 1.0. This checks the
  conversion both ways and the scorer, not a model.
- default: the configured model (``config/default.yaml``: the embedded local model; any config
  via ``--config``) plans each item three ways, on the same task text:
  1. *single call* — WorFBench's own prompt (its system turn and the task), one plain call, the
     ``Node:/Edge:`` answer parsed as is: no validation, no second chance (how WorFBench scores a
     model; the baseline);
  2. *planner, no re-ask* — what ``LLMPlanner.create_plan`` with ``retries=0`` returns: structured
     output and the lenient parser, whole-plan validation, the raw fallback, but no re-ask;
  3. *planner, full* — ``LLMPlanner.create_plan`` with the configured retries: the whole robustness
     layer (raw fallback, validation, bounded re-ask showing the model its error).
  Variants 2 and 3 make the same calls up to the first re-ask, so both are read from one run of
  variant 3: an answer accepted before any re-ask is variant 2's answer too; one that needed a
  re-ask (or failed) is a failure of variant 2. With greedy decoding (the embedded model runs at
  temperature 0) that is exactly what a separate ``retries=0`` run would return, for a third fewer
  calls; with sampling it is the paired comparison (same first answer for both).
  A planner run that ends in a ``PlannerError`` counts as an invalid graph scoring 0.

A long sample can be split over processes (one embedded server each, so both cores work):
``--part K/N`` plans the items whose position in the sample is K modulo N and writes their
per-item scores to ``bench/results/worfbench.part-K-of-N.json``; ``--merge N`` then reads the N
parts (same seed, size and config) and reports the whole sample as one run would.

The run is time-boxed (``--max-seconds``): items are taken in sample order until the box is spent,
and the number finished is reported with the scores. A small model on two cores needs several
seconds a call, so the default sample is 50 items and the box 20 minutes.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from bench import _common
from bench._common import REPO_ROOT, table, write_results
from bench.worfbench_score import (
    END,
    START,
    GraphScore,
    Workflow,
    parse_workflow,
    score,
    transitive_reduction,
    validity_errors,
)

SUBSETS = ("toolbench", "seal_tools", "lumos", "os")
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "worfbench"
GOAL_CHARS = 2000
VARIANTS = ("single call", "planner, no re-ask", "planner, full")


def load_items(data: Path) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for subset in SUBSETS:
        path = data / subset / "graph_eval.json"
        if path.exists():
            out[subset] = json.loads(path.read_text())
    if not out:
        raise SystemExit(f"no WorFBench data under {data} (expected <subset>/graph_eval.json); pass --data")
    return out


def sample(items: dict[str, list[dict[str, Any]]], n: int, seed: int) -> list[dict[str, Any]]:
    """``n`` items spread evenly over the subsets (round-robin), each subset shuffled by ``seed``."""
    rng = random.Random(seed)
    pools = {k: rng.sample(v, len(v)) for k, v in sorted(items.items())}
    out: list[dict[str, Any]] = []
    while len(out) < n and any(pools.values()):
        for pool in pools.values():
            if pool and len(out) < n:
                out.append(pool.pop())
    return out


def gold_of(item: dict[str, Any]) -> Workflow:
    return parse_workflow(item["conversations"][2]["content"])


def task_of(item: dict[str, Any]) -> str:
    text = str(item["conversations"][1]["content"]).strip()
    return text if len(text) <= GOAL_CHARS else text[: GOAL_CHARS - 1] + "…"


def workflow_as_generate_plan(wf: Workflow) -> dict[str, Any]:
    """A gold workflow as the planner's ``GeneratePlan`` answer (dependencies = reduced edges)."""
    inner = [(a, b) for a, b in transitive_reduction(list(wf.nodes), wf.edges) if a != START and b != END]
    deps: dict[str, list[str]] = {k: [] for k in wf.nodes}
    for a, b in sorted(inner):
        deps[b].append(a)
    steps = [{"id": k, "description": v, "depends_on": deps[k]} for k, v in wf.nodes.items()]
    return {
        "plan_action": "new",
        "execution_mode": "dependency",
        "next_action": "follow the workflow",
        "steps": steps,
    }


def plan_as_workflow(plan: Any) -> Workflow:
    wf = Workflow()
    for step in plan.steps:
        wf.nodes[step.id] = step.description
        wf.edges += [(d, step.id) for d in step.depends_on]
    return wf


def _failed_score() -> GraphScore:
    return GraphScore(False, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, ["planner error"])


# --------------------------------------------------------------------------- sanity


async def run_sanity(items: list[dict[str, Any]]) -> list[GraphScore]:
    from soothe_planner.models import PlanContext, PlannerSettings
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import FunctionChatModel

    scores = []
    for item in items:
        gold = gold_of(item)
        reply = workflow_as_generate_plan(gold)
        settings = PlannerSettings(max_plan_steps=max(8, len(gold.nodes)), transport_backoff_s=0.0)

        def answer(call: Any, r: dict[str, Any] = reply) -> Any:
            return r

        planner = LLMPlanner(FunctionChatModel(answer), settings=settings)
        plan = await planner.create_plan(task_of(item), PlanContext())
        scores.append(score(plan_as_workflow(plan), gold))
    return scores


# --------------------------------------------------------------------------- a real model


async def _single_call(model: Any, item: dict[str, Any]) -> GraphScore:
    from langchain_core.messages import HumanMessage, SystemMessage

    msgs = [SystemMessage(str(item["conversations"][0]["content"])), HumanMessage(task_of(item))]
    reply = await model.ainvoke(msgs)
    return score(parse_workflow(str(reply.text)), gold_of(item))


async def _planner(model: Any, settings: Any, item: dict[str, Any]) -> tuple[GraphScore, GraphScore]:
    """(no re-ask, full): one ``create_plan`` run with re-asks, read both ways (module docstring)."""
    from soothe_planner.errors import PlannerError
    from soothe_planner.models import PlanContext
    from soothe_planner.planner import LLMPlanner

    planner = LLMPlanner(model, settings=settings)
    try:
        plan = await planner.create_plan(task_of(item), PlanContext())
    except PlannerError:
        return _failed_score(), _failed_score()
    full = score(plan_as_workflow(plan), gold_of(item))
    return (full if planner.stats.reask == 0 else _failed_score()), full


async def run_model(
    items: list[dict[str, Any]], config_path: Path, max_seconds: float
) -> tuple[dict[str, list[GraphScore]], list[str], float]:
    from soothe_planner.config import load_config, resolve_planner

    config = load_config(config_path)
    base = resolve_planner(config)  # resolves the model and the structured-output method the config implies
    model = base.model
    await model.ainvoke("Say OK.")  # start the embedded server (if any) outside the time box
    full = base.settings.model_copy(update={"on_failure": "raise"})
    results: dict[str, list[GraphScore]] = {v: [] for v in VARIANTS}
    done_ids: list[str] = []
    t0 = time.perf_counter()
    for i, item in enumerate(items):
        if time.perf_counter() - t0 > max_seconds:
            break
        results["single call"].append(await _single_call(model, item))
        no_reask, with_reask = await _planner(model, full, item)
        results["planner, no re-ask"].append(no_reask)
        results["planner, full"].append(with_reask)
        done_ids.append(str(item["id"]))
        last = {v: results[v][-1] for v in VARIANTS}
        print(
            f"  [{i + 1}/{len(items)}] {item['id']:<22} "
            + "  ".join(
                f"{v}: {'ok' if s.valid else 'invalid'} nF1 {s.node_f1:.2f} eF1 {s.edge_f1:.2f}"
                for v, s in last.items()
            ),
            flush=True,
        )
    return results, done_ids, time.perf_counter() - t0


def summarise(scores: list[GraphScore]) -> dict[str, float]:
    if not scores:
        return {"n": 0}
    return {
        "n": len(scores),
        "validity": sum(s.valid for s in scores) / len(scores),
        "node_f1": statistics.mean(s.node_f1 for s in scores),
        "edge_f1": statistics.mean(s.edge_f1 for s in scores),
        "node_f1_valid_only": statistics.mean([s.node_f1 for s in scores if s.valid] or [0.0]),
        "edge_f1_valid_only": statistics.mean([s.edge_f1 for s in scores if s.valid] or [0.0]),
    }


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench worfbench", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder holding <subset>/graph_eval.json")
    ap.add_argument("--config", type=Path, default=REPO_ROOT / "config" / "default.yaml")
    ap.add_argument("--n", type=int, default=None, help="items in the sample (default 50; --quick 8)")
    ap.add_argument("--seed", type=int, default=2410)
    ap.add_argument("--max-seconds", type=float, default=1200.0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument(
        "--sanity", action="store_true", help="score gold plans fed through the planner (must be 1.0)"
    )
    ap.add_argument("--part", default=None, help="K/N: plan only the items at positions K mod N (0 <= K < N)")
    ap.add_argument("--merge", type=int, default=None, metavar="N", help="report the N parts written by --part")
    args = ap.parse_args(argv)
    part = _parse_part(args.part) if args.part else None
    items = load_items(args.data)
    n = args.n or (8 if args.quick else 50)
    chosen = sample(items, n if not args.sanity else (n if args.n else 200), args.seed)
    bad_gold = [str(it["id"]) for it in chosen if validity_errors(gold_of(it))]

    if args.sanity:
        scores = asyncio.run(run_sanity(chosen))
        summary = summarise(scores)
        worst = min(min(s.node_f1, s.edge_f1) for s in scores)
        print(f"worfbench sanity: {len(scores)} gold plans through LLMPlanner.create_plan\n")
        print(
            table(
                ["items", "validity", "node F1", "edge F1", "worst item"],
                [[len(scores), summary["validity"], summary["node_f1"], summary["edge_f1"], worst]],
            )
        )
        path = write_results(
            "worfbench_sanity", {"seed": args.seed, "summary": summary, "invalid_gold": bad_gold}
        )
        print(f"\nwrote {path.name}")
        return 0 if worst == 1.0 and summary["validity"] == 1.0 else 1

    if args.merge is not None:
        results, done_ids, elapsed = merge_parts(args.merge, seed=args.seed, n=n, config=args.config.name)
        print(f"worfbench: {len(done_ids)} items merged from {args.merge} parts (seed {args.seed})")
        return report(chosen, results, done_ids, elapsed, args, n)
    mine = [it for i, it in enumerate(chosen) if part is None or i % part[1] == part[0]]
    print(
        f"worfbench: {len(mine)} of {n} items (seed {args.seed}) across {', '.join(sorted(items))}; "
        f"config {args.config.name}; time box {args.max_seconds:.0f} s\n"
    )
    results, done_ids, elapsed = asyncio.run(run_model(mine, args.config, args.max_seconds))
    if part is not None:
        path = write_results(
            f"worfbench.part-{part[0]}-of-{part[1]}",
            {"seed": args.seed, "config": args.config.name, "items_requested": n, "part": list(part),
             "elapsed_s": elapsed, "item_ids": done_ids,
             "scores": {v: [dataclasses.asdict(x) for x in sc] for v, sc in results.items()}},
        )
        print(f"\n{len(done_ids)} of {len(mine)} items in {elapsed:.0f} s; wrote {path.name}")
        return 0
    return report(chosen, results, done_ids, elapsed, args, n)


def _parse_part(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise SystemExit(f"--part {text!r}: expected K/N with whole numbers, e.g. 0/2") from None
    if not 0 <= k < n:
        raise SystemExit(f"--part {text!r}: K must satisfy 0 <= K < N")
    return k, n


def merge_parts(parts: int, *, seed: int, n: int, config: str) -> tuple[dict[str, list[GraphScore]], list[str], float]:
    """The parts' per-item scores, back in sample order; refuses parts of a different run."""
    rows: dict[str, dict[str, GraphScore]] = {}
    order: list[str] = []
    elapsed = 0.0
    for k in range(parts):
        path = _common.RESULTS_DIR / f"worfbench.part-{k}-of-{parts}.json"
        if not path.exists():
            raise SystemExit(f"--merge {parts}: {path.name} is missing; run --part {k}/{parts} first")
        data = json.loads(path.read_text())
        if (data["seed"], data["items_requested"], data["config"]) != (seed, n, config):
            raise SystemExit(
                f"--merge {parts}: {path.name} is from seed {data['seed']}, {data['items_requested']} items, "
                f"{data['config']}; expected seed {seed}, {n} items, {config}"
            )
        elapsed = max(elapsed, float(data["elapsed_s"]))  # the parts ran side by side
        for v, scores in data["scores"].items():
            for item_id, one in zip(data["item_ids"], scores, strict=True):
                rows.setdefault(item_id, {})[v] = GraphScore(**one)
        order += data["item_ids"]
    results = {v: [rows[i][v] for i in order] for v in VARIANTS}
    return results, order, elapsed


def report(
    chosen: list[dict[str, Any]],
    results: dict[str, list[GraphScore]],
    done_ids: list[str],
    elapsed: float,
    args: argparse.Namespace,
    n: int,
) -> int:
    """Print the tables of a finished run (or merged parts) and write ``worfbench.json``."""
    by_variant = {v: summarise(sc) for v, sc in results.items()}
    base = by_variant["single call"]
    rows = []
    for v, s in by_variant.items():
        if not s.get("n"):
            continue
        rows.append(
            [
                v,
                s["n"],
                s["validity"],
                s["node_f1"],
                s["edge_f1"],
                s["edge_f1_valid_only"],
                s["validity"] - base["validity"],
                s["edge_f1"] - base["edge_f1"],
            ]
        )
    print()
    print(
        table(
            [
                "variant",
                "items",
                "valid",
                "node F1",
                "edge F1",
                "edge F1 (valid only)",
                "Δ valid vs single call",
                "Δ edge F1",
            ],
            rows,
        )
    )
    per_subset: dict[str, dict[str, Any]] = {}
    by_id = {str(it["id"]): it["source"] for it in chosen}
    for v, variant_scores in results.items():
        for sid, one in zip(done_ids, variant_scores, strict=False):
            per_subset.setdefault(by_id[sid], {}).setdefault(v, []).append(one)
    per_subset_summary = {k: {v: summarise(s) for v, s in d.items()} for k, d in per_subset.items()}
    print(f"\n{len(done_ids)} of {n} items in {elapsed:.0f} s")
    path = write_results(
        "worfbench",
        {
            "seed": args.seed,
            "config": args.config.name,
            "items_requested": n,
            "items_done": len(done_ids),
            "elapsed_s": elapsed,
            "summary": by_variant,
            "per_subset": per_subset_summary,
            "item_ids": done_ids,
        },
    )
    print(f"wrote {path.name}")
    return 0
