"""How fast is each kind of call the loop makes on the embedded model, before and after tuning?

Two ways to get the requests. **Real runs, replayed** (``--record``, then ``--replay``): ``--record``
runs at least 5 goals of at least 2 goal suites through the real graph on the model and keeps every
request with the model's own reply, and what the run needed of each call (``local_record.py``,
``local_expect.py``); ``--replay`` sends those requests to a cold server (nothing kept), then to a
warm one, and reports per kind of call the median and p90 of TTFT and total time, the tokens and
the usable replies, judged by what the recorded run needed: an assessment must give the status its
step of the run should have had, never a fixed "done" (``local_replay.py``). **One goal, canned**
(the configurations below, the default): one goal's calls recorded on canned replies, replayed to
several server configurations.

For each kind of call — intake, generate (a plan), a model step, assess and synthesis (the final
answer) — the request is the one the loop really sends (``local_calls.py``: one run of a goal
through the real graph, recorded), replayed streamed to a real server. Reported per kind: prompt
and completion tokens, time to first token (TTFT), total time, prompt tokens/s (prompt tokens ÷
TTFT, so with reuse it is the *effective* rate) and generation tokens/s (completion tokens after
the first ÷ the time after the first), each the median of ``--repeats`` calls; and the server
process's CPU seconds per call, which stays meaningful on a busy machine where wall time does not.

Configurations, each at every ``--threads`` count, measured in one run on one model
(``--model``, default the shipped config's ``models.default``):

- **before** — the server as the package started it before tuning (``ServerTuning.stock()``) and
  the ``full`` prompt profile; every measured call follows a short call of another prompt, so
  nothing of the previous request's prompt can be reused.
- **after-cold** — the tuned server and the ``compact`` profile, its prompt cache off and the same
  flush before every call: what fewer tokens and better settings buy with no reuse at all.
- **after** — the tuned server with its prompt cache and the ``compact`` profile, calls in the
  loop's order (intake, generate, step, assess, synthesis, intake, ...). Each repeat is another
  run of the goal (``local_calls``: a *variant*), so a server can reuse exactly the prefix the
  loop's prompts share across runs, never a whole identical prompt.
- **after-json** — ``after`` with the plan written as compact JSON held by the schema's grammar
  (``planner.plan_syntax: json``) instead of the one Python call per step the embedded model
  declares: what the plan syntax buys, alone.
- **after-restart** — ``after``, but every variant in a server of its own, started for it and
  stopped after it, as every CLI run starts one: nothing of an earlier run is in memory.
- **after-restart-states** — ``after-restart`` with the prompt states each server leaves on disk
  (``ServerTuning.prompt_states_mib``, a fresh folder for the configuration): each run's new
  server finds the earlier runs' states, never its own prompts (each variant is another goal).

The servers ``after`` and the others start keep no states on disk, so that none restores prompts
it never read.

Every reply is judged as well as timed (``local_judge.py``: would the loop accept this plan, is
this assessment the right answer, does this step keep every item it was given), and the table's
``usable`` column says how many were; a target counts as met only when every reply was usable.

Every configuration first replays variant 0 unmeasured (the model's pages in memory; for
``after``, the cache filled as a previous run would have left it), then variants 1..repeats.

``--sweep`` measures server settings instead (batch sizes, context size, the logits buffer, the
sampler order, the prompt cache), one at a time, on the shipped prompts' generate, step and assess
calls. ``--llama-server PATH`` adds llama.cpp's own
server (a binary built elsewhere, never by this benchmark) with several slots and ``json_schema``.
``--lock FILE`` holds an exclusive flock on FILE while each server runs, so that people sharing a
machine never run two model servers at once (do not also wrap the command in ``flock`` on the
same file: the two locks would wait for each other). The load average is recorded before and
after every configuration; compare figures only within one run.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench._common import RESULTS_DIR, loadavg, table, write_results
from bench.local_calls import CALL_KINDS, Call, capture_calls
from bench.local_judge import judge
from bench.local_servers import LlamaServer, PythonServer, Server, TokenCounter
from bench.provenance import embedded_model_file

__all__ = ["Config", "Sample", "held", "main", "measure", "render", "run", "summarise"]

TARGETS_S = {"generate": 6.0, "assess": 3.0, "step": 4.0}
SWEEP_KINDS = ("generate", "step", "assess")
"""The kinds ``--sweep`` measures: the three with targets, in the loop's order, so reuse sees them interleave."""
FLUSH = {"messages": [{"role": "system", "content": "Reply with one word."},
                      {"role": "user", "content": "Say ok."}], "max_tokens": 2, "temperature": 0.0}
