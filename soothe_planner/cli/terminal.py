"""How does a run look on a terminal: the live step table, the final report, a plan in three formats?

Kept out of ``app.py`` so the CLI stays argument parsing and one error boundary. Everything here
reads plain data — the graph's stream events and its state values (which are JSON-mode dumps by
design) — and never calls the library's planner or executor. Rendering uses ``rich``; on a
terminal the step table is redrawn live, elsewhere (a pipe, a CI log) each event becomes one line.

Only terminal renderings live here. A plan's prompt text and its Mermaid diagram are the DAG's
(``dag/render.py``); ``plan_mermaid`` hands the plan's steps to that one diagram rather than
drawing its own.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from soothe_planner.dag import PlanManager, mermaid
from soothe_planner.models import Plan

__all__ = [
    "RunView",
    "failure_reason",
    "plan_json",
    "plan_mermaid",
    "plan_table",
    "render_report",
    "report_dict",
    "steps_table",
]

_STATUS_STYLE = {
    "pending": "dim",
    "in_progress": "yellow",
    "completed": "green",
    "failed": "red",
    "skipped": "magenta",
}


def _excerpt(text: str | None, limit: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass
class StepRow:
    id: str
    description: str
    depends_on: list[str]
    status: str = "pending"
    started: float | None = None
    elapsed_s: float | None = None
    attempt: int = 0
    note: str = ""


def steps_table(rows: list[StepRow], title: str | None = None) -> Table:
    table = Table(title=title, title_justify="left", expand=False)
    for name in ("step", "status", "time", "depends on", "description / result"):
        table.add_column(name, overflow="fold")
    now = time.monotonic()
    for row in rows:
        elapsed = row.elapsed_s
        if elapsed is None and row.started is not None and row.status == "in_progress":
            elapsed = now - row.started
        table.add_row(
            row.id,
            Text(row.status, style=_STATUS_STYLE.get(row.status, "")),
            f"{elapsed:.1f}s" if elapsed is not None else "",
            ", ".join(row.depends_on),
            _excerpt(row.description) + (f"\n[dim]{_excerpt(row.note, 100)}[/dim]" if row.note else ""),
        )
    return table


def rows_from_manager(data: dict[str, Any] | None) -> list[StepRow]:
    if not data:
        return []
    rows = []
    for node in PlanManager.from_dict(data).nodes:
        result = node.result
        note = ""
        if result is not None:
            note = result.output if result.success else f"{result.error_type or 'error'}: {result.error or ''}"
        rows.append(
            StepRow(
                id=node.id, description=node.description, depends_on=list(node.depends_on), status=node.status,
                elapsed_s=(result.duration_ms / 1000) if result is not None else None, attempt=node.attempts,
                note=note,
            )
        )
    return rows


@dataclass
class RunView:
    """What a running loop looks like, fed by stream events and state updates."""

    goal: str
    thread_id: str
    budget: int = 0
    llm_calls: Any = None  # a callable returning the calls made so far
    rows: dict[str, StepRow] = field(default_factory=dict)
    iteration: int = 0
    phase: str = "starting"
    log: list[str] = field(default_factory=list)

    def calls_text(self) -> str:
        used = self.llm_calls() if callable(self.llm_calls) else 0
        return f"{used}/{self.budget}" if self.budget else f"{used} (no budget)"

    def on_event(self, event: dict[str, Any]) -> str | None:
        """Update from one custom-stream event; returns a one-line description of it."""
        kind = event.get("event")
        if kind == "intake":
            self.phase = f"intake: {event.get('route')}"
            return f"intake → {event.get('route')}"
        if kind == "assessment":
            self.iteration = int(event.get("iteration") or 0)
            self.phase = f"assessed: {event.get('status')}"
            return (f"iteration {self.iteration}: assessment {event.get('status')} "
                    f"(progress {float(event.get('goal_progress') or 0):.0%})")
        if kind == "plan":
            steps = event.get("steps") or []
            for s in steps:
                self.rows.setdefault(s["id"], StepRow(s["id"], s.get("description", ""), list(s.get("depends_on") or [])))
            self.phase = f"plan: {event.get('plan_action')}"
            return f"plan ({event.get('plan_action')}): {len(steps)} step(s)" + (" [degraded]" if event.get("degraded") else "")
        if kind == "step_started":
            row = self.rows.setdefault(event["step_id"], StepRow(event["step_id"], event.get("description", ""), []))
            row.status, row.started, row.attempt = "in_progress", time.monotonic(), int(event.get("attempt") or 1)
            return f"step {row.id} started" + (" (replayed)" if event.get("replayed") else "")
        if kind == "step_completed":
            row = self.rows.setdefault(event["step_id"], StepRow(event["step_id"], "", []))
            row.status = "completed" if event.get("success") else "failed"
            row.elapsed_s = float(event.get("duration_ms") or 0) / 1000
            row.note = str(event.get("output") or "") if event.get("success") else f"{event.get('error_type')}: {event.get('error')}"
            kind = "" if event.get("success") else f": {event.get('error_type')}"
            return f"step {row.id} {row.status} ({row.elapsed_s:.1f}s){kind}"
        if kind == "approval":
            return "plan approved" if event.get("approved") else f"plan rejected: {event.get('feedback')}"
        if kind == "error":
            return f"error: {_excerpt(str(event.get('error')), 200)}"
        if kind == "completed":
            self.phase = "completed"
            return "completed"
        return None

    def on_update(self, update: dict[str, Any]) -> None:
        """Update from a node's state update (the plan manager holds the authoritative statuses)."""
        for values in update.values():
            if isinstance(values, dict) and values.get("plan_manager"):
                for row in rows_from_manager(values["plan_manager"]):
                    old = self.rows.get(row.id)
                    if old is not None and row.status == "in_progress":
                        continue
                    if old is not None and row.elapsed_s is None:
                        row.elapsed_s, row.started = old.elapsed_s, old.started
                    self.rows[row.id] = row

    def renderable(self) -> RenderableType:
        header = Text.assemble(
            ("goal ", "bold"), _excerpt(self.goal, 100), "\n",
            ("iteration ", "bold"), str(self.iteration), "   ",
            ("LLM calls ", "bold"), self.calls_text(), "   ",
            ("phase ", "bold"), self.phase,
        )
        return Group(header, steps_table(list(self.rows.values())))


