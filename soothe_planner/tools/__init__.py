"""The built-in workspace tools: the front door of ``soothe_planner.tools``.

``builtins.py`` holds the six tools and what each promises to answer; ``files.py`` the walk, the
opening and the searching of files they share; ``workspace.py`` holds how
a path is opened inside the workspace and never outside it, and which paths are never written;
``schema.py`` reads any tool's argument schema, against which typed tool steps are checked.
"""

from soothe_planner.tools.builtins import (
    BLANK_WRITE_MARK,
    BUILTIN_TOOL_NAMES,
    COUNTING_TOOL_NAMES,
    MAX_LIST_ENTRIES,
    MAX_READ_CHARS,
    MAX_SEARCH_FILE_BYTES,
    MAX_SEARCH_HITS,
    MAX_WRITE_CHARS,
    NEAREST_LINES_MARK,
    SEARCH_STOPPED_MARK,
    SEARCH_TIME_LIMIT_S,
    SEARCH_TOOL_NAME,
    WRITE_TOOL_NAME,
    make_builtin_tools,
    resolve_in_workspace,
    workspace_files,
    write_echo,
    wrote_blank,
)
from soothe_planner.tools.schema import COUNTS_KEY, WRITES_PATH_ARG_KEY, declared_data, tool_args_schema
from soothe_planner.tools.workspace import PROTECTED_NAMES, ControlFile, Workspace

__all__ = [
    "BLANK_WRITE_MARK",
    "BUILTIN_TOOL_NAMES",
    "COUNTING_TOOL_NAMES",
    "COUNTS_KEY",
    "MAX_LIST_ENTRIES",
    "MAX_READ_CHARS",
    "MAX_SEARCH_FILE_BYTES",
    "MAX_SEARCH_HITS",
    "MAX_WRITE_CHARS",
    "NEAREST_LINES_MARK",
    "PROTECTED_NAMES",
    "SEARCH_STOPPED_MARK",
    "SEARCH_TIME_LIMIT_S",
    "SEARCH_TOOL_NAME",
    "WRITES_PATH_ARG_KEY",
    "WRITE_TOOL_NAME",
    "ControlFile",
    "Workspace",
    "declared_data",
    "make_builtin_tools",
    "resolve_in_workspace",
    "tool_args_schema",
    "workspace_files",
    "write_echo",
    "wrote_blank",
]
