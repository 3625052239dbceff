"""Child process for tests/test_kill_resume.py: run (or resume) one StrangeLoop thread on SQLite.

    python kill_resume_child.py DB SIDE_EFFECT_FILE THREAD first|resume

Every run of the tool appends ``start <step>`` and ``done <step>`` lines to the side-effect file.
In ``first`` mode the tool blocks forever when it starts step s3, so the parent can kill the
process with s1 and s2 completed; ``resume`` continues the same thread from its checkpoint.
The planner is a deterministic function of the request (no script position to lose in a crash).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from typing import Any

from langchain_core.tools import StructuredTool

from soothe_planner.execution import StepExecutor
from soothe_planner.graph.loop import build_strange_loop, goal_input, run_config
from soothe_planner.graph.persistence import open_persistence
from soothe_planner.models import PlannerSettings
from soothe_planner.planner import LLMPlanner
from soothe_planner.testing import FunctionChatModel, ScriptedCall

GOAL = "do four things"
PLAN = {
    "plan_action": "new",
    "execution_mode": "dependency",
    "next_action": "run the four steps",
    "steps": [
        {"id": "s1", "description": "do s1", "tools": ["act"]},
        {"id": "s2", "description": "do s2", "tools": ["act"]},
        {"id": "s3", "description": "do s3", "tools": ["act"], "depends_on": ["s1", "s2"]},
        {"id": "s4", "description": "do s4", "tools": ["act"], "depends_on": ["s3"]},
    ],
}


def model_reply(call: ScriptedCall) -> Any:
    if call.schema_name == "RouteIntake":
        return {"route": "complex"}
    if call.schema_name == "AssessStatus":
        done = "act ok: do s4" in call.prompt_text
        return {"status": "done" if done else "continue", "goal_progress": 1.0 if done else 0.0,
                "confidence": 0.9, "summary": "all four steps ran" if done else "work remains"}
    if call.schema_name == "GeneratePlan":
        return PLAN
    raise AssertionError(f"unexpected call {call.schema_name!r}")


def act_tool(side_effect_file: str, block_at: str | None) -> StructuredTool:
    def act(text: str) -> str:
        name = text.splitlines()[0]
        with open(side_effect_file, "a", encoding="utf-8") as fh:
            fh.write(f"start {name}\n")
        if name == block_at:
            threading.Event().wait()  # never returns: the parent kills this process here
        with open(side_effect_file, "a", encoding="utf-8") as fh:
            fh.write(f"done {name}\n")
        return f"act ok: {name}"

    return StructuredTool.from_function(act, name="act", description="acts once per call",
                                        metadata={"read_only": True})


async def main(db: str, side_effect_file: str, thread: str, mode: str) -> None:
    planner = LLMPlanner(FunctionChatModel(model_reply), settings=PlannerSettings(transport_backoff_s=0.0))
    executor = StepExecutor(tools=[act_tool(side_effect_file, "do s3" if mode == "first" else None)])
    config = run_config(thread, 5)
    async with open_persistence("sqlite", path=db) as p:
        graph = build_strange_loop(planner, executor, checkpointer=p.checkpointer, store=p.store)
        if mode == "resume":
            pending = (await graph.aget_state(config)).next
            print(json.dumps({"resuming_at": list(pending)}), flush=True)
            inp = None
        else:
            inp = goal_input(GOAL, thread_id=thread, max_iterations=5)
        # durability="sync": each checkpoint is on disk before the next node starts.
        state = await graph.ainvoke(inp, config, durability="sync")
    print(json.dumps({"status": state.get("status"), "iteration": state.get("iteration"),
                      "error": state.get("error")}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
