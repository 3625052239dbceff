"""How good are the plans, measured against gold workflow graphs nobody on this project wrote?

WorFBench (``Benchmarking Agentic Workflow Generation``, arXiv 2410.07869) pairs tasks with gold
step DAGs. This benchmark samples a fixed, seeded set of items across the subsets we ship
(toolbench, seal_tools, lumos, os) and, for each item, runs the configured model up to three ways
(``--runs``; ``bench/worfbench_variants.py``): WorFBench's own two-shot single call, and the planner
under each prompt profile the package ships (compact, full), from which three rows each are read
(its first call with no repair, the planner without re-asks, the planner). It scores every
answer twice:

- **WorFEval, the official metric** (``bench/worfeval.py``): f1_chain and f1_graph with
  all-mpnet-base-v2 node matching, the evaluator's quirks reproduced; a corrected variant beside
  it. These are the numbers comparable with the paper's Table 1 (whose published rows for a few
  models are printed beside ours).
- **ours, lexical** (``bench/worfbench_score.py``): validity, node F1 by token-set ratio, edge F1 on
  transitive reductions. Kept for continuity with earlier runs; not comparable with the paper.

**Every run of an item gets the same information**: the same item (one seeded sample, every row
scored on the same items), the same tools or actions — the two-shot prompt shows them in the task
text, the planner gets the same list as its capabilities (``bench/worfbench_tools.py``) and the task
text whole as well — and the same model, server and context. Nothing is cut: the embedded model's
server is started by this benchmark with a context of ``--n-ctx`` tokens (the largest two-shot
prompt is about 5,000 tokens by cl100k_base) instead of the package's default of 4,096, and the
planner's prompt budget is raised to that context less its reply's room, so its prompts are held
to what the two-shot prompt is given; ``max_plan_steps`` is raised to the largest gold graph in the
data (10 steps) where the config asks for fewer. The planner's own behaviour is not changed here.

**Every row says what ran and what it cost** (``bench/worfbench_report.py``): profile, plan syntax,
capabilities passed and re-asks, read back from the planner that ran; LLM calls, prompt and
completion tokens and model seconds per item, from the recorded calls
(``bench/worfbench_calls.py``); and the model's raw text of each of those calls.

Modes:

- ``--sanity``: each gold plan is fed through a scripted model into ``LLMPlanner.create_plan``, the
  plan is written back as answer text, and scored against the gold. The lexical scores and the
  corrected WorFEval scores must be 1.0 on every item; the official WorFEval scores are reported
  beside the gold scored against itself, which is their ceiling (the 20-order cap and the
  START/END quirk keep it under 1.0 for wide or long gold graphs).
- ``--scripted``: the whole model run on a scripted model that answers with the gold plans
  (``bench/worfbench_scripted.py``): the harness end to end, in seconds, with no model loaded.
- default: model runs, time-boxed (``--max-seconds``), items in sample order until the box is
  spent. ``--part K/N`` runs the items at positions K mod N and writes their answers to
  ``bench/results/<stem>.part-K-of-N.json`` after every item (``--resume`` continues a part that
  was stopped); ``--merge N`` reads the N parts and scores them as one run (``--partial``: the
  parts written so far; ``bench/worfbench_files.py``). ``<stem>`` is ``worfbench``, or
  ``worfbench-TAG`` with ``--tag TAG``. Each item is a run of its own, with its own call budget.
  Each item's runs are saved with their settings and call records (``<stem>.answers.json``), and
  ``--rescore`` scores them again without a model (after a scorer change, or with
  ``--similarity exact``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import random
import statistics
from pathlib import Path
from typing import Any

from bench import _common
from bench._common import REPO_ROOT, table, write_results
from bench.provenance import embedded_model_file
from bench.worfbench_calls import summarise_cost
from bench.worfbench_examples import EXAMPLE_SOURCES, EXAMPLES_FROM
from bench.worfbench_files import PROTOCOL, RunKey, merge_parts, resumed, run_names, saved_answers
from bench.worfbench_replay import Reusable, digests_of_part, reusable_runs
from bench.worfbench_report import (
    CATEGORY,
    PAPER_ROWS,
    item_cost,
    print_tables,
    raw_of,
    row_label,
    variant_names,
)
from bench.worfbench_run import run_model, run_scripted, run_settings
from bench.worfbench_score import (
    GraphScore,
    Workflow,
    parse_workflow,
    score,
)
from bench.worfbench_scripted import gold_as_full
from bench.worfbench_variants import (
    RUNS,
    Answer,
    plan_answer,
    task_of,
)

SUBSETS = ("toolbench", "seal_tools", "lumos", "os")
DEFAULT_DATA = REPO_ROOT.parent / "shared" / "data" / "worfbench"


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


def gold_text(item: dict[str, Any]) -> str:
    return str(item["conversations"][-1]["content"])


def gold_of(item: dict[str, Any]) -> Workflow:
    return parse_workflow(gold_text(item))


def largest_gold(items: dict[str, list[dict[str, Any]]]) -> int:
    return max(len(gold_of(it).nodes) for pool in items.values() for it in pool)


workflow_as_generate_plan = gold_as_full
"""A gold workflow as the planner's ``GeneratePlan`` answer (dependencies = reduced edges)."""


