"""Deprecated module path: use ``soothe_planner.dag``. It will be removed in 0.3."""

import warnings

from soothe_planner.dag import *  # noqa: F403
from soothe_planner.dag import __all__  # noqa: F401

warnings.warn(
    "soothe_planner.plan_manager is deprecated; import from soothe_planner.dag",
    DeprecationWarning,
    stacklevel=2,
)