"""A call of another prompt: after it, the server's previous-request state shares nothing useful."""


@dataclass(frozen=True)
class Config:
    """One server configuration and how its calls are ordered."""

    name: str
    server: str  # "python" | "llama-server"
    profile: str  # the planner's prompt profile
    method: str  # the structured-output method the requests are built for
    reuse: bool  # the loop's order with the server's reuse; else a flush call before each call
    tuning: dict[str, Any] = field(default_factory=dict)  # ServerTuning fields, or {"stock": True}
    syntax: str = "auto"  # the planner's plan syntax (planner.plan_syntax): auto | json | calls
    restart: bool = False  # every variant in a new server, as every CLI run starts one


@dataclass
class Sample:
    """One measured call."""

    ttft: float
    total: float
    completion_tokens: int
    cpu_s: float
    prompt_tokens: int
    reused_tokens: int | None = None  # as the server reports it (llama-server only)
    text: str = ""
    problem: str | None = None  # why the loop could not use the reply ("" usable; None not judged)


class Counter(Protocol):
    def prompt_tokens(self, body: dict[str, Any]) -> int: ...
    def count(self, text: str) -> int: ...


ServerFactory = Callable[[Config, int], Server]
Judge = Callable[[str, dict[str, Any], str], str]
"""``(kind, request body, reply text) -> ""`` if the loop could use the reply, else why not."""


def _load() -> str:
    return "/".join(f"{x:.2f}" for x in loadavg()) or "n/a"


@contextlib.contextmanager
def held(lock: str | None) -> Iterator[None]:
    """An exclusive ``flock`` on ``lock`` for the block (nothing when ``lock`` is empty)."""
    if not lock:
        yield
        return
    with open(lock, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for the lock on {lock} (another model server is running)", file=sys.stderr, flush=True)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def measure(config: Config, threads: int, variants: Sequence[Sequence[Call]], *, make_server: ServerFactory,
            counter: Counter, lock: str | None = None, kinds: Sequence[str] = CALL_KINDS,
            time_box_s: float = 0.0, judge: Judge | None = None) -> dict[str, Any]:
    """Start ``config``'s server, replay ``variants`` (the first unmeasured), stop it. Returns its rows.

    With ``config.restart`` each variant gets a server of its own, started and stopped around it.

    With ``judge``, every measured reply is also judged (``local_judge.py``) and the rows say how
    many the loop could have used.
    """
    samples: dict[str, list[Sample]] = {k: [] for k in kinds}

    def replay(server: Server, v: int, calls: Sequence[Call]) -> None:
        for call in calls:
            if call.kind not in kinds:
                continue
            if not config.reuse:
                server.stream(FLUSH)
            got = server.stream(call.body)
            if v == 0:
                continue
            samples[call.kind].append(Sample(
                got.ttft, got.total, got.completion_tokens or counter.count(got.text), got.cpu_s,
                got.prompt_tokens or counter.prompt_tokens(call.body), got.reused, got.text,
                None if judge is None else judge(call.kind, call.body, got.text)))

    with held(lock):
        load_before = _load()
        started = time.monotonic()
        server = None if config.restart else make_server(config, threads)
        with server if server is not None else contextlib.nullcontext():
            for v, calls in enumerate(variants):
                if v > 1 and time_box_s and time.monotonic() - started > time_box_s:
                    break
                if server is not None:
                    replay(server, v, calls)
                    continue
                with make_server(config, threads) as fresh:
                    replay(fresh, v, calls)
        seconds = time.monotonic() - started
        load_after = _load()
    return {"config": config.name, "threads": threads, "load_before": load_before, "load_after": load_after,
            "seconds": round(seconds, 1), "rows": {kind: summarise(ss) for kind, ss in samples.items() if ss}}


