"""Deprecated module path: use ``soothe_planner.planner``. It will be removed in 0.3."""

import warnings

from soothe_planner.planner import *  # noqa: F403
from soothe_planner.planner import __all__  # noqa: F401

warnings.warn(
    "soothe_planner.reflection is deprecated; import from soothe_planner.planner",
    DeprecationWarning,
    stacklevel=2,
)
