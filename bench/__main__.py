"""Which benchmark to run: ``python -m bench <name> [options]`` (``python -m bench`` lists them).

Each benchmark is a module of this package with a ``main(argv) -> int``; it prints a table of
ratios against a baseline measured in the same run and writes its numbers to
``bench/results/<name>.json``.
"""

from __future__ import annotations

import importlib
import sys

from bench import provenance

BENCHMARKS = {
    "dataflow": "eager dataflow scheduling vs LangGraph Send supersteps, against the ideal bound",
    "economy": "LLM calls and prompt tokens per completed goal vs two baseline loop strategies",
    "scale": "framework overhead per iteration; PlanManager ingest + ready walk at 1k/10k/100k steps",
    "breaker": "the global LLM-call limiter: peak in flight and utilisation at 1, 4, 16",
    "shared_cap": "the LLM-call cap shared through PostgreSQL: cost per call against the process's own cap",
    "worfbench": "plan quality on WorFBench gold graphs (embedded or configured model)",
    "worfbench_wording": "how much of a WorFBench score is the gold's set phrases (saved answers, no model)",
    "goals": "real goals on a workspace, scored by checks: ours vs ReAct, plan-and-execute and Deep Agents",
    "local": "each kind of call on the embedded model: tokens, time to first token, tokens/s, before vs after",
}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in {"-h", "--help"} or args[0] not in BENCHMARKS:
        if args and args[0] not in {"-h", "--help"}:
            print(f"unknown benchmark {args[0]!r}; choose one of: {', '.join(BENCHMARKS)}", file=sys.stderr)
        print("usage: python -m bench <name> [--quick] [options]\n")
        for name, what in BENCHMARKS.items():
            print(f"  {name:<10} {what}")
        return 0 if not args or args[0] in {"-h", "--help"} else 2
    module = importlib.import_module(f"bench.{args[0]}")
    provenance.begin()  # the load average from here is the run's "load_before"
    return int(module.main(args[1:]))


if __name__ == "__main__":
    raise SystemExit(main())