def summarise(ss: Sequence[Sample]) -> dict[str, Any]:
    """The medians of one kind's samples; a rate is the median of the samples' rates."""
    if not ss:
        raise ValueError("summarise needs at least one sample")
    med = statistics.median
    out: dict[str, Any] = {
        "n": len(ss),
        "prompt_tokens": med(s.prompt_tokens for s in ss),
        "completion_tokens": med(s.completion_tokens for s in ss),
        "ttft_s": round(med(s.ttft for s in ss), 3),
        "total_s": round(med(s.total for s in ss), 3),
        "prompt_tps": round(med(s.prompt_tokens / s.ttft for s in ss), 1) if all(s.ttft > 0 for s in ss) else None,
        # the first token is the end of the prompt's evaluation; the rest is generation
        "gen_tps": round(med(max(0, s.completion_tokens - 1) / max(1e-6, s.total - s.ttft) for s in ss), 1),
        "cpu_s": round(med(s.cpu_s for s in ss), 2),
        "total_all_s": [round(s.total, 2) for s in ss],
        "last_output": ss[-1].text[:400],
    }
    reused = [s.reused_tokens for s in ss if s.reused_tokens is not None]
    if reused:
        out["reused_tokens"] = med(reused)
    judged = [s.problem for s in ss if s.problem is not None]
    if judged:
        out["usable"] = judged.count("")
        out["problems"] = list(dict.fromkeys(p for p in judged if p))[:3]
    return out


# --------------------------------------------------------------------------- the configurations


def standard_configs(with_llama_server: bool) -> list[Config]:
    configs = [
        Config("before", "python", "full", "function_calling", reuse=False, tuning={"stock": True}),
        Config("after-cold", "python", "compact", "function_calling", reuse=False, tuning={"prompt_cache_mib": 0}),
        Config("after", "python", "compact", "function_calling", reuse=True),
        Config("after-json", "python", "compact", "function_calling", reuse=True, syntax="json"),
        # a new server for every run, as every CLI run starts one: with nothing kept, then with the
        # prompt states the earlier runs' servers left on disk
        Config("after-restart", "python", "compact", "function_calling", reuse=True, restart=True),
        Config("after-restart-states", "python", "compact", "function_calling", reuse=True, restart=True,
               tuning={"prompt_states_mib": 512}),
    ]
    if with_llama_server:
        configs.append(Config("llama-server", "llama-server", "compact", "json_schema", reuse=True,
                              tuning={"parallel": 4}))
    return configs


def sweep_configs() -> list[Config]:
    """One server setting changed at a time, on the shipped (``compact``) prompts.

    ``stock`` → ``logits_all off`` changes only ``logits_all``; → ``tuned without cache`` also the sampler
    order (``grammar_last``); the batch and context rows change one setting of ``tuned without cache``;
    then the calls in the loop's order, with only the previous request's KV kept, then with the RAM
    prompt cache as well, then that server guessing up to 2 or 4 tokens from the prompt
    (``ServerTuning.draft_tokens``; 4 is the shipped server). Every row but the last two guesses none.
    """
    base: dict[str, Any] = {"prompt_cache_mib": 0, "draft_tokens": 0}

    def cfg(name: str, tuning: dict[str, Any], reuse: bool = False) -> Config:
        return Config(name, "python", "compact", "function_calling", reuse=reuse, tuning=tuning)

    out = [cfg("stock", {"stock": True}),
           cfg("logits_all off", {"stock": True, "logits_all": False}),
           cfg("tuned without cache", base)]
    for nb, nu in ((256, 256), (1024, 512), (1024, 1024), (2048, 512)):
        # no comma in a name: --only takes a comma-separated list of them
        out.append(cfg(f"n_batch {nb} / n_ubatch {nu}", {**base, "n_batch": nb, "n_ubatch": nu}))
    out.append(cfg("n_ctx 8192", {**base, "n_ctx": 8192}))
    out.append(cfg("KV reuse only (loop order)", base, reuse=True))
    out.append(cfg("RAM cache (loop order)", {"draft_tokens": 0}, reuse=True))
    for n in (2, 4):
        out.append(cfg(f"RAM cache and {n} guessed tokens (loop order)", {"draft_tokens": n}, reuse=True))
    return out


# --------------------------------------------------------------------------- the report


def render(results: Sequence[dict[str, Any]]) -> str:
    headers = ["config", "threads", "call", "prompt tok", "compl tok", "TTFT s", "total s",
               "prompt tok/s", "gen tok/s", "CPU s", "reused tok", "n", "usable", "load before → after"]
    rows = []
    for res in results:
        for kind, r in res["rows"].items():
            rows.append([res["config"], res["threads"], kind, r["prompt_tokens"], r["completion_tokens"],
                         r["ttft_s"], r["total_s"], r["prompt_tps"], r["gen_tps"], r["cpu_s"],
                         r.get("reused_tokens", "—"), r["n"], f"{r['usable']}/{r['n']}" if "usable" in r else "—",
                         f"{res['load_before']} → {res['load_after']}"])
    return table(headers, rows)


