"""What a planner is told about a run: the ``Capability`` a step may use and the ``PlanContext``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from soothe_planner.models.base import DataModel, IntakeRoute

__all__ = [
    "Capability",
    "PlanContext",
]

class Capability(DataModel):
    """Something a step may use: a tool, a subagent or a remote graph."""

    name: str
    kind: Literal["tool", "subagent", "remote"] = "tool"
    description: str = ""
    read_only: bool = False
    args_schema: dict[str, Any] | None = Field(
        default=None,
        description="A tool's argument schema (JSON Schema), so a typed tool step's args can be checked at ingest.",
    )
    writes_path_arg: str | None = Field(
        default=None,
        description="The argument naming the workspace file this tool writes (its metadata 'writes_path_arg'), "
        "so the deliverable's checks see its writes.",
    )
    counts: bool = Field(
        default=False,
        description="The tool counts (its metadata 'counts'): its result's 'count' field is a number it counted.",
    )


class PlanContext(DataModel):
    """What the planner may know besides the goal. Every field is optional."""

    recent_messages: list[str] = Field(default_factory=list)
    available_capabilities: list[Capability] = Field(default_factory=list)
    completed_steps: dict[str, str] = Field(default_factory=dict, description="step id -> result summary")
    workspace: str | None = None
    working_memory_excerpt: str = ""
    intake: IntakeRoute | None = None
    thread_id: str | None = None

    @field_validator("available_capabilities", mode="before")
    @classmethod
    def _names_are_tools(cls, value: Any) -> Any:
        # A bare name is accepted as a tool for convenience; it is a typed API, not model output.
        if isinstance(value, list):
            return [{"name": v, "kind": "tool"} if isinstance(v, str) else v for v in value]
        return value

    def capability_names(self) -> set[str]:
        return {c.name for c in self.available_capabilities}
