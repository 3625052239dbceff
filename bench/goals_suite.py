"""What is a goal suite, and how is a run against one of its goals judged?

A suite is a folder holding ``suite.yaml`` (the format is written at the top of each suite's
file): a ``workspace`` folder relative to the file, and ``goals``, each with an ``id``, the
``goal`` text and ``checks`` of five kinds — ``answer_contains: [s, ...]``,
``answer_not_contains: [s, ...]``, ``answer_matches: REGEX``, ``file: PATH`` with an optional
``contains: [s, ...]``, and ``expect: failed_or_says`` with ``says: REGEX`` (the workspace cannot
satisfy the goal). Every goal also carries the implicit workspace rule: no file other than those
named by its ``file`` checks is created, changed or deleted — for an ``expect`` goal, no file at all.

Outcomes (``judge``), as the format defines them:

- **success** — the run ends ``done``, every check holds and the workspace rule too; or, for an
  ``expect`` goal, the run ends ``failed`` by its own report and touched no file.
- **failure** — the run ended otherwise than ``done`` (failed, raised, timed out), except the
  correct ``failed`` of an ``expect`` goal. A run that changed a file it may not change without
  claiming done is a failure too, never a success — also for an ``expect`` goal.
- **false success** — ``done`` while a check fails or a file it may not touch changed. For an
  ``expect`` goal ``done`` needs an answer that ``says`` matches and that passes the goal's other
  answer checks; an invented value is a false success.

What was weighed:

- **Strict reading.** Suites exist that this project never sees, so nothing here may depend on
  one suite's wording, ids or count — and a suite this code misreads would score silently wrong.
  An unknown key (top level, goal or check), an unknown check kind, a modifier under the wrong
  kind (``contains`` belongs to ``file``, ``says`` to ``expect``), a list given as a bare string
  (it would be read letter by letter), a regular expression that does not compile, a ``file``
  path that leaves the workspace, an ``expect`` goal with a ``file`` check, or a goal no answer
  can pass (a required string holding a forbidden one) is a ``SuiteError`` naming the goal, the
  key and what is allowed, raised before any goal runs. Duplicate YAML keys are an error too (the
  package's strict loader), not last-one-wins.
- **Only a ``failed`` the run reports counts for an ``expect`` goal.** A run that raised (the
  harness caught an exception) or ran past its time bound did not say the goal cannot be done:
  it is a failure, so a crash never scores as a correct refusal.
- **Case-insensitive text checks** (``casefold`` on both sides), as the format says; a file is
  read as UTF-8 with undecodable bytes replaced, so a binary file fails its check instead of
  crashing the judge.
- **The workspace rule compares content hashes of every file in the tree** (hidden ones too;
  symlinks by their target, never followed), before and after the run. A run that rewrites a file
  with the same bytes changed nothing; a run that creates an empty folder created no file.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

SUITE_FILE = "suite.yaml"
_TOP_KEYS = ("workspace", "goals")
_GOAL_KEYS = ("id", "goal", "checks")
CHECK_KINDS = ("answer_contains", "answer_not_contains", "answer_matches", "file", "expect")
# a key that qualifies one kind of check, and that kind
MODIFIERS = {"contains": "file", "says": "expect"}
EXPECT_VALUES = ("failed_or_says",)
CheckKind = Literal["answer_contains", "answer_not_contains", "answer_matches", "file", "expect"]


class SuiteError(ValueError):
    """A suite that does not follow the format; the message names the goal and the key."""


@dataclass(frozen=True)
class Check:
    """One check of a goal. ``kind`` is one of ``CHECK_KINDS``."""

    kind: CheckKind
    strings: tuple[str, ...] = ()  # answer_contains, answer_not_contains, or a file's contains
    pattern: str = ""  # answer_matches, or expect's says
    path: str = ""  # file, normalised relative POSIX path

    def describe(self) -> str:
        if self.kind == "answer_contains":
            return f"answer contains {list(self.strings)}"
        if self.kind == "answer_not_contains":
            return f"answer does not contain {list(self.strings)}"
        if self.kind == "answer_matches":
            return f"answer matches /{self.pattern}/i"
        if self.kind == "expect":
            return f"answer says /{self.pattern}/i (or the run ends failed)"
        return f"file {self.path}" + (f" contains {list(self.strings)}" if self.strings else " exists")


@dataclass(frozen=True)
class Goal:
    id: str
    text: str
    checks: tuple[Check, ...]

    @property
    def allowed_paths(self) -> frozenset[str]:
        """The files this goal may create or change: those named by its ``file`` checks."""
        return frozenset(c.path for c in self.checks if c.kind == "file")

    @property
    def expect(self) -> bool:
        """The workspace cannot satisfy this goal: a ``failed`` run is correct, ``done`` must say so."""
        return any(c.kind == "expect" for c in self.checks)


@dataclass(frozen=True)
class Suite:
    name: str
    root: Path
    workspace: Path
    goals: tuple[Goal, ...]

    def select(self, ids: list[str] | None) -> list[Goal]:
        """The goals named by ``ids`` in suite order (all of them for ``None``); an unknown id is an error."""
        if not ids:
            return list(self.goals)
        known = {g.id for g in self.goals}
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise SuiteError(
                f"--goals names {', '.join(map(repr, unknown))}, not in suite {self.name!r} "
                f"(its goals: {', '.join(g.id for g in self.goals)})"
            )
        wanted = set(ids)
        return [g for g in self.goals if g.id in wanted]


@dataclass
class CheckResult:
    check: str
    passed: bool
    detail: str = ""


@dataclass
class Violation:
    path: str
    change: Literal["created", "changed", "deleted"]


# --------------------------------------------------------------------------- reading a suite


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list) or not value:
        raise SuiteError(f"{where} must be a non-empty list of strings, e.g. [\"text\"], got {value!r}")
    if not all(isinstance(s, str) and s for s in value):
        raise SuiteError(f"{where} must hold only non-empty strings, got {value!r}")
    return tuple(value)


def _relative_path(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SuiteError(f"{where} must be a path relative to the workspace, got {value!r}")
    posix = PurePosixPath(value.replace("\\", "/"))
    parts = [p for p in posix.parts if p not in ("", ".")]
    if posix.is_absolute() or ".." in parts or not parts:
        raise SuiteError(f"{where} must stay inside the workspace (relative, no '..'), got {value!r}")
    return "/".join(parts)


def _pattern(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise SuiteError(f"{where} must be a regular expression string, got {value!r}")
    try:
        re.compile(value, re.IGNORECASE)
    except re.error as exc:
        raise SuiteError(f"{where}: {value!r} is not a valid regular expression: {exc}") from None
    return value


def _allowed_check_keys() -> str:
    return ", ".join(CHECK_KINDS) + " (with " + ", ".join(f"{m!r} after {k!r}" for m, k in MODIFIERS.items()) + ")"


def _check(item: Any, where: str) -> Check:
    if not isinstance(item, dict):
        raise SuiteError(f"{where} must be a mapping such as {{answer_contains: [...]}}, got {item!r}")
    unknown = [k for k in item if k not in CHECK_KINDS and k not in MODIFIERS]
    if unknown:
        raise SuiteError(f"{where}: unknown check key {unknown[0]!r}; a check is one of {_allowed_check_keys()}")
    kinds = [k for k in item if k in CHECK_KINDS]
    if len(kinds) != 1:
        raise SuiteError(f"{where} must name exactly one check kind of {', '.join(CHECK_KINDS)}, got {sorted(item)}")
    kind = kinds[0]
    for modifier, owner in MODIFIERS.items():
        if modifier in item and kind != owner:
            raise SuiteError(f"{where}: {modifier!r} belongs to a {owner!r} check, not to {kind!r}")
    if kind in ("answer_contains", "answer_not_contains"):
        return Check(kind, strings=_strings(item[kind], f"{where}.{kind}"))
    if kind == "answer_matches":
        return Check("answer_matches", pattern=_pattern(item[kind], f"{where}.answer_matches"))
    if kind == "expect":
        if item[kind] not in EXPECT_VALUES:
            raise SuiteError(f"{where}.expect must be one of {', '.join(EXPECT_VALUES)}, got {item[kind]!r}")
        if "says" not in item:
            raise SuiteError(f"{where}: 'expect' needs 'says: REGEX', what a done answer must say instead")
        return Check("expect", pattern=_pattern(item["says"], f"{where}.says"))
    contains = _strings(item["contains"], f"{where}.contains") if "contains" in item else ()
    return Check("file", strings=contains, path=_relative_path(item["file"], f"{where}.file"))


def _coherent(gid: str, checks: tuple[Check, ...]) -> None:
    """Refuse combinations the format forbids or that no run could pass."""
    where = f"goal {gid!r}"
    kinds = [c.kind for c in checks]
    if kinds.count("expect") > 1:
        raise SuiteError(f"{where}: more than one 'expect' check")
    if "expect" in kinds and "file" in kinds:
        raise SuiteError(f"{where}: a goal with 'expect' may have no 'file' check (it may create no file)")
    required = [s.casefold() for c in checks if c.kind == "answer_contains" for s in c.strings]
    for c in checks:
        if c.kind != "answer_not_contains":
            continue
        clash = [s for s in c.strings if any(s.casefold() in r for r in required)]
        if clash:
            raise SuiteError(f"{where}: answer_not_contains {clash} is part of a string answer_contains "
                             "requires; no answer can pass both")


def _goal(item: Any, index: int) -> Goal:
    where = f"goals[{index}]"
    if not isinstance(item, dict):
        raise SuiteError(f"{where} must be a mapping with keys {', '.join(_GOAL_KEYS)}, got {item!r}")
    gid = item.get("id")
    if isinstance(gid, int) and not isinstance(gid, bool):
        gid = str(gid)
    if not isinstance(gid, str) or not gid.strip():
        raise SuiteError(f"{where}.id must be a non-empty string, got {gid!r}")
    where = f"goal {gid!r}"
    unknown = [k for k in item if k not in _GOAL_KEYS]
    if unknown:
        raise SuiteError(f"{where}: unknown key {unknown[0]!r}; a goal has {', '.join(_GOAL_KEYS)}")
    text = item.get("goal")
    if not isinstance(text, str) or not text.strip():
        raise SuiteError(f"{where}: 'goal' must be the goal's text, got {text!r}")
    if "checks" not in item:
        raise SuiteError(f"{where}: missing key 'checks' (a list; [] leaves only the workspace rule)")
    checks = item["checks"]
    if not isinstance(checks, list):
        raise SuiteError(f"{where}: 'checks' must be a list, got {checks!r}")
    parsed = tuple(_check(c, f"{where}: checks[{i}]") for i, c in enumerate(checks))
    _coherent(gid, parsed)
    return Goal(gid, text.strip(), parsed)


def load_suite(folder: str | Path) -> Suite:
    """The suite in ``folder/suite.yaml``; ``SuiteError`` naming the goal and key if it is malformed."""
    from soothe_planner.config import parse_yaml
    from soothe_planner.errors import ConfigError

    root = Path(folder).expanduser().resolve()
    path = root / SUITE_FILE
    if not path.is_file():
        raise SuiteError(f"no {SUITE_FILE} in {str(folder)!r}: --suite must be a folder holding one")
    try:
        data = parse_yaml(path.read_text(encoding="utf-8"), str(path.name))
    except ConfigError as exc:
        raise SuiteError(str(exc)) from None
    if not isinstance(data, dict):
        raise SuiteError(f"{SUITE_FILE} must be a mapping with keys {', '.join(_TOP_KEYS)}")
    unknown = [k for k in data if k not in _TOP_KEYS]
    if unknown:
        raise SuiteError(f"{SUITE_FILE}: unknown top-level key {unknown[0]!r}; a suite has {', '.join(_TOP_KEYS)}")
    ws = data.get("workspace")
    if not isinstance(ws, str) or not ws.strip():
        raise SuiteError(f"{SUITE_FILE}: 'workspace' must name a folder relative to the file, got {ws!r}")
    workspace = (root / ws).resolve()
    if not workspace.is_dir():
        raise SuiteError(f"{SUITE_FILE}: workspace {ws!r} is not a folder next to the file")
    goals_data = data.get("goals")
    if not isinstance(goals_data, list) or not goals_data:
        raise SuiteError(f"{SUITE_FILE}: 'goals' must be a non-empty list")
    goals = tuple(_goal(item, i) for i, item in enumerate(goals_data))
    seen: set[str] = set()
    for g in goals:
        if g.id in seen:
            raise SuiteError(f"goal {g.id!r}: the id is used twice; ids must be unique")
        seen.add(g.id)
    return Suite(name=root.name, root=root, workspace=workspace, goals=goals)


# --------------------------------------------------------------------------- judging a run


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace")


def _answer_check(check: Check, answer: str) -> CheckResult:
    folded = answer.casefold()
    if check.kind == "answer_contains":
        missing = [s for s in check.strings if s.casefold() not in folded]
        return CheckResult(check.describe(), not missing, f"missing {missing}" if missing else "")
    if check.kind == "answer_not_contains":
        present = [s for s in check.strings if s.casefold() in folded]
        return CheckResult(check.describe(), not present, f"holds {present}" if present else "")
    found = re.search(check.pattern, answer, re.IGNORECASE)
    return CheckResult(check.describe(), found is not None, "" if found else "no match in the answer")


def answer_passes(goal: Goal, answer: str) -> bool:
    """Whether ``answer`` passes every answer check of ``goal`` (``expect``'s ``says`` included)."""
    return all(_answer_check(c, answer).passed for c in goal.checks if c.kind != "file")


def evaluate(goal: Goal, answer: str, workspace: Path) -> list[CheckResult]:
    """Every check of ``goal`` against the final ``answer`` and the workspace copy after the run.

    An ``expect`` check is recorded as whether the answer ``says`` it; ``judge`` decides what a
    ``failed`` run makes of it.
    """
    out: list[CheckResult] = []
    for check in goal.checks:
        if check.kind != "file":
            out.append(_answer_check(check, answer or ""))
        else:
            target = workspace / check.path
            if not target.is_file():
                out.append(CheckResult(check.describe(), False, "the file does not exist"))
                continue
            text = _read(target).casefold()
            missing = [s for s in check.strings if s.casefold() not in text]
            out.append(CheckResult(check.describe(), not missing, f"missing {missing}" if missing else ""))
    return out


def snapshot(root: Path) -> dict[str, str]:
    """Relative POSIX path → SHA-256 of every file under ``root`` (symlinks by target, not followed)."""
    out: dict[str, str] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        # a symlink to a folder shows up in dirnames; record it as a link, do not descend
        for name in [d for d in dirnames if (base / d).is_symlink()]:
            filenames.append(name)
        dirnames[:] = [d for d in dirnames if not (base / d).is_symlink()]
        for name in filenames:
            path = base / name
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                out[rel] = "symlink:" + os.readlink(path)
            else:
                out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def violations(before: dict[str, str], after: dict[str, str], allowed: frozenset[str]) -> list[Violation]:
    """Files created, changed or deleted between two snapshots, other than the ``allowed`` ones."""
    out: list[Violation] = []
    for path in sorted(set(before) | set(after)):
        if path in allowed:
            continue
        if path not in before:
            out.append(Violation(path, "created"))
        elif path not in after:
            out.append(Violation(path, "deleted"))
        elif before[path] != after[path]:
            out.append(Violation(path, "changed"))
    return out


@dataclass
class Judgement:
    """How one run of one goal scores."""

    outcome: Literal["success", "failure", "false_success"]
    reason: str
    checks: list[CheckResult] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)


def judge(status: str, error: str | None, checks: list[CheckResult], broken: list[Violation], *,
          expect: bool = False, raised: bool = False) -> Judgement:
    """The outcome of one run; see the module docstring. ``raised``: the harness caught an exception."""
    failed = [c for c in checks if not c.passed]
    where = [f"workspace: {v.path} {v.change}" for v in broken]
    if status != "done":
        if expect and status == "failed" and not raised and not broken:
            why = error or "no reason given"
            return Judgement("success", f"ended failed, as an expect goal may ({why})", checks, broken)
        return Judgement("failure", "; ".join([error or f"status {status}", *where]), checks, broken)
    if failed or broken:
        why = [f"{c.check}: {c.detail}" for c in failed]
        return Judgement("false_success", "; ".join(why + where), checks, broken)
    return Judgement("success", "", checks, broken)
