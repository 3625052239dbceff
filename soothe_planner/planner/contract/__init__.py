"""The goal's deliverable as a contract: how it is declared, what a plan must hold, what ``done`` needs.

``declare`` reads a model's declaration; ``rules`` judges a plan against the deliverable;
``checks`` judges a ``done``; ``evidence`` reads what the steps verifiably did, as data. None of
them reads the goal's words: they hold the same for a goal in any language.
"""

from soothe_planner.planner.contract.checks import (
    answer_text,
    count_problems,
    counts_found,
    final_outputs,
    fold,
    lines_left_out,
    narrow_searches,
    unmet,
)
from soothe_planner.planner.contract.declare import mentions, needs_declaration, to_deliverable
from soothe_planner.planner.contract.evidence import (
    LINE_LABEL,
    WHOLE_NUMBER,
    Write,
    as_evidence,
    counted,
    delivered_text,
    found_lines,
    is_model_step,
    path_key,
    read_back,
    write_target,
    writes_of,
)
from soothe_planner.planner.contract.rules import (
    finished_writes,
    order_writes,
    owed_files,
    owed_writes,
    writer_names,
    writes_outside,
)

__all__ = [
    "LINE_LABEL",
    "WHOLE_NUMBER",
    "Write",
    "answer_text",
    "as_evidence",
    "count_problems",
    "counted",
    "counts_found",
    "delivered_text",
    "final_outputs",
    "finished_writes",
    "fold",
    "found_lines",
    "is_model_step",
    "lines_left_out",
    "mentions",
    "narrow_searches",
    "needs_declaration",
    "order_writes",
    "owed_files",
    "owed_writes",
    "path_key",
    "read_back",
    "to_deliverable",
    "unmet",
    "write_target",
    "writer_names",
    "writes_of",
    "writes_outside",
]