def verdict(results: Sequence[dict[str, Any]]) -> list[str]:
    """One line per target (``TARGETS_S``), for the tuned configurations: median total time, met or missed.

    Where replies were judged, a target is met only if every reply was usable as well.
    """
    lines = []
    for res in results:
        if res["config"] not in ("after", "llama-server"):
            continue
        for kind, target in TARGETS_S.items():
            r = res["rows"].get(kind)
            if r:
                judged = "usable" in r
                met = "met" if r["total_s"] <= target and (not judged or r["usable"] == r["n"]) else "missed"
                note = f" ({r['usable']} of {r['n']} replies usable)" if judged else ""
                lines.append(f"{res['config']} @ {res['threads']} thread(s): {kind} median {r['total_s']:.2f} s "
                             f"(target ≤ {target:.0f} s){note} — {met}")
    return lines


# --------------------------------------------------------------------------- the command


def resolve_model(spec: str | None) -> tuple[str, Any]:
    """``(the model string, its EmbeddedModel)``; default the shipped config's ``models.default``."""
    from soothe_planner.config import packaged_config_text, parse_yaml, split_model_spec
    from soothe_planner.errors import ConfigError
    from soothe_planner.local import embedded_model

    if not spec:
        spec = str(parse_yaml(packaged_config_text(), "the packaged default config")["models"]["default"])
    kind, name = split_model_spec(spec)
    if kind != "local":
        raise SystemExit(f"--model {spec!r}: this benchmark measures the embedded model; "
                         "give 'local' or 'local:NAME' (e.g. 'local:1.5b')")
    try:
        return spec, embedded_model(name)
    except ConfigError as exc:
        raise SystemExit(f"--model {spec!r}: {exc}") from None


def _counts(text: str) -> list[int]:
    """``"1,2"`` → ``[1, 2]``; anything but positive whole numbers is an argparse error."""
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r}: give positive whole numbers separated by commas, e.g. 1,2")
    return values


def _count(text: str) -> int:
    values = _counts(text)
    if len(values) != 1:
        raise argparse.ArgumentTypeError(f"{text!r}: give one positive whole number")
    return values[0]


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m bench local", description=(__doc__ or "").split("\n", 1)[0])
    ap.add_argument("--model", default=None, help="'local' or 'local:NAME' (default: the shipped config's model)")
    ap.add_argument("--repeats", type=_count, default=5, help="measured calls per kind and configuration (median reported)")
    ap.add_argument("--threads", type=_counts, default=[1, 2], help="comma-separated thread counts")
    ap.add_argument("--quick", action="store_true", help="2 repeats, 1 thread: a smoke run")
    ap.add_argument("--sweep", action="store_true", help="measure server settings on generate, step and assess")
    ap.add_argument("--only", default="", help="comma-separated configuration names (default: all)")
    ap.add_argument("--kinds", default=None, help="comma-separated call kinds (default: all)")
    ap.add_argument("--llama-server", default=None, metavar="PATH", help="a llama-server binary to measure as well")
    ap.add_argument("--lock", default=None, metavar="FILE", help="hold an exclusive flock on FILE while a server runs")
    ap.add_argument("--time-box", type=float, default=0.0, help="seconds per configuration before repeats stop")
    ap.add_argument("--results-dir", default=str(RESULTS_DIR), help="where local.json (or local_sweep.json) goes")
    ap.add_argument("--record", action="store_true", help="run real goals on the model and record its requests and replies")
    ap.add_argument("--replay", action="store_true", help="replay a recording to a cold server, then a warm one")
    ap.add_argument("--recording", default=None, metavar="FILE", help="the recording (default bench/data/local_recording.json)")
    ap.add_argument("--goals", default=None, help="--record: comma-separated SUITE/GOAL names (default: 7 of 3 suites)")
    ap.add_argument("--max-seconds", type=float, default=None, help="--record: bound on each goal's wall time")
    return ap


