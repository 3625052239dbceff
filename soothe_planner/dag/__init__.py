"""The goal-wide step DAG: validation, the ready set, failure propagation, and its renderings.

The front door of ``soothe_planner.dag``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from soothe_planner.dag.arg_schema import (
    check_args,
    signature,
)
from soothe_planner.dag.ingest import follow_renames
from soothe_planner.dag.plan_dag import (
    PlanDAG,
    ReadyFeed,
    blocked_result,
    find_cycle,
    latest_results,
    validate_steps,
)
from soothe_planner.dag.plan_manager import (
    IngestReport,
    PlanManager,
    PlanRevision,
    call_key,
)
from soothe_planner.dag.render import (
    dag_prompt,
    mermaid,
)
from soothe_planner.dag.step_refs import (
    REFERENCE_RE,
    BadReferenceError,
    Reference,
    arg_strings,
    find_references,
    free_step_id,
    lookup_reference,
    map_arg_strings,
    parse_token,
    references_in,
    rename_references,
    resolve_args,
    resolve_references,
)
from soothe_planner.dag.step_refs import (
    canonical as canonical_reference,
)
from soothe_planner.dag.typed_steps import (
    ToolDescriptions,
    adds_to_tool,
    copy_stands,
    describes_tool,
    text_words,
    typed_step_errors,
)
from soothe_planner.dag.validation import (
    StepLike,
    ancestors,
    listing,
    reachable,
)

__all__ = [
    "REFERENCE_RE",
    "BadReferenceError",
    "IngestReport",
    "PlanDAG",
    "PlanManager",
    "PlanRevision",
    "ReadyFeed",
    "Reference",
    "StepLike",
    "ToolDescriptions",
    "adds_to_tool",
    "ancestors",
    "arg_strings",
    "blocked_result",
    "call_key",
    "canonical_reference",
    "check_args",
    "copy_stands",
    "dag_prompt",
    "describes_tool",
    "find_cycle",
    "find_references",
    "follow_renames",
    "free_step_id",
    "latest_results",
    "listing",
    "lookup_reference",
    "map_arg_strings",
    "mermaid",
    "parse_token",
    "reachable",
    "references_in",
    "rename_references",
    "resolve_args",
    "resolve_references",
    "signature",
    "text_words",
    "typed_step_errors",
    "validate_steps",
]
