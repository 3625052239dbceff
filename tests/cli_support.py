"""What the CLI tests share: a config file on a scripted model over the sample workspace."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

WORKSPACE = Path(__file__).resolve().parents[1] / "examples" / "workspace"
PLAN = {
    "plan_action": "new", "execution_mode": "sequential", "next_action": "search",
    "steps": [
        {"id": "find", "description": "Search the workspace for TODO lines", "tools": ["search_text"],
         "depends_on": []},
        {"id": "files", "description": "List the files", "tools": ["list_dir"], "depends_on": ["find"]},
    ],
}
"""Two steps over the sample workspace, each naming one tool whose arguments one call fills in."""


def scripted_config(tmp_path: Path, script: dict[str, Any], **sections: Any) -> Path:
    """``tmp_path/config.yaml`` running ``script`` (written beside it); ``sections`` merge into the defaults."""
    (tmp_path / "script.json").write_text(json.dumps(script))
    config: dict[str, Any] = {
        "models": {"default": "scripted:script.json"},
        "planner": {"max_iterations": 3, "transport_backoff_s": 0, "retries": 1},
        "execution": {"workspace": str(WORKSPACE)},
        "checkpoint": {"backend": "sqlite", "path": "state/ck.sqlite"},
    }
    for key, value in sections.items():
        config[key] = {**config.get(key, {}), **value}
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    return path
