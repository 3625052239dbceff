"""What did the run's steps verifiably do, read as data?

The deliverable's checks read a step's recorded result and its tool's declared metadata, never a
tool's English output: a tool that writes names the argument holding the path it writes
(``Capability.writes_path_arg``), a tool that counts says so (``Capability.counts``) and hands
back its count as a field (``StepResult.outcome["count"]``), a search hands back the lines it found
(``outcome["lines"]``). A user's own tools take part by declaring the same (``tools/schema.py``).
The files themselves are read back from the workspace, inside it only, so a check sees what is on
disk, not what a step said it wrote.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from soothe_planner.dag import BadReferenceError, arg_strings, resolve_args
from soothe_planner.models import Capability, PlanStep, StepAction, StepResult
from soothe_planner.tools import Workspace

__all__ = ["LINE_LABEL", "WHOLE_NUMBER", "Write", "as_evidence", "counted", "delivered_text", "found_lines", "is_model_step",
           "path_key", "read_back", "write_target", "writes_of"]

Step = PlanStep | StepAction
_READ_BACK_BYTES = 1_000_000
LINE_LABEL = re.compile(r"^(?P<path>[^\s:][^:\n]*):(?P<line>\d+): ", re.MULTILINE)
"""The ``path:N: `` label a search puts before each line it found."""
WHOLE_NUMBER = re.compile(r"(?<![\w.])\d+(?![\w]|[.,]\d)")
"""A whole number in a text: not a part of a decimal, a version or a name."""


def path_key(path: object) -> str:
    """A path as the checks compare it: stripped, forward slashes, no leading ``./``; "" if not text."""
    if not isinstance(path, str):
        return ""
    p = path.strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    return p


def is_model_step(step: Step) -> bool:
    """A step answered by one model call (no tool, no agent of its own)."""
    return not (step.tool or step.tools or step.subagent)


def write_target(step: Step, capabilities: Mapping[str, Capability] | None) -> str:
    """The workspace file ``step`` writes ("" when its tool declares no write): its declared path argument."""
    cap = capabilities.get(step.tool) if capabilities and step.tool else None
    if cap is None or not cap.writes_path_arg:
        return ""
    return path_key(step.args.get(cap.writes_path_arg))


class Write(NamedTuple):
    step_id: str
    path: str
    result: StepResult


def writes_of(
    nodes: Sequence[Step], results: Sequence[StepResult], capabilities: Mapping[str, Capability] | None
) -> list[Write]:
    """The writes that succeeded, in the order their results were recorded (the last one of a file stands)."""
    by_id = {n.id: n for n in nodes}
    out = []
    for r in results:
        step = by_id.get(r.step_id)
        if step is None or not r.success:
            continue
        target = write_target(step, capabilities)
        if target:
            out.append(Write(step.id, target, r))
    return out


def counted(result: StepResult, capability: Capability | None) -> int | None:
    """The number a counting tool counted (its result's ``count``), None when the tool does not
    declare that it counts, or its count stopped at a cap (``complete`` false: "at least N")."""
    if capability is None or not capability.counts or not result.success:
        return None
    value = result.outcome.get("count")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return None if result.outcome.get("complete") is False else value


def found_lines(result: StepResult) -> list[str] | None:
    """The lines a search found (its result's ``lines``), None when it reported none as data or
    found no exact match (``exact`` false: candidates, not matches)."""
    lines = result.outcome.get("lines")
    if not result.success or not isinstance(lines, list) or result.outcome.get("exact") is False:
        return None
    return [str(x) for x in lines if isinstance(x, str | int | float)]


_MIN_ECHO = 2  # a quoted argument shorter than this says nothing a check could take for a fact


def as_evidence(step: Step | None, result: StepResult) -> StepResult:
    """``result`` as the checks read it: the notes of a tool that hands back the lines it found or a
    count as data (its output's lines without a ``path:N:`` label: "no matches for 'harbor 1.3.0'",
    "(no line contains 'X' exactly; ...)", "0 lines in a.md contain 'X'") keep their words but not
    the step's own arguments they quote back. What a tool was asked is not what it found: a value
    the model put in its search, echoed by the search that did not find it, would otherwise count
    as found in a tool output ("What changed in 1.3.0?" was answered with 1.2.1's changes, and 1.3.0
    stood only in the search's note). The lines themselves, found or nearest, are file text and stay
    as they are."""
    if step is None or not result.success or not ({"lines", "count"} & result.outcome.keys()):
        return result
    asked = [v for v in (*(step.args or {}).values(), result.outcome.get("pattern"))
             if isinstance(v, str) and len(v.strip()) >= _MIN_ECHO]
    quoted = sorted({q for v in asked for q in (repr(v), f"'{v}'", f'"{v}"')}, key=len, reverse=True)
    if not quoted:
        return result
    lines = result.output.split("\n")
    for i, line in enumerate(lines):
        if not LINE_LABEL.match(line):
            for q in quoted:
                line = line.replace(q, "''")
            lines[i] = line
    output = "\n".join(lines)
    return result if output == result.output else result.model_copy(update={"output": output})


def delivered_text(step: Step, completed: Mapping[str, StepResult]) -> str | None:
    """The text ``step`` delivered: a model step's output, or a tool step's string arguments with
    their references resolved as the executor resolved them (``None`` when one cannot be)."""
    if is_model_step(step):
        result = completed.get(step.id)
        return result.output if result is not None else None
    try:
        args, _ = resolve_args(step.args or {}, completed)
    except BadReferenceError:
        return None
    return "\n".join(text for _where, text in arg_strings(args))


def read_back(workspace: str | None, path: str) -> str | None:
    """The text of the workspace file ``path`` as it is now (its first megabyte), None when it is
    not a regular file inside ``workspace`` (or there is no workspace to look in)."""
    if not workspace:
        return None
    try:
        fd, resolved = Workspace(workspace).open_file(path)
    except Exception:
        return None
    try:
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(_READ_BACK_BYTES)
    finally:
        os.close(resolved.dir_fd)
    return data.decode("utf-8", errors="replace")