# --------------------------------------------------------------------------- final report


def failure_reason(values: dict[str, Any]) -> str | None:
    """Why a failed run failed, in one line: the loop's error and the last step that failed."""
    if values.get("status") != "failed":
        return None
    rows = rows_from_manager(values.get("plan_manager"))
    failed = [r for r in rows if r.status == "failed"]
    parts = [str(values["error"])] if values.get("error") else []
    if failed:
        parts.append(f"{len(failed)} step(s) failed, the last {failed[-1].id}: {_excerpt(failed[-1].note, 160)}")
    elif rows and all(r.status == "completed" for r in rows):
        parts.append(f"all {len(rows)} step(s) completed, yet the goal was never assessed done")
    return "; ".join(parts) or "the run failed without an error message"


def report_dict(values: dict[str, Any], *, thread_id: str, llm_calls: int | None = None) -> dict[str, Any]:
    """The JSON report of a run, from the graph's state values."""
    rows = rows_from_manager(values.get("plan_manager"))
    return {
        "thread_id": thread_id,
        "goal": values.get("goal"),
        "status": values.get("status"),
        "iterations": values.get("iteration"),
        "llm_calls": values.get("llm_calls") if llm_calls is None else llm_calls,
        "final_answer": values.get("final_answer"),
        "error": values.get("error"),
        "why": failure_reason(values),
        "steps": [
            {"id": r.id, "status": r.status, "depends_on": r.depends_on, "description": r.description,
             "seconds": r.elapsed_s, "result": r.note}
            for r in rows
        ],
    }


def render_report(console: Console, values: dict[str, Any], *, thread_id: str, llm_calls_text: str = "") -> None:
    status = values.get("status") or "unknown"
    style = {"done": "bold green", "failed": "bold red"}.get(status, "bold yellow")
    console.print(Text.assemble(("status ", "bold"), (status, style), "   ", ("thread ", "bold"), thread_id,
                                "   ", ("iterations ", "bold"), str(values.get("iteration") or 0),
                                *((("   ", ("LLM calls ", "bold"), llm_calls_text)) if llm_calls_text else ())))
    rows = rows_from_manager(values.get("plan_manager"))
    if rows:
        console.print(steps_table(rows, title=f"goal: {_excerpt(values.get('goal'), 100)}"))
    why = failure_reason(values)
    if why:
        console.print(Text.assemble(("failed: ", "bold red"), why))
    elif values.get("error"):
        console.print(Text.assemble(("error: ", "bold red"), str(values["error"])))
    if values.get("final_answer"):
        console.print(Text("answer", style="bold"))
        console.print(str(values["final_answer"]))


# --------------------------------------------------------------------------- a plan


def plan_table(plan: Plan) -> Table:
    table = Table(title=f"plan for: {_excerpt(plan.goal, 100)}", title_justify="left")
    for name in ("step", "depends on", "tool / subagent", "description"):
        table.add_column(name, overflow="fold")
    for s in plan.steps:
        # a typed tool step shows its call; a step with neither tool nor subagent is a model step
        uses = (f"{s.tool} {json.dumps(s.args, ensure_ascii=False)}" if s.tool else ", ".join(s.tools)) or (
            s.subagent or "(model)"
        )
        table.add_row(s.id, ", ".join(s.depends_on), uses, s.description)
    return table


def plan_json(plan: Plan) -> str:
    return json.dumps(plan.model_dump(mode="json"), indent=2)


def plan_mermaid(plan: Plan) -> str:
    """The plan as a diagram: the DAG's own Mermaid rendering, with the steps' statuses."""
    return mermaid(plan.steps)
