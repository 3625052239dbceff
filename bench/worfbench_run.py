"""How a WorFBench run plans its items: each selected run of each item on the model (or on the
scripted model), with the same tools, settings and context for every run, and the saved calls read
back where ``--replay-from`` allows (``worfbench_replay``). ``worfbench.py`` is the command around it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.worfbench_calls import CallRecorder
from bench.worfbench_replay import Reusable, try_replay
from bench.worfbench_tools import capabilities_of
from bench.worfbench_variants import RUNS, Answer, as_dicts, planner_run, two_shot_run

__all__ = ["OnItem", "run_model", "run_scripted", "run_settings"]

OnItem = Callable[[dict[str, dict[str, Any]], float], None]
"""Called after each item with every answer so far and the seconds this process spent."""



async def run_model(
    items: list[dict[str, Any]], config_path: Path, max_seconds: float, n_ctx: int, max_steps: int,
    *, runs: tuple[str, ...] = RUNS, done: dict[str, dict[str, Any]] | None = None, on_item: OnItem | None = None,
    reuse: Reusable | None = None,
) -> tuple[dict[str, dict[str, Any]], float]:
    from soothe_planner.config import load_config, resolve_planner
    from soothe_planner.config.providers import split_model_spec

    config = load_config(config_path)
    server = None
    kind, name = split_model_spec(config.models.default)
    if kind == "local" and not os.environ.get("SOOTHE_LOCAL_LLM_URL"):
        from soothe_planner.local import LocalModelServer, embedded_model

        # the configured embedded model, with a context for the longest tasks (the package's default cuts them)
        server = LocalModelServer(n_ctx=n_ctx, model=embedded_model(name))
        os.environ["SOOTHE_LOCAL_LLM_URL"] = server.start()
    try:
        return await _run_items(items, resolve_planner(config), max_seconds, max_steps, context_tokens=n_ctx,
                                runs=runs, done=done, on_item=on_item, reuse=reuse)
    finally:
        if server is not None:
            server.stop()
            os.environ.pop("SOOTHE_LOCAL_LLM_URL", None)


async def run_scripted(
    items: list[dict[str, Any]], config_path: Path, max_seconds: float, n_ctx: int, max_steps: int,
    *, runs: tuple[str, ...] = RUNS, done: dict[str, dict[str, Any]] | None = None, on_item: OnItem | None = None,
    reuse: Reusable | None = None,
) -> tuple[dict[str, dict[str, Any]], float]:
    """The same run on the scripted model (``worfbench_scripted``): no model is loaded."""
    from bench.worfbench_scripted import scripted_model
    from soothe_planner.config import load_config, resolve_planner

    base = resolve_planner(load_config(config_path), scripted_model(items))
    return await _run_items(items, base, max_seconds, max_steps, context_tokens=n_ctx, runs=runs, done=done,
                            on_item=on_item, reuse=reuse)


def run_settings(base: Any, max_steps: int, context_tokens: int | None) -> Any:
    """The planner settings every planner run starts from: ``base`` with errors raised, a step cap
    for the largest gold graph, and a prompt budget of the context the server has (less the reply's
    room), so the planner's prompts are held to the context the two-shot prompt is given."""
    update: dict[str, Any] = {"on_failure": "raise", "max_plan_steps": max(base.settings.max_plan_steps, max_steps)}
    if context_tokens is not None:
        room = context_tokens - base.settings.max_output_tokens
        update["prompt_budget_tokens"] = max(base.settings.prompt_budget_tokens, room)
    return base.settings.model_copy(update=update)


async def _run_items(
    items: list[dict[str, Any]], base: Any, max_seconds: float, max_steps: int,
    *, context_tokens: int | None = None, runs: tuple[str, ...] = RUNS,
    done: dict[str, dict[str, Any]] | None = None, on_item: OnItem | None = None, reuse: Reusable | None = None,
) -> tuple[dict[str, dict[str, Any]], float]:
    """Every selected run for each item not in ``done`` (kept as given), within ``max_seconds``.

    With ``reuse`` (``--replay-from``), a run this code would ask exactly what a saved run asked is
    read from that run's replies instead of the model (``worfbench_replay``), its record marked so.

    ``on_item(runs, seconds)`` is called after each item with everything so far, so a run that is
    stopped keeps what it finished. Each item is a run of its own: its calls count against a fresh
    ``max_total_llm_calls`` budget (a run's controller from ``base.controller.for_run()``, sharing
    only the in-flight limit), not one budget for the whole benchmark. Every run of an item gets
    the same item, the same tools (``worfbench_tools``; the two-shot prompt shows them in its text,
    the planner gets them as capabilities) and the same model, server and context.
    """
    from soothe_planner.concurrency import unwrap_model

    recorder = CallRecorder()
    raw: Any = unwrap_model(base.model)  # a chat model; its callbacks are a list here
    raw.callbacks = [*(raw.callbacks or []), recorder]
    controller = getattr(base, "controller", None)

    def item_model() -> Any:
        return raw if controller is None else controller.for_run().wrap_model(raw)

    await item_model().ainvoke("Say OK.")  # start the server (if any) outside the time box
    recorder.take()
    settings = run_settings(base, max_steps, context_tokens)
    out: dict[str, dict[str, Any]] = dict(done or {})
    t0 = time.perf_counter()
    for i, item in enumerate(items):
        if str(item["id"]) in out:
            continue
        if time.perf_counter() - t0 > max_seconds:
            break
        capabilities = capabilities_of(item)
        records: dict[str, dict[str, Any]] = {}
        answers: dict[str, Answer] = {}
        replayed: dict[str, dict[str, Any]] = {}
        for run in runs:
            again = await try_replay(reuse, run, item, settings, raw)
            if again is not None:
                records[run], rows = again
                replayed.update(rows)
                continue
            model = item_model()
            if run == "two-shot":
                records[run], got = await two_shot_run(model, item, recorder, capabilities)
            else:
                records[run], got = await planner_run(model, settings, run, item, capabilities, recorder)
            answers.update(got)
        out[str(item["id"])] = {
            "subset": item["source"],
            "capabilities": [c.name for c in capabilities],
            "runs": records,
            "answers": {**as_dicts(answers), **replayed},
        }
        shown = {**{v: a.ok for v, a in answers.items()}, **{v: bool(a["ok"]) for v, a in replayed.items()}}
        print(f"  [{i + 1}/{len(items)}] {item['id']:<22} "
              + "  ".join(f"{v}: {'ok' if ok else 'failed'}{' (replayed)' if v in replayed else ''}"
                          for v, ok in shown.items()), flush=True)
        if on_item is not None:
            on_item(out, time.perf_counter() - t0)
    return out, time.perf_counter() - t0