def plan_as_workflow(plan: Any) -> Workflow:
    wf = Workflow()
    for step in plan.steps:
        wf.nodes[step.id] = step.description
        wf.edges += [(d, step.id) for d in step.depends_on]
    return wf


# --------------------------------------------------------------------------- scoring


def load_similarity(kind: str) -> Any:
    """The node similarity WorFEval matches with: the real model, or exact text (sanity, tests)."""
    if kind == "exact":
        return lambda pred, gold: [[1.0 if same_text(p, g) else 0.0 for g in gold] for p in pred]
    from bench.embeddings import EmbeddingSimilarity

    try:
        return EmbeddingSimilarity()
    except RuntimeError as exc:
        raise SystemExit(f"WorFEval: {exc} (or pass --similarity exact to score by identical text)") from None


def same_text(a: str, b: str) -> bool:
    """Identical up to whitespace, or one is the other cut short with "…" (the planner's wire bounds a
    step description to 300 characters, and a plan's text is what the round trip checks)."""
    a, b = " ".join(a.split()), " ".join(b.split())
    if a == b:
        return True
    return any(cut.endswith("…") and full.startswith(cut[:-1].rstrip()) for cut, full in ((a, b), (b, a)))


def score_one(answer: Answer | dict[str, Any], item: dict[str, Any], similarity: Any) -> dict[str, Any]:
    """Both scorers on one answer: ours (lexical) and WorFEval (official and corrected)."""
    from bench.worfeval import score_item

    if isinstance(answer, dict):  # as saved (a legacy run's answers carry their raw text too)
        answer = Answer(str(answer["text"]), ok=bool(answer["ok"]), error=str(answer.get("error", "")))
    lexical = score(parse_workflow(answer.text), gold_of(item)) if answer.ok else _failed_score(answer.error)
    official = score_item(answer.text if answer.ok else "", gold_text(item), similarity)
    return {
        "lexical": dataclasses.asdict(lexical),
        "worfeval": {
            "parsed": official.parsed,
            "f1_chain": official.f1_chain.f1,
            "f1_graph": official.f1_graph.f1,
            "f1_chain_corrected": official.f1_chain_corrected.f1,
            "f1_graph_corrected": official.f1_graph_corrected.f1,
            "notes": official.notes,
        },
    }


def _failed_score(reason: str = "planner error") -> GraphScore:
    return GraphScore(False, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, [reason])


def summarise(scores: list[dict[str, Any]]) -> dict[str, Any]:
    if not scores:
        return {"n": 0}

    def mean(key: str, part: str) -> float:
        return statistics.mean(float(s[part][key]) for s in scores)

    return {
        "n": len(scores),
        "f1_chain": mean("f1_chain", "worfeval"),
        "f1_graph": mean("f1_graph", "worfeval"),
        "f1_chain_corrected": mean("f1_chain_corrected", "worfeval"),
        "f1_graph_corrected": mean("f1_graph_corrected", "worfeval"),
        "parsed_by_official_parser": mean("parsed", "worfeval"),
        "ours_validity": mean("valid", "lexical"),
        "ours_node_f1": mean("node_f1", "lexical"),
        "ours_edge_f1": mean("edge_f1", "lexical"),
    }


# --------------------------------------------------------------------------- sanity


