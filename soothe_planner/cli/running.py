"""How does ``run`` or ``resume`` go from the command to the report?

The config is read, the persistence opened and the run resolved once; the graph is built where
the server builds it (``ResolvedRun.graph``), streamed to its end or its pause while a ``RunView``
draws progress, and the final state read back from the checkpointer is what the report shows.
A resumed run that paused for approval needs ``--approve`` (naming the digest the pause showed) or
``--reject``; a killed run continues from its last checkpoint; a finished one is reported again.
"""

from __future__ import annotations

import json
from typing import Any

from rich.live import Live

from soothe_planner.cli.options import (
    EXIT_DONE,
    EXIT_FAILED,
    EXIT_PAUSED,
    Options,
    Usage,
    checked_goal,
    console_for,
    hidden_values,
    read_config,
    thread_id_of,
)
from soothe_planner.errors import PlannerError

__all__ = ["graph_for", "plan_context", "run_or_resume"]


def plan_context(config: Any) -> Any:
    from soothe_planner.models import PlanContext

    return PlanContext(workspace=str(config.execution.workspace))


def graph_for(config: Any, resolved: Any, persistence: Any) -> Any:
    # Built where the server builds its graph (ResolvedRun.graph), so both read every key alike.
    return resolved.graph(checkpointer=persistence.checkpointer, store=persistence.store)


async def drive(graph: Any, inp: Any, run_cfg: Any, view: Any, args: Options) -> None:
    """Stream the graph to the end (or a pause), feeding the view."""
    console = console_for(args)
    live_ok = not args.json and console.is_terminal

    async def pump(on_line: Any) -> None:
        async for mode, chunk in graph.astream(inp, run_cfg, stream_mode=["custom", "updates"]):
            if mode == "custom" and isinstance(chunk, dict):
                line = view.on_event(chunk)
                if line:
                    on_line(line)
            elif mode == "updates" and isinstance(chunk, dict):
                view.on_update(chunk)

    if live_ok:
        with Live(view.renderable(), console=console, refresh_per_second=4, transient=True) as live:
            await pump(lambda _line: live.update(view.renderable()))
    elif args.json:
        await pump(lambda _line: None)
    else:
        await pump(lambda line: console.print(f"[dim]·[/dim] {line}", markup=True))


def finish(values: dict[str, Any], interrupts: Any, thread_id: str, resolved: Any, args: Options) -> int:
    from soothe_planner.cli.terminal import render_report, report_dict

    console = console_for(args)
    values = hidden_values(values)
    calls = values.get("llm_calls") or 0  # the run's one count, persisted with it (concurrency/meter.py)
    if interrupts:
        payload = interrupts[0].value if hasattr(interrupts[0], "value") else interrupts[0]
        if args.json:
            report = report_dict(values, thread_id=thread_id, llm_calls=calls)
            report.update(status="awaiting_approval", approval=hidden_values(payload))
            print(json.dumps(report, indent=2, default=str))
        else:
            console.print((payload or {}).get("rendering", "") if isinstance(payload, dict) else str(payload))
            named = f"--config {args.config} " if args.config else ""
            console.print(
                f"paused for approval; continue with: soothe-planner resume {named}"
                f"--thread {thread_id} --approve  (or --reject 'feedback')"
            )
        return EXIT_PAUSED
    if args.json:
        print(json.dumps(report_dict(values, thread_id=thread_id, llm_calls=calls), indent=2, default=str))
    else:
        budget = resolved.config.concurrency.max_total_llm_calls if resolved is not None else 0
        text = f"{calls}/{budget}" if budget else str(calls)
        render_report(console, values, thread_id=thread_id, llm_calls_text=text)
    return EXIT_DONE if values.get("status") == "done" else EXIT_FAILED


def resumable(snapshot: Any, thread_id: str) -> bool:
    """Whether a saved run (not paused for approval) has work left; a finished run is reported again.

    Decided by the run's ``status`` as well as by LangGraph's ``next``: a run whose status is
    terminal and has nothing scheduled is finished; one with nodes scheduled continues; a run still
    ``running`` with nothing scheduled cannot be continued and is not reported as finished either.
    """
    status = snapshot.values.get("status")
    if snapshot.next:
        return True
    if status in ("done", "failed"):
        return False
    raise PlannerError(
        f"run {thread_id!r} has status {status!r} but its last checkpoint schedules nothing to run, "
        "so it can neither be continued nor reported as finished; start it again with `run`"
    )


async def run_or_resume(args: Options, *, resume: bool) -> int:
    from langgraph.errors import GraphRecursionError
    from langgraph.types import Command

    from soothe_planner.cli.terminal import RunView
    from soothe_planner.config import resolve_persistence, resolve_run
    from soothe_planner.graph import goal_input, run_config
    from soothe_planner.tracing import trace_run

    config = read_config(args.config)
    thread_id = thread_id_of(args)
    if not resume and not args.json:
        console_for(args).print(f"thread {thread_id}")
    async with resolve_persistence(config) as persistence:
        resolved = resolve_run(config)
        graph = graph_for(config, resolved, persistence)
        run_cfg = run_config(thread_id, config.planner.max_iterations)
        inp: Any
        if resume:
            snapshot = await graph.aget_state(run_cfg)
            if not snapshot.values:
                raise Usage(f"no run with thread id {thread_id!r} in the {config.checkpoint.backend} checkpointer")
            goal = snapshot.values.get("goal", "")
            if snapshot.interrupts:
                if not args.approve and args.reject_feedback is None:
                    raise Usage("this run is waiting for plan approval: pass --approve or --reject FEEDBACK")
                # The approval names the plan the pause showed (its digest), never "whatever is there now".
                pause = snapshot.interrupts[0].value if isinstance(snapshot.interrupts[0].value, dict) else {}
                inp = Command(resume={"approved": True, "sha256": pause.get("sha256")} if args.approve else
                              {"approved": False, "feedback": args.reject_feedback or ""})
            elif resumable(snapshot, thread_id):
                inp = None  # continue from the last checkpoint (a killed run)
            else:
                return finish(snapshot.values, (), thread_id, resolved, args)
        else:
            goal = checked_goal(args.goal)
            try:
                inp = goal_input(goal, thread_id=thread_id, max_iterations=config.planner.max_iterations,
                                 deliverable=args.deliver)
            except ValueError as exc:
                raise Usage(f"--deliver: {exc}") from None
        # Live: the count the run was saved with, plus the calls this process has made since; the
        # nodes write the same sum back to the state, which the report and `show` read.
        spent = (snapshot.values.get("llm_calls") or 0) if resume else 0
        view = RunView(goal=goal, thread_id=thread_id, budget=config.concurrency.max_total_llm_calls,
                       llm_calls=lambda: spent + resolved.controller.total_llm_calls)
        with trace_run(config.tracing.langfuse, goal=goal, thread_id=thread_id, resumed=resume) as trace:
            try:
                await drive(graph, inp, trace.config_for(run_cfg), view, args)  # type: ignore[arg-type]
            except GraphRecursionError:
                # Recorded in the checkpoint, so the run reads failed (show, --json), never running.
                error = f"the loop did not converge within planner.max_iterations={config.planner.max_iterations}"
                await graph.aupdate_state(run_cfg, {"status": "failed", "error": error})
        if trace.enabled and not args.json and trace.summary():
            console_for(args).print(trace.summary())
        snapshot = await graph.aget_state(run_cfg)
        return finish(snapshot.values, snapshot.interrupts, thread_id, resolved, args)
