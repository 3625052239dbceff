"""How many things may run at once, and how many model calls may a run make?

The front door of ``soothe_planner.concurrency``: other subpackages import these names from here, never
from a module inside it (``tests/test_layers.py`` keeps it so).
"""

from __future__ import annotations

from soothe_planner.concurrency.bridge import run_sync
from soothe_planner.concurrency.controller import (
    ConcurrencyController,
    ConcurrencyPolicy,
    StepParallelism,
)
from soothe_planner.concurrency.limited_model import (
    PHASE_METADATA_KEY,
    is_limited,
    limit_model,
    limiting_controllers,
    unwrap_model,
)
from soothe_planner.concurrency.meter import RUN_METER, CallMeter, metering
from soothe_planner.concurrency.slots import (
    HELD_LLM_SLOTS,
    Slots,
    reset_held,
)

__all__ = [
    "HELD_LLM_SLOTS",
    "PHASE_METADATA_KEY",
    "RUN_METER",
    "CallMeter",
    "ConcurrencyController",
    "ConcurrencyPolicy",
    "Slots",
    "StepParallelism",
    "is_limited",
    "limit_model",
    "limiting_controllers",
    "metering",
    "reset_held",
    "run_sync",
    "unwrap_model",
]