async def run_sanity(items: list[dict[str, Any]]) -> list[str]:
    """Each gold plan through ``LLMPlanner.create_plan`` (scripted model), back as answer text."""
    from soothe_planner.models import PlanContext, PlannerSettings
    from soothe_planner.planner import LLMPlanner
    from soothe_planner.testing import FunctionChatModel

    out = []
    for item in items:
        gold = gold_of(item)
        reply = workflow_as_generate_plan(gold)
        settings = PlannerSettings(max_plan_steps=max(8, len(gold.nodes)), transport_backoff_s=0.0)

        def answer(call: Any, r: dict[str, Any] = reply) -> Any:
            return r

        planner = LLMPlanner(FunctionChatModel(answer), settings=settings)
        plan = await planner.create_plan(task_of(item), PlanContext())
        out.append(plan_answer([(s.id, s.description, s.depends_on) for s in plan.steps])[0])
    return out


def _round_trip_misses(row: dict[str, Any], ceiling: dict[str, Any]) -> list[str]:
    """What a lossless round trip got wrong: ours must be 1.0, corrected WorFEval the gold's own score."""
    lex, wf, top = row["lexical"], row["worfeval"], ceiling["worfeval"]
    misses = [k for k in ("valid", "node_f1", "edge_f1") if float(lex[k]) != 1.0]
    misses += [k for k in ("f1_chain_corrected", "f1_graph_corrected") if wf[k] != top[k]]
    return misses


def _read_differently(item: dict[str, Any]) -> bool:
    from bench.worfeval import read_answer

    official = read_answer(gold_text(item))
    return official is None or len(official.inner) != len(gold_of(item).nodes)


def sanity(chosen: list[dict[str, Any]], similarity: Any, seed: int) -> int:
    answers = asyncio.run(run_sanity(chosen))
    rows = [score_one(Answer(a), it, similarity) for a, it in zip(answers, chosen, strict=True)]
    ceiling = [score_one(Answer(gold_text(it)), it, similarity) for it in chosen]
    got, top = summarise(rows), summarise(ceiling)
    noisy = [str(it["id"]) for it in chosen if _read_differently(it)]
    misses = {
        str(it["id"]): m
        for it, r, c in zip(chosen, rows, ceiling, strict=True)
        if str(it["id"]) not in noisy and (m := _round_trip_misses(r, c))
    }
    print(f"worfbench sanity: {len(rows)} gold plans through LLMPlanner.create_plan, scored against the gold\n")
    keys = ["ours_validity", "ours_node_f1", "ours_edge_f1", "f1_chain", "f1_graph", "f1_chain_corrected",
            "f1_graph_corrected"]
    print(table(["scored", *keys], [["planner round trip", *(got[k] for k in keys)],
                                    ["gold against itself", *(top[k] for k in keys)]]))
    below = {k: sum(1 for r in ceiling if r["worfeval"][k] < 1.0) for k in ("f1_chain", "f1_graph", "f1_graph_corrected")}
    print(f"\ngold against itself below 1.0: official f1_chain on {below['f1_chain']} items (more than 20 "
          f"topological orders, or 10+ nodes with START and END), f1_graph on {below['f1_graph']} and corrected "
          f"f1_graph on {below['f1_graph_corrected']} (gold nodes no edge joins to the rest)")
    print(f"gold read differently by the official parser than by ours (prose in the answer repeats node "
          f"lines; not held to the round trip): {noisy or 'none'}")
    path = write_results("worfbench_sanity", {"seed": seed, "similarity": "exact" if callable(similarity) and
                                              not hasattr(similarity, "model") else "embedding",
                                              "summary": got, "gold_against_itself": top,
                                              "gold_below_one": below, "round_trip_misses": misses,
                                              "gold_read_differently": noisy},
                         settings={"seed": seed, "items": len(chosen)})
    print(f"round trip lossless on every item (ours 1.0, corrected WorFEval = the gold's own): "
          f"{'yes' if not misses else 'NO: ' + str(misses)}\nwrote {path.name}")
    return 0 if not misses else 1


