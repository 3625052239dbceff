"""The only lenient code: a model's text read into wire objects (every tolerance is listed in ``reader``),
and tool calls a model wrote as text recognised (their tolerances are listed in ``tool_calls``).

The front door of ``soothe_planner.parsing``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from soothe_planner.parsing.answers import parse_object
from soothe_planner.parsing.json_repair import (
    MAX_DEPTH,
    Arr,
    Broken,
    Found,
    Obj,
    Scan,
    json_type,
    scan_values,
    strip_think,
)
from soothe_planner.parsing.plan_calls import read_plan_calls
from soothe_planner.parsing.plan_steps import (
    ID_KEYS,
    apply_rules,
    assign_ids,
    conform_ids,
    derived_description,
    fold_keys,
    is_step_like,
    norm_id,
    read_step,
)
from soothe_planner.parsing.reader import (
    ParsedDecision,
    parse_decision,
    read_decision,
)
from soothe_planner.parsing.tool_calls import TextToolCall, TextToolCalls, read_text_tool_calls

__all__ = [
    "ID_KEYS",
    "MAX_DEPTH",
    "Arr",
    "Broken",
    "Found",
    "Obj",
    "ParsedDecision",
    "Scan",
    "TextToolCall",
    "TextToolCalls",
    "apply_rules",
    "assign_ids",
    "conform_ids",
    "derived_description",
    "fold_keys",
    "is_step_like",
    "json_type",
    "norm_id",
    "parse_decision",
    "parse_object",
    "read_decision",
    "read_plan_calls",
    "read_step",
    "read_text_tool_calls",
    "scan_values",
    "strip_think",
]
