"""The goal-wide step DAG: validation, the ready set, failure propagation, and its renderings.

The front door of ``soothe_planner.dag``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from soothe_planner.dag.plan_dag import (
    PlanDAG,
    ReadyFeed,
    blocked_result,
    find_cycle,
    validate_steps,
)
from soothe_planner.dag.plan_manager import (
    IngestReport,
    PlanManager,
    PlanRevision,
)
from soothe_planner.dag.render import (
    mermaid,
    planning_context,
)
from soothe_planner.dag.validation import (
    StepLike,
    listing,
)

__all__ = [
    "IngestReport",
    "PlanDAG",
    "PlanManager",
    "PlanRevision",
    "ReadyFeed",
    "StepLike",
    "blocked_result",
    "find_cycle",
    "listing",
    "mermaid",
    "planning_context",
    "validate_steps",
]