# --------------------------------------------------------------------------- the command


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench worfbench", description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder holding <subset>/graph_eval.json")
    ap.add_argument("--config", type=Path, default=REPO_ROOT / "config" / "default.yaml")
    ap.add_argument("--n", type=int, default=None, help="items in the sample (default 120; --quick 8)")
    ap.add_argument("--seed", type=int, default=2410)
    ap.add_argument("--max-seconds", type=float, default=6 * 3600.0)
    ap.add_argument("--n-ctx", type=int, default=12288, help="context of the embedded server this run starts")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--similarity", choices=("embedding", "exact"), default=None,
                    help="WorFEval node similarity: all-mpnet-base-v2 (official; the default) or identical text "
                         "(the default with --scripted)")
    ap.add_argument("--sanity", action="store_true", help="score gold plans fed through the planner")
    ap.add_argument("--scripted", action="store_true",
                    help="no model: a scripted model answers every call with the gold plan (checks the harness)")
    ap.add_argument("--runs", default=",".join(RUNS),
                    help=f"comma-separated runs per item, of {', '.join(RUNS)} (each gives its rows)")
    ap.add_argument("--tag", default=None, help="a name added to the results files' (worfbench-TAG...), so a run "
                                                "of other code or settings does not overwrite another's "
                                                "(--scripted: 'scripted' unless given)")
    ap.add_argument("--items-of", default=None, metavar="NAME",
                    help="only the sampled items scored in bench/results/NAME.json (e.g. worfbench: the items of "
                         "the first model run), so a new run is compared on the same items")
    ap.add_argument("--part", default=None, help="K/N: plan only the items at positions K mod N (0 <= K < N)")
    ap.add_argument("--merge", type=int, default=None, metavar="N", help="score and report the N parts written by --part")
    ap.add_argument("--rescore", action="store_true", help="score the saved answers again (no model)")
    ap.add_argument("--partial", action="store_true",
                    help="with --merge: report the parts written so far (a missing part is named, not an error)")
    ap.add_argument("--resume", action="store_true",
                    help="with --part: keep the items its file already holds and plan only the others")
    ap.add_argument("--digests", action="store_true",
                    help="with --part: replay the part file's saved calls under the code checked out (the code "
                         "that made them) and write the digests of its requests beside it (no model)")
    ap.add_argument("--replay-from", default=None, metavar="TAG",
                    help="read each run from the saved run of worfbench-TAG's parts (with digests) when this code "
                         "asks exactly what that run asked; plan only the others with the model")
    ap.add_argument("--examples", choices=EXAMPLE_SOURCES, default="none",
                    help="the planner runs' own examples (PlannerSettings.examples): none, or the two worked "
                         "examples the two-shot prompt shows for the item's task type (bench/worfbench_examples.py)")
    args = ap.parse_args(argv)
    EXAMPLES_FROM.set(args.examples)
    args.similarity = args.similarity or ("exact" if args.scripted else "embedding")
    runs = _parse_runs(args.runs)
    tag = args.tag or ("scripted" if args.scripted else None)  # a scripted run never overwrites a model run's files
    stem = "worfbench" if not tag else f"worfbench-{tag}"
    part = _parse_part(args.part) if args.part else None
    items = load_items(args.data)
    n = args.n or (8 if args.quick else 120)
    chosen = sample(items, n if not args.sanity else (args.n or 200), args.seed)
    if args.sanity:
        return sanity(chosen, load_similarity(args.similarity), args.seed)
    if args.items_of:
        chosen = only_items_of(args.items_of, chosen)
    key = RunKey(args.seed, n, args.config.name, args.items_of)
    if args.merge is not None or args.rescore:
        found, elapsed = (merge_parts(args.merge, key, stem=stem, partial=args.partial)
                          if args.merge is not None else saved_answers(key, stem))
        print(f"worfbench: {len(found)} items with answers (seed {args.seed})")
        return report(chosen, found, elapsed, args, n, load_similarity(args.similarity), stem=stem)
    mine = [it for i, it in enumerate(chosen) if part is None or i % part[1] == part[0]]
    steps = largest_gold(items)
    if args.digests:
        return write_digests(args, part, stem, key, {str(it["id"]): it for it in mine}, steps)
    reuse = (reusable_runs(f"worfbench-{args.replay_from}", key, _model_digest(args)) if args.replay_from
             else None)
    print(f"worfbench: {len(mine)} of {n} items (seed {args.seed}) across {', '.join(sorted(items))}; "
          f"config {args.config.name}; runs {', '.join(runs)}{' (scripted model)' if args.scripted else ''}; "
          f"max_plan_steps >= {steps}; n_ctx {args.n_ctx}; time box {args.max_seconds:.0f} s\n")
    go = run_scripted if args.scripted else run_model
    if part is None:
        if args.resume:
            raise SystemExit("--resume continues a part's file: give --part K/N as well")
        found, elapsed = asyncio.run(go(mine, args.config, args.max_seconds, args.n_ctx, steps, runs=runs,
                                        reuse=reuse))
        _say_replayed(reuse)
        return report(chosen, found, elapsed, args, n, load_similarity(args.similarity), stem=stem)
    name = f"{stem}.part-{part[0]}-of-{part[1]}"
    if not args.resume and (_common.RESULTS_DIR / f"{name}.json").exists():  # never overwrite a part's answers
        raise SystemExit(f"{name}.json exists: --resume to continue it, or remove it to start the part again "
                         "(or --tag NAME to write a new run's files beside it)")
    done, before = resumed(name, key, runs) if args.resume else ({}, 0.0)
    if done:
        print(f"resuming {name}.json: {len(done)} item(s) kept ({before:.0f} s)")

    def save(found: dict[str, dict[str, Any]], seconds: float) -> None:
        write_results(name, {"seed": args.seed, "config": args.config.name, "items_requested": n,
                             "items_of": args.items_of,
                             "protocol": PROTOCOL, "run_names": list(runs), "scripted": args.scripted,
                             "n_ctx": args.n_ctx, "part": list(part), "elapsed_s": before + seconds,
                             "load_after": _common.loadavg(), "runs": found, "examples_from": args.examples,
                             **({"replayed_from": args.replay_from} if args.replay_from else {})},
                      **_provenance_args(args, model=not args.scripted))

    found, elapsed = asyncio.run(go(mine, args.config, args.max_seconds, args.n_ctx, steps, runs=runs,
                                    done=done, on_item=save, reuse=reuse))
    save(found, elapsed)
    _say_replayed(reuse)
    print(f"\n{len(found)} of {len(mine)} items in {before + elapsed:.0f} s; wrote {name}.json")
    return 0


