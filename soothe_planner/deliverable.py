"""What must a run hand back before it may say ``done``?

A goal's *deliverable* is data on the run, not words to guess at: an ``answer``, one or more
``file`` paths the run must write, or a ``count``. Every check before ``done`` and every plan rule
that concerns what the goal asks for reads it (``planner/contract/``), never the goal's text:
a rule that reads English verbs ("write", "save", "export ... to") misfires on the next phrasing
("How do I save output to JSON?" read as a file named ``JSON``) and knows nothing of any other
language.

Where it comes from, in order:

1. **The caller**, who often knows it: ``goal_input(goal, deliverable=...)``, the CLI's
   ``--deliver file:REPORT.md``, a server run's input, or ``PlanManager.deliverable``.
2. **The model**, declared once per goal in a small constrained call (the ``deliverable`` phase,
   ``planner/contract/declare.py``) in whatever language the goal is written. A path it declares
   must appear in the goal's text: a model may not invent a file to write.

It is validated here, whoever gave it: a file path is relative, inside the workspace, with no
``..``; a file deliverable names at least one path and the others none. Protected files (the
run's checkpoint, config and seal key) are refused by the workspace when the write happens, as for
every other write. It is stored on the goal's ``PlanManager`` (so it survives re-plans and a
resumed checkpoint), shown in the plan rendering, the ``deliverable`` event, the graph state and
the traces' metadata.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["Deliverable", "DeliverableKind", "parse_deliverable"]

DeliverableKind = Literal["answer", "file", "count"]
MAX_FILES = 8
MAX_PATH_CHARS = 255
MAX_HOLDS = 16
MAX_PARTS = 6


def _clean_path(path: str) -> str:
    """``path`` as the checks compare it: stripped, forward slashes, no leading ``./``; a
    ``ValueError`` naming it and the rule when it is not a relative path inside the workspace."""
    if not isinstance(path, str):
        raise ValueError(f"a deliverable file must be a text path, got {path!r}")
    p = path.strip().replace("\\", "/")
    while p.startswith("./"):
        p = p[2:]
    if not p or p == ".":
        raise ValueError(f"deliverable file {path!r} is empty: name a file inside the workspace")
    if "\x00" in p or len(p) > MAX_PATH_CHARS:
        raise ValueError(f"deliverable file {path!r} is not a usable path (NUL or over {MAX_PATH_CHARS} characters)")
    if p.startswith("/") or (len(p) > 1 and p[1] == ":"):
        raise ValueError(f"deliverable file {path!r} is absolute: give it relative to the workspace")
    parts = [part for part in p.split("/") if part not in ("", ".")]
    if any(part == ".." for part in parts):
        raise ValueError(f"deliverable file {path!r} leaves the workspace ('..'): name a file inside it")
    if p.endswith("/"):
        raise ValueError(f"deliverable file {path!r} is a folder: name the file to write")
    return "/".join(parts)


class Deliverable(BaseModel):
    """What the run must hand back (see the module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: DeliverableKind = Field(default="answer", description="answer | file | count.")
    files: list[str] = Field(
        default_factory=list, max_length=MAX_FILES,
        description="Workspace-relative paths the run must write (kind 'file' only).",
    )
    holds: list[str] = Field(
        default_factory=list, max_length=MAX_HOLDS,
        description="Text every delivered file (or, for an answer, the answer) must contain; given by a caller.",
    )
    count_of: str = Field(default="", max_length=300, description="What to count (kind 'count'), in the goal's words.")
    answer_is: Literal["name", "number", "path", "yes_no", "text"] = Field(
        default="text",
        description="What an answer is: a name (a person, team or channel), a number, a path, yes_no, or text; "
        "a small model's answer of another kind is not done (a path answering 'who').",
    )
    parts: list[str] = Field(
        default_factory=list, max_length=MAX_PARTS,
        description="Each thing the goal asks the answer or file to give, in a few words of the goal's language "
        "(shown to the step that writes the answer and to the assessment).",
    )
    every_match: bool = Field(
        default=False,
        description="The delivery must carry every line the run's searches found (a list of matching lines).",
    )
    declared_by: Literal["caller", "model"] = Field(default="caller", description="Who gave the deliverable.")

    @field_validator("files")
    @classmethod
    def _paths(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(_clean_path(p) for p in value))

    @field_validator("holds", "parts")
    @classmethod
    def _texts(cls, value: list[str]) -> list[str]:
        return list(dict.fromkeys(h for h in (str(x).strip() for x in value) if h))

    @model_validator(mode="after")
    def _coherent(self) -> Deliverable:
        if self.kind == "file" and not self.files:
            raise ValueError("a 'file' deliverable names at least one file in 'files'")
        if self.kind != "file" and self.files:
            raise ValueError(f"a {self.kind!r} deliverable names no files, got {self.files}: use kind 'file'")
        if self.kind != "count" and self.count_of:
            raise ValueError(f"'count_of' belongs to a 'count' deliverable, not {self.kind!r}")
        return self

    def describe(self) -> str:
        """One line for prompts, renderings and logs."""
        if self.kind == "file":
            what = "the file" + ("s " if len(self.files) > 1 else " ") + ", ".join(self.files)
        elif self.kind == "count":
            what = "a count" + (f" of {self.count_of}" if self.count_of else "")
        else:
            what = "an answer"
        extra = []
        if self.parts:
            extra.append("giving " + "; ".join(self.parts))
        if self.every_match:
            extra.append("holding every line the searches find")
        if self.holds:
            extra.append("holding " + ", ".join(repr(h) for h in self.holds))
        return what + (" (" + "; ".join(extra) + ")" if extra else "")


def parse_deliverable(text: str) -> Deliverable:
    """The command line's spelling: ``answer``, ``count``, ``count:WHAT``, ``file:PATH[,PATH...]``;
    a ``ValueError`` naming the value and the forms otherwise."""
    kind, _, rest = text.strip().partition(":")
    kind = kind.strip().lower()
    if kind == "answer" and not rest:
        return Deliverable(kind="answer")
    if kind == "count":
        return Deliverable(kind="count", count_of=rest.strip())
    if kind == "file" and rest.strip():
        return Deliverable(kind="file", files=[p for p in rest.split(",") if p.strip()])
    raise ValueError(f"deliverable {text!r} is not one of: answer, count, count:WHAT, file:PATH[,PATH...]")
