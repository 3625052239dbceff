"""When every plan a small model writes is refused, can the planner write the one step that mends it?

For a file that must carry every line a search found, the check knows which search's output holds
the lines a write left out (``grounding.Dropped``), and the re-plan prompt shows the model that
write. A 1.5B model was seen to write the refused plan again on every re-ask instead, and the run
failed with the lines in hand. The planner then plans the write itself: the search's output
verbatim, to the file the earlier write wrote; the assessment still judges the result. Only with
the small-model rules (the caller's switch), never after a transport failure (the model was not
heard: not a refusal, and the run should say so), and only when the step passes every rule a
model's plan must pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from soothe_planner.deliverable import Deliverable
from soothe_planner.errors import PlanGenerationError
from soothe_planner.models import AgentDecision, Capability, PlanStep, StepAction, StepResult
from soothe_planner.planner.generation import Generated
from soothe_planner.planner.small_model.grounding import dropped_lines

__all__ = ["prescribed_write"]

logger = logging.getLogger("soothe_planner.planner")


def prescribed_write(
    deliverable: Deliverable | None,
    nodes: Sequence[PlanStep | StepAction],
    results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None,
    validate: Callable[[Generated], list[str]],
    exc: PlanGenerationError,
) -> Generated | None:
    """The write the delivery check prescribes, as a one-step plan, or None (see the module docstring)."""
    if any(a.error_type == "transport" for a in exc.attempts):
        return None
    dropped = dropped_lines(deliverable, nodes, results, capabilities)
    if dropped is None:
        return None
    step = dropped.remedy_step({n.id for n in nodes})
    gen = Generated("new", AgentDecision(steps=[step]), next_action=step.description, warnings=[
        f"{exc.phase}: every plan the model wrote was refused ({len(exc.attempts)} attempts); the planner "
        f"wrote the search's output to {dropped.path} itself ({step.id}), as the delivery check prescribes: "
        f"{dropped.why()}"])
    if validate(gen):
        return None
    logger.warning("%s: every plan refused; planned the prescribed write %s", exc.phase, step.description)
    return gen
