"""How does a model declare a goal's deliverable, and what of its declaration is kept?

One small call (the ``deliverable`` phase) with a four-field schema (``wire.DeclareDeliverable``:
kind, files, every_match, count_of), asked once per goal before its first plan when the caller
gave no deliverable and some offered tool writes a file or counts (``needs_declaration``: without
one, no check could use the answer, and the call is not paid for). The prompt is the goal alone,
in whatever language it is written; the model's grammar-held answer is read here:

- A declared file must appear in the goal's text: a model may not invent a file to write; and it
  must be one name, not a phrase of the goal (a caller may still name a file with spaces), and
  not a file the workspace already has (a caller may still name one to change). Where
  the goal writes it with a folder the model left off ("notes/x.md" declared as "x.md"), the goal's
  spelling is taken; trailing sentence punctuation is dropped.
- A ``file`` declaration left with no file the goal names becomes an ``answer`` (with a warning):
  the run may then write nothing, which errs on the side a user can see.
- ``count_of`` is kept for a count only; ``every_match`` for an answer or a file. A count declared
  with nothing to count is taken as an answer that is a number: the 1.5B declared "Which port does
  config/server.toml configure?" a count, and the count contract then asked for a counting tool's
  number where the port was to be read.
"""

from __future__ import annotations

from collections.abc import Callable

from soothe_planner.deliverable import Deliverable
from soothe_planner.models import Capability
from soothe_planner.wire import DeclareDeliverable

__all__ = ["mentions", "needs_declaration", "to_deliverable"]



def _path_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_-./\\"


def needs_declaration(capabilities: list[Capability]) -> bool:
    """Whether a deliverable could be checked at all: some tool writes files or counts."""
    return any(c.kind == "tool" and (c.writes_path_arg or c.counts) for c in capabilities)


def _as_written(goal: str, name: str) -> str | None:
    """``name`` as ``goal`` writes it (extended over the path around it), or None when absent.

    The name is looked up in the goal as a whole token (no letter, digit, ``_`` or ``-`` on either
    side; a ``/`` before it extends it over its folders); no pattern is matched on the goal."""
    key = name.strip().strip("`'\"").replace("\\", "/").removeprefix("./")
    if not key:
        return None
    found = [t for t in _occurrences(goal, key) if t]
    if not found:
        return None
    # the goal's own spelling where it writes the name exactly, else the one shaped like a file name
    # (an extension, a folder or a capital: "VERSION" over "version" in "the latest version ... VERSION")
    exact = [t for t in found if t == key or t.endswith("/" + key)]
    named = [t for t in found if "." in t or "/" in t or any(c.isupper() for c in t)]
    return ([t for t in exact if t in named] or named or exact or found)[0]


def _occurrences(goal: str, key: str) -> list[str]:
    """Each whole-token occurrence of ``key`` in ``goal`` (case aside), as the goal spells it."""
    out = []
    folded, target = goal.casefold(), key.casefold()
    start = folded.find(target)
    while start >= 0:
        end = start + len(target)
        before = goal[start - 1] if start else " "
        after = goal[end] if end < len(goal) else " "
        if (before == "/" or not _path_char(before)) and (after == "." or not (after.isalnum() or after in "_-")):
            left = start
            while left > 0 and _path_char(goal[left - 1]):
                left -= 1
            token = goal[left:end]
            while token.startswith(("./", ".\\")):
                token = token[2:]
            out.append(token.rstrip("."))
        start = folded.find(target, start + 1)
    return out


def to_deliverable(
    wire: DeclareDeliverable, goal: str, existing: Callable[[str], bool] | None = None
) -> tuple[Deliverable, list[str]]:
    """``(the deliverable, warnings)`` from a model's declaration (see the module docstring).

    ``existing(path)``: whether the workspace already has that file. A model may not declare one as
    a file to write: asked "which file is longer, src/notes.py or README.md?", the 1.5B declared both
    as files to write, which would have let a plan write over them. A caller may still name one."""
    warnings: list[str] = []
    files: list[str] = []
    for name in wire.files:
        if any(ch.isspace() for ch in str(name).strip()):
            # a phrase of the goal ("Zenodo DOI of our dataset") is no file name, however the goal writes it
            warnings.append(f"deliverable: the model declared {name!r} as a file, which is a phrase, not a name; dropped")
            continue
        written = _as_written(goal, str(name))
        if written is None:
            warnings.append(f"deliverable: the model declared the file {name!r}, which the goal does not name; dropped")
            continue
        try:
            path = Deliverable(kind="file", files=[written]).files[0]
        except ValueError as exc:
            warnings.append(f"deliverable: {exc}; dropped")
            continue
        if existing is not None and existing(path):
            warnings.append(f"deliverable: the model declared {path!r}, a file the workspace has, as one to write; dropped")
            continue
        files.append(path)
    kind = wire.kind
    answer_is = wire.answer_is
    if kind == "count" and not str(wire.count_of).strip():
        # the count contract holds the run to a counting tool's number: with nothing named to count,
        # a setting's value ("which port ...") would have to come from a count of matching lines
        warnings.append("deliverable: a count was declared with nothing to count; taken as an answer (a number)")
        kind, answer_is = "answer", "number"
    if kind == "file" and not files:
        warnings.append("deliverable: a file was declared but the goal names none of the files given; taken as an answer")
        kind = "answer"
    if kind != "file":
        files = []
    return Deliverable(
        kind=kind,
        files=files,
        count_of=str(wire.count_of).strip() if kind == "count" else "",
        parts=[str(p) for p in wire.parts],
        answer_is=answer_is if kind == "answer" else "text",
        # a number carries no lines: "every match" over one is a count asked as a list of lines
        every_match=bool(wire.every_match) and kind != "count" and not (kind == "answer" and answer_is == "number"),
        declared_by="model",
    ), warnings


def mentions(goal: str, path: str) -> bool:
    """Whether ``goal`` writes the workspace path ``path`` out whole (``_as_written``'s token rule)."""
    return _as_written(goal, path) == path
