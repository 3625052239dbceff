"""Deprecated module path: use ``soothe_planner.concurrency``. It will be removed in 0.3."""

import warnings

from soothe_planner.concurrency import *  # noqa: F403
from soothe_planner.concurrency import __all__  # noqa: F401

warnings.warn(
    "soothe_planner.limited_model is deprecated; import from soothe_planner.concurrency",
    DeprecationWarning,
    stacklevel=2,
)
