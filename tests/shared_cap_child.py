"""Child process for tests/test_shared_cap_processes.py: one "replica" running StrangeLoop runs.

    python shared_cap_child.py DSN run|resume THREAD:GOAL...

The graph of each run comes from the server's own factory (``server.graph_for_run``, reading the
config named by ``SOOTHE_CONFIG``), so the process holds one root controller for all its runs, as
a server replica does; the checkpoints and the shared LLM-call cap are on the PostgreSQL at DSN.
``run`` prints ``ready`` once everything is built, waits for one line on stdin, then runs every
goal at once; ``resume`` continues each thread from its checkpoint. Each run's outcome is one JSON
line on stdout.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from soothe_planner.graph.loop import goal_input, run_config
from soothe_planner.graph.persistence import open_persistence
from soothe_planner.server import graph_for_run

MAX_ITERATIONS = 8


def _outcome(thread: str, state: dict[str, Any], **extra: Any) -> str:
    return json.dumps({"thread": thread, "status": state.get("status"), "error": state.get("error"),
                       "llm_calls": state.get("llm_calls"), **extra})


async def main(dsn: str, mode: str, runs: list[tuple[str, str]]) -> None:
    async with open_persistence("postgres", dsn=dsn) as p:
        graphs = [
            graph_for_run({}).copy(update={"checkpointer": p.checkpointer, "store": p.store}) for _ in runs
        ]

        async def one(graph: Any, thread: str, goal: str) -> None:
            config = run_config(thread, MAX_ITERATIONS)
            if mode == "resume":
                before = await graph.aget_state(config)
                if not before.next:
                    print(json.dumps({"thread": thread, "status": "nothing to resume"}), flush=True)
                    return
                spent = before.values.get("llm_calls") or 0
                state = await graph.ainvoke(None, config)
                print(_outcome(thread, state, spent_before=spent, resumed_at=list(before.next)), flush=True)
                return
            state = await graph.ainvoke(goal_input(goal, thread_id=thread, max_iterations=MAX_ITERATIONS), config)
            print(_outcome(thread, state), flush=True)

        if mode == "run":
            print("ready", flush=True)
            sys.stdin.readline()
        await asyncio.gather(*(one(g, t, goal) for g, (t, goal) in zip(graphs, runs, strict=True)))


if __name__ == "__main__":
    dsn, mode, *specs = sys.argv[1:]
    asyncio.run(main(dsn, mode, [tuple(s.split(":", 1)) for s in specs]))  # type: ignore[misc]
