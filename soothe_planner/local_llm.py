"""Deprecated module path: use ``soothe_planner.local``. It will be removed in 0.3."""

import warnings

from soothe_planner.local import *  # noqa: F403
from soothe_planner.local import __all__  # noqa: F401

warnings.warn(
    "soothe_planner.local_llm is deprecated; import from soothe_planner.local",
    DeprecationWarning,
    stacklevel=2,
)