def _say_replayed(reuse: Reusable | None) -> None:
    if reuse is not None:
        print(f"--replay-from {reuse.source}: {reuse.replayed} run(s) read from its saved calls, "
              f"{reuse.planned} planned by the model")


def write_digests(args: argparse.Namespace, part: tuple[int, int] | None, stem: str, key: RunKey,
                  items: dict[str, dict[str, Any]], max_steps: int) -> int:
    """``--digests``: the request digests of a part's saved runs under the code checked out (no model)."""
    from soothe_planner.concurrency import unwrap_model
    from soothe_planner.config import load_config, resolve_planner

    if part is None:
        raise SystemExit("--digests replays one part file: give --part K/N as well")
    if args.scripted:
        from bench.worfbench_scripted import scripted_model

        base = resolve_planner(load_config(args.config), scripted_model(list(items.values())))
    else:
        base = resolve_planner(load_config(args.config))  # the run's own model, never called
    settings = run_settings(base, max_steps, args.n_ctx)
    name = f"{stem}.part-{part[0]}-of-{part[1]}"
    out = asyncio.run(digests_of_part(name, key, items, settings, unwrap_model(base.model), config_files=[args.config]))
    runs = [r for item in out["runs"].values() for r in item.values()]
    missed = sum(1 for r in runs if "digests" not in r)
    print(f"{name}.digests.json: {len(runs) - missed} of {len(runs)} runs replayed to their saved rows "
          f"(code {out['code']}); {missed} not")
    return 0


