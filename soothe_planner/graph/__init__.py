"""LangGraph integration: the StrangeLoop graph, its nodes and state view, approval and persistence.

The front door of ``soothe_planner.graph``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from soothe_planner.graph.approval import (
    SEAL_KEY_ENV,
    ApprovalReply,
    SealKey,
    canonical_json,
    parse_reply,
    render_decision,
    seal_digest,
)
from soothe_planner.graph.loop import (
    MAX_GOAL_CHARS,
    NODES_PER_ITERATION,
    build_strange_loop,
    check_goal,
    goal_input,
    offered_context,
    recursion_limit_for,
    run_config,
)
from soothe_planner.graph.loop_nodes import (
    LoopNodes,
)
from soothe_planner.graph.nodes import (
    PlannerNodes,
    parse_run_context,
    route_after_assess,
    route_after_intake,
    route_after_resolve,
)
from soothe_planner.graph.persistence import (
    Persistence,
    open_persistence,
)
from soothe_planner.graph.request import (
    final_message,
    start_run,
)
from soothe_planner.graph.state import (
    LoopGraphState,
    LoopInput,
    RunContext,
    RunStatus,
    StrangeLoopState,
)
from soothe_planner.graph.view import (
    LoopView,
)

__all__ = [
    "MAX_GOAL_CHARS",
    "NODES_PER_ITERATION",
    "SEAL_KEY_ENV",
    "ApprovalReply",
    "LoopGraphState",
    "LoopInput",
    "LoopNodes",
    "LoopView",
    "Persistence",
    "PlannerNodes",
    "RunContext",
    "RunStatus",
    "SealKey",
    "StrangeLoopState",
    "build_strange_loop",
    "canonical_json",
    "check_goal",
    "final_message",
    "goal_input",
    "offered_context",
    "open_persistence",
    "parse_reply",
    "parse_run_context",
    "recursion_limit_for",
    "render_decision",
    "route_after_assess",
    "route_after_intake",
    "route_after_resolve",
    "run_config",
    "seal_digest",
    "start_run",
]
