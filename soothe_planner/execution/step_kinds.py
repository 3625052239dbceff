"""What kinds of step there are, which one a step is, and what each kind of call may produce.

**Which runner** (``step_kind``), first match wins:

=================  ==========================================================================
kind               runs as
=================  ==========================================================================
``subagent``       a step naming a subagent (or hinted ``remote``: a remote graph) — the chat
``remote``         input ``{"messages": [task]}``; the last message is the output
``agent``          a step hinted ``agent`` (its arguments cannot be known when planning), or
                   listing several ``tools``: a ReAct agent over exactly those tools — or, for
                   a step that lists none, over the executor's read-only tools only
``tool``           a *typed tool step* (``tool`` set): the tool called with ``args``, references
                   in them replaced by the earlier outputs as data for the tool; no LLM call
``tool_input``     one listed tool that takes one string: called with the task text; no LLM call
``tool_args``      one listed tool with structured arguments and none given: one model call,
                   that tool bound and forced, fills them in; then the tool runs
``model``          anything else (no tool, no subagent): one model call over the description and
                   its dependencies' outputs as fenced data; no tools bound; text out
=================  ==========================================================================

A ReAct agent is never the default for a step that names one tool: a small model fills one
schema far better than it drives a loop, and a loop costs a call per turn.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.tools import BaseTool
from pydantic import BaseModel, ConfigDict, Field

from soothe_planner.execution.runners import single_string_field
from soothe_planner.models import PlanStep

__all__ = ["MISSING_MARK", "MODEL_STEP_SOURCES", "MODEL_STEP_SYSTEM", "TOOL_ARGS_SYSTEM", "StepCalls", "StepKind",
           "StepOutput", "step_kind"]

StepKind = Literal["subagent", "remote", "agent", "tool", "tool_input", "tool_args", "model"]

MISSING_MARK = "MISSING:"
MODEL_STEP_SOURCES = 8
"""A model step reads its dependencies' outputs and then their own dependencies', nearest first, up
to this many: a plan "read the file → search it → answer" must not lose the file to a search that
found nothing (small models chain their steps so)."""
MODEL_STEP_SYSTEM = (
    "You carry out one step of a larger plan. Answer the step using only the data given with it. "
    "You have no tools: do not call or write tool calls. Do not invent facts, file names or file "
    f'contents. If the data does not hold the answer, reply with one line: "{MISSING_MARK} <what the data '
    'lacks>". Otherwise reply with the answer only.'
)
TOOL_ARGS_SYSTEM = (
    "You carry out one step of a larger plan by calling the one tool you are given. Fill in its "
    "arguments from the step and the data given with it; do not invent paths or values."
)


class StepCalls(BaseModel):
    """The output cap of each kind of model call a step makes, in tokens (``None``: the model's own).

    A cap only lowers what the model is configured with. The defaults suit a small local model: a
    model step may compose a file's content; an argument call or one agent turn is short. The
    YAML ``execution.step_calls:`` section loads into this class.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    model_step: int | None = Field(
        default=1024, ge=16, description="A model step's answer (it may be a file's content), tokens."
    )
    tool_args: int | None = Field(default=512, ge=16, description="The call that fills in one tool's arguments, tokens.")
    agent: int | None = Field(default=512, ge=16, description="Each turn of a step's ReAct agent, tokens.")


@dataclass(frozen=True)
class StepOutput:
    """What a step produced: its text, a structured outcome, how it ran, and the tools a model's
    output made it call (``from_text`` when those calls were written as text and recovered here)."""

    text: str
    outcome: dict[str, Any]
    kind: StepKind
    called: tuple[str, ...] = ()
    from_text: bool = False


def step_kind(
    step: PlanStep,
    tools: Mapping[str, BaseTool] | None = None,
    string_field: Callable[[BaseTool], str | None] = single_string_field,
) -> StepKind:
    """Which runner a step gets (the table in the module docstring); ``string_field`` may be cached."""
    if step.subagent or step.execution_hint == "remote":
        return "remote" if step.execution_hint == "remote" else "subagent"
    if step.execution_hint == "agent":
        return "agent"
    if step.tool:
        return "tool"
    if len(step.tools) > 1:
        return "agent"
    if step.tools:
        tool = (tools or {}).get(step.tools[0])
        return "tool_input" if tool is not None and string_field(tool) is not None else "tool_args"
    return "model"