def only_items_of(name: str, chosen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items of ``chosen`` that results file ``name`` scored, in sample order; refused if it scored others."""
    path = _common.RESULTS_DIR / f"{name}.json"
    if not path.exists():
        raise SystemExit(f"--items-of {name}: {path.name} is missing")
    ids = [str(row["id"]) for row in json.loads(path.read_text()).get("per_item", [])]
    known = {str(it["id"]) for it in chosen}
    if not ids or not set(ids) <= known:
        raise SystemExit(f"--items-of {name}: {path.name} scored items that are not in this sample "
                         "(another --seed or --n?)")
    return [it for it in chosen if str(it["id"]) in set(ids)]


def _parse_runs(text: str) -> tuple[str, ...]:
    chosen = tuple(dict.fromkeys(r.strip() for r in text.split(",") if r.strip()))
    unknown = [r for r in chosen if r not in RUNS]
    if unknown or not chosen:
        raise SystemExit(f"--runs {text!r}: choose among {', '.join(RUNS)} (comma-separated)")
    return tuple(r for r in RUNS if r in chosen)


def _provenance_args(args: argparse.Namespace, *, model: bool) -> dict[str, Any]:
    """The config file this run read and, when it planned with the embedded model, that model's file."""
    from soothe_planner.config import load_config

    found = None
    if model:
        models = load_config(args.config).models
        found = embedded_model_file(models.default, models.base_url)
    return {"config_files": [args.config], "model_file": found}


def _model_digest(args: argparse.Namespace) -> str | None:
    """sha256 of the model file this run will load (``None`` for a scripted run)."""
    from bench.provenance import model_digest

    return None if args.scripted else model_digest(_provenance_args(args, model=True)["model_file"])


def _parse_part(text: str) -> tuple[int, int]:
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise SystemExit(f"--part {text!r}: expected K/N with whole numbers, e.g. 0/2") from None
    if not 0 <= k < n:
        raise SystemExit(f"--part {text!r}: K must satisfy 0 <= K < N")
    return k, n


def report(
    chosen: list[dict[str, Any]],
    found: dict[str, dict[str, Any]],
    elapsed: float,
    args: argparse.Namespace,
    n: int,
    similarity: Any,
    *,
    stem: str = "worfbench",
) -> int:
    """Score every saved answer, print the tables, write ``<stem>.json`` and ``<stem>.answers.json``.

    Every row is scored on the same items: an item some row has no answer for is refused, naming
    both, since a row's mean over other items would not be comparable with the rest.
    """
    by_id = {str(it["id"]): it for it in chosen}
    order = [i for i in by_id if i in found]  # sample order
    names = variant_names(found[i] for i in order)
    for item_id in order:
        missing = [v for v in names if v not in found[item_id]["answers"]]
        if missing:
            raise SystemExit(f"item {item_id} has no answer for {missing}: every row is scored on the same items")
    scored: dict[str, dict[str, list[dict[str, Any]]]] = {}
    costs: dict[str, list[dict[str, Any]]] = {}
    per_item = []
    for item_id in order:
        item, run = by_id[item_id], found[item_id]
        row: dict[str, Any] = {"id": item_id, "subset": run["subset"], "capabilities": run.get("capabilities")}
        for v in names:
            one = score_one(run["answers"][v], item, similarity)
            scored.setdefault(v, {}).setdefault(run["subset"], []).append(one)
            scored[v].setdefault("all", []).append(one)
            spent = item_cost(run, v)
            if spent is not None:
                costs.setdefault(v, []).append(spent)
            row[v] = {**one, "text": run["answers"][v]["text"], "ok": run["answers"][v]["ok"],
                      "error": run["answers"][v].get("error", ""), "raw": raw_of(run, v), "cost": spent}
        per_item.append(row)
    summary = {v: {k: summarise(s) for k, s in d.items()} for v, d in scored.items()}
    row_labels = {v: row_label(v, [found[i] for i in order]) for v in names}
    cost = {v: summarise_cost(costs[v]) if v in costs else None for v in names}
    print_tables(summary, row_labels, cost, args.similarity)
    print(f"\n{len(order)} of {n} items in {elapsed:.0f} s of model time")
    protocol = max((PROTOCOL if "runs" in found[i] else 1 for i in order), default=PROTOCOL)
    meta = {"seed": args.seed, "config": args.config.name, "items_requested": n, "items_done": len(order),
            "items_of": getattr(args, "items_of", None),
            "elapsed_s": elapsed, "similarity": args.similarity, "protocol": protocol,
            "scripted": bool(getattr(args, "scripted", False)), "n_ctx": args.n_ctx}
    # a merge or a re-score loads no planning model: the parts' own files name the one their answers came from
    loaded = args.merge is None and not args.rescore and not getattr(args, "scripted", False)
    write_results(f"{stem}.answers", {**meta, "run_names": run_names(found, order), "runs": {i: found[i] for i in order}},
                  **_provenance_args(args, model=loaded))
    path = write_results(stem, {**meta, "variants": names, "labels": row_labels, "cost": cost, "summary": summary,
                                "paper_table_1": PAPER_ROWS, "paper_category_of_subset": CATEGORY,
                                "per_item": per_item},
                         **_provenance_args(args, model=loaded))
    print(f"wrote {path.name} and {stem}.answers.json")
    return 0