def run(argv: Sequence[str] | None = None, *, make_server: ServerFactory | None = None,
        counter: Counter | None = None, answer: Callable[[dict[str, Any]], dict[str, Any]] | None = None) -> int:
    """``main``, with the servers, the token counter and (for ``--record``) the model replaceable (the tests use fakes)."""
    args = _parser().parse_args(argv)
    if args.record and args.replay:
        raise SystemExit("--record and --replay: record first, then replay")
    if args.replay and not args.model:
        from bench.local_record import DEFAULT_RECORDING, load_recording

        args.model = load_recording(Path(args.recording or DEFAULT_RECORDING))["model"]
    spec, model = resolve_model(args.model)
    repeats, threads = args.repeats, args.threads
    if args.quick:
        repeats, threads = 2, [1]
    if args.record:
        from bench.local_replay import record_command

        return record_command(args, spec, answer)
    if args.replay:
        from bench.local_replay import replay_command

        return replay_command(args, model, threads, make_server=make_server or _python_server(model),
                              counter=counter or TokenCounter(model), measured_here=make_server is None)
    kinds = tuple(k.strip() for k in (args.kinds or ",".join(CALL_KINDS)).split(",") if k.strip())
    unknown = [k for k in kinds if k not in CALL_KINDS]
    if unknown or not kinds:
        raise SystemExit(f"--kinds {args.kinds!r}: unknown call kind(s) {unknown}; choose from {', '.join(CALL_KINDS)}")
    configs = sweep_configs() if args.sweep else standard_configs(bool(args.llama_server))
    if args.sweep:
        kinds = tuple(k for k in kinds if k in SWEEP_KINDS) or SWEEP_KINDS
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        missing = [n for n in wanted if n not in {c.name for c in configs}]
        if missing:
            raise SystemExit(f"--only: unknown configuration(s) {missing}; choose from "
                             f"{', '.join(repr(c.name) for c in configs)}")
        configs = [c for c in configs if c.name in wanted]

    states: dict[str, Path] = {}  # a fresh folder of prompt states per configuration that keeps them

    def default_server(config: Config, n: int) -> Server:
        if config.server == "python":
            folder = None
            if config.tuning.get("prompt_states_mib"):
                folder = states.setdefault(config.name, Path(tempfile.mkdtemp(prefix="bench-prompt-states-")))
            return PythonServer(model, threads=n, tuning=config.tuning, states_dir=folder)
        assert args.llama_server
        return LlamaServer(args.llama_server, model, threads=n, options=config.tuning)

    measured_here = make_server is None  # the servers this run starts load the embedded model's file
    make_server = make_server or default_server
    counter = counter or TokenCounter(model)
    print(f"model {spec} ({model.alias}); {repeats} repeat(s) after one unmeasured run; threads {threads}; "
          f"calls {', '.join(kinds)}", flush=True)
    results = []
    for n in threads:
        for config in configs:
            variants = [capture_calls(v, model=spec, prompt_profile=config.profile,
                                      structured_output_method=config.method, plan_syntax=config.syntax)
                        for v in range(repeats + 1)]
            res = measure(config, n, variants, make_server=make_server, counter=counter, lock=args.lock,
                          kinds=kinds, time_box_s=args.time_box, judge=judge)
            results.append(res)
            print(render([res]) + f"\n({res['seconds']:.0f} s)\n", flush=True)
    print(render(results))
    for line in verdict(results):
        print(line)
    payload = {"model": spec, "model_alias": model.alias, "repeats": repeats, "threads": threads,
               "kinds": list(kinds), "configs": [asdict(c) for c in configs], "results": results}
    settings = {k: v for k, v in payload.items() if k != "results"} | {"time_box": args.time_box, "sweep": args.sweep}
    path = write_results("local_sweep" if args.sweep else "local", payload, directory=Path(args.results_dir),
                         settings=settings, model_file=embedded_model_file(spec) if measured_here else None)
    print(f"\nwrote {path}")
    return 0


def _python_server(model: Any) -> ServerFactory:
    """The package's embedded server for ``model`` with a configuration's tuning (``--replay``)."""
    return lambda config, n: PythonServer(model, threads=n, tuning=config.tuning)


def _terminated(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    # A SIGTERM (timeout(1), a job scheduler) unwinds like Ctrl-C, through the context manager of
    # the server in hand, so no model server outlives the benchmark.
    signal.signal(signal.SIGTERM, _terminated)
    return run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
