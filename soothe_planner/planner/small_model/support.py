"""Does the line an answer's fact was read from have anything to do with the request?

``grounding`` asks whether an answer's facts came from a tool output; a small model often takes a
fact that a tool did return from a line about something else. Measured on the embedded 1.5B, the
false successes left were of that kind: the first name of a contacts table given as "our contact at
the county about the Zone B permit" (the county, the zone and the permit appear nowhere in that
table); the PI named as an external reviewer the notes never mention; "10" given as a pool size,
read from ``strconv.FormatInt(b.ID, 10)``.

So, with the small-model rules, each fact of an answer (a name, number, path, address, quoted
command, as ``grounding.answer_facts`` finds them) is looked up in the tool outputs the run read,
line by line, and a line *supports* it when the line, the header of the table it sits in (a run of
``|`` rows, or a comma-separated file's first line) or the path of the file it came from shares a
word with the request, other than the fact's own words and words that most of the workspace's files
hold (in any language those are the words that say nothing: "the", "der", "los", a project's
name). An answer none of whose facts any line supports is not done: the request's subject was never
reached. A fact found in no output is left to ``grounding``; one answer fact supported is enough.

Words are compared whole, case aside, split at anything that is not a letter or digit (so
``max_connections`` holds "connections"); no word of any language is listed. It errs towards
refusing a right answer whose line shares only an inflected form of the request's words ("owner"
for "owns") when neither its table nor its file's name says more; measured, such answers had a
supporting line elsewhere (the protocol's file is named after it). A request in one language over
files written in another shares no word with their lines unless names, paths or numbers carry
over: there the words the run searched for stand in for the request's (``_asked``), so a line
must be about what the model looked for in the files' language; a run that searched for nothing
is still refused, a failure the user sees, rather than pass an answer it cannot place.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from functools import lru_cache

from soothe_planner.deliverable import Deliverable
from soothe_planner.models import Capability, PlanStep, StepAction, StepResult
from soothe_planner.planner.contract import (
    LINE_LABEL,
    WHOLE_NUMBER,
    as_evidence,
    counts_found,
    is_model_step,
    path_key,
)
from soothe_planner.planner.small_model.grounding import answer_facts, words

__all__ = ["common_words", "other_sibling", "stated_count", "unsupported_facts", "unsupported_parts", "workspace_words"]

Step = PlanStep | StepAction
_MIN_FILES = 6  # fewer files than this tell nothing about which words are common
_MAX_FILES = 400
_MAX_BYTES = 100_000  # of one file
_MAX_TOTAL_BYTES = 4_000_000
_SHORT = 4  # without a workspace to learn common words from, shorter words are taken as common
_MAX_SIBLINGS = 200  # a folder with more files than this is not read for the files beside one


def common_words(workspace: str | None) -> frozenset[str] | None:
    """The words more than half of the workspace's text files hold (None when it has too few files
    to tell, or there is none). Hidden folders are skipped; it reads at most ``_MAX_FILES`` files and
    ``_MAX_TOTAL_BYTES`` in all, in a stable order, and remembers the answer per workspace for the
    process: which words are common does not change with the few files a run writes."""
    if not workspace or not os.path.isdir(workspace):
        return None
    return _words_held(os.path.realpath(workspace))[0]


def workspace_words(workspace: str | None) -> frozenset[str] | None:
    """Every word the workspace's text files hold, read as ``common_words`` reads them (None when
    there is no workspace)."""
    if not workspace or not os.path.isdir(workspace):
        return None
    return _words_held(os.path.realpath(workspace))[1]


@lru_cache(maxsize=16)
def _words_held(workspace: str) -> tuple[frozenset[str] | None, frozenset[str]]:
    """``(the common words, or None when too few files tell; every word held)``."""
    held: Counter[str] = Counter()
    files = 0
    budget = _MAX_TOTAL_BYTES
    for root, dirs, names in os.walk(workspace):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            if name.startswith(".") or files >= _MAX_FILES or budget <= 0:
                continue
            try:
                with open(os.path.join(root, name), "rb") as fh:
                    data = fh.read(min(_MAX_BYTES, budget))
            except OSError:
                continue
            if b"\x00" in data:
                continue
            files += 1
            budget -= len(data)
            held.update(words(data.decode("utf-8", errors="replace")))
    common = frozenset(w for w, n in held.items() if n * 2 > files) if files >= _MIN_FILES else None
    return common, frozenset(held)


def _context_lines(step: Step, result: StepResult) -> Iterator[tuple[str, str, set[str]]]:
    """Each line of a tool's output as ``(the line as output, its text, the words around it that say
    what it is about)``: the path it came from (a search's ``path:N:`` label, else the step's
    ``path`` argument: a listing's folder, a read file's name) and, inside a table, the table's
    header. A file read whole is also given as one line, its path, about every word it holds: a
    path answered ("which file computes ...?") is about what its file says."""
    own_path = path_key((step.args or {}).get("path"))
    header: set[str] = set()
    first = ""
    commas = -1
    in_pipes = False
    labelled = False
    held: set[str] = set()
    for i, raw in enumerate(result.output.splitlines()):
        m = LINE_LABEL.match(raw)
        labelled = labelled or m is not None
        text = raw[m.end():] if m else raw
        where = words(m.group("path")) if m else words(own_path)
        if i == 0:
            first = text
            commas = text.count(",")
        stripped = text.strip()
        if stripped.startswith("|"):
            if not in_pipes:
                header = words(stripped)
            in_pipes = True
        else:
            in_pipes = False
            header = set()
        table = header if in_pipes else (words(first) if commas > 0 and text.count(",") == commas and not m else set())
        held |= words(text)
        yield raw, text, where | table
    if own_path and not labelled:
        yield own_path, "", held


def _asked(goal: str, deliverable: Deliverable, common: Collection[str] | None, given: set[str],
           vocabulary: Collection[str] | None = None, searched: Collection[str] = ()) -> set[str]:
    """The request's words that can say what a line is about: the goal's words, the paths of the
    files to write taken out (the file a run is to write is not its subject; "release-checklist.md"
    is found in no line about releases), without words most of the workspace's files hold unless
    the run's tools were given them (a search for "TODO" in a workspace where most files hold one:
    the subject, not a word of grammar).

    A request most of whose words no file of the workspace holds (``vocabulary``: every word its
    files hold) is written in another language than its files, and no line can share its words;
    there the words the run searched for (``searched``) are taken too: the model's own rendering of
    the request in the files' language, the one bridge between them ("Wochenendzuschlag" searched
    as "weekend"). A line then has to be about what was searched for, not merely be read."""
    text = goal
    for name in deliverable.files:
        text = re.sub(re.escape(name), " ", text, flags=re.IGNORECASE)
    if common is None:
        asked = {w for w in words(text)
                 if _informative(w) and (len(w) >= _SHORT or any(ch.isdigit() for ch in w) or w in given)}
    else:
        asked = {w for w in words(text) if _informative(w) and (w not in common or w in given)}
    lettered = [w for w in asked if not any(ch.isdigit() for ch in w)]  # numbers and names like P4 carry over
    if vocabulary is not None and lettered and sum(w in vocabulary for w in lettered) * 2 < len(lettered):
        asked |= {w for w in searched if _informative(w) and (common is None or w not in common)}
    return asked


def _searched(results: Sequence[StepResult]) -> set[str]:
    """The words of what the run's searches looked for (a search's ``pattern``, as it hands it back)."""
    return {w for r in results if r.success and isinstance(r.outcome.get("pattern"), str)
            for w in words(r.outcome["pattern"])}


def _informative(word: str) -> bool:
    """Whether a word can say what a line is about: one letter never does, nor two letters alone
    (in most languages written with letters those are words of grammar: "to", "de", "im"); two
    with a digit are a name ("P4", "T3")."""
    return len(word) > 2 or (len(word) == 2 and any(ch.isdigit() for ch in word))


def _tool_lines(
    nodes: Sequence[Step], results: Sequence[StepResult], capabilities: Mapping[str, Capability] | None,
) -> tuple[list[tuple[str, str, set[str]]], set[str]]:
    """``(every line of the run's tool outputs, as _context_lines gives it; the words the tools were given)``:
    writes left out (they echo what was delivered), model steps too (their text is the planner's own)."""
    lines: list[tuple[str, str, set[str]]] = []
    given: set[str] = set()
    for step, r in _tool_results(nodes, results, capabilities):
        given |= words(" ".join(str(v) for v in (step.args or {}).values() if isinstance(v, str)))
        lines.extend(_context_lines(step, r))
    return lines, given


def _tool_results(
    nodes: Sequence[Step], results: Sequence[StepResult], capabilities: Mapping[str, Capability] | None,
) -> Iterator[tuple[Step, StepResult]]:
    """The run's tool steps that succeeded, with their results as evidence (``contract.as_evidence``):
    writes left out (they echo what was delivered), model steps too (their text is the planner's own)."""
    by_id = {n.id: n for n in nodes}
    for r in results:
        step = by_id.get(r.step_id)
        if step is None or not r.success or is_model_step(step) or not step.tool:
            continue
        cap = (capabilities or {}).get(step.tool)
        if cap is not None and cap.writes_path_arg:
            continue
        yield step, as_evidence(step, r)


def stated_count(
    goal: str, deliverable: Deliverable | None, answer: str, nodes: Sequence[Step], results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None, common: Collection[str] | None,
    vocabulary: Collection[str] | None = None,
) -> Deliverable | None:
    """The deliverable a count's answer is held to when the count was *read*, not counted: an answer
    that is a number, with the count's parts (None when it does not apply). ``vocabulary``: the
    workspace's ``workspace_words`` (a request in another language than the files: ``_asked``).

    It applies when no tool counted anything and every number the answer states (other than the
    goal's own) stands on a tool-output line whose own text shares a word with the request (not its
    file's path, not its table's header: the line must say what the number is). Such a number is
    "a total written down", which the declaration's rules call no count, and which a small model
    still declares one: asked "which port does config/server.toml configure?", the 1.5B declared a
    count of "config/server.toml", read "port = 8443", answered 8443, and the count contract asked
    for a counting tool on every later iteration. Held to an answer's checks instead, the reading
    still has to pass every one of them (each part answered, each fact from a line about the
    request, the blind second reading). The risk it takes: a number that merely sits on a line about
    the request ("Lena: order 3 trays" for "how many lines mention Lena?", no count made) is then
    refused only if the second reading copies a different number for the part; a reading that
    copies no number says nothing. None such was seen in the recorded or measured runs."""
    if deliverable is None or deliverable.kind != "count" or counts_found(nodes, results, capabilities):
        return None
    own = set(WHOLE_NUMBER.findall(goal))
    numbers = [n for n in dict.fromkeys(WHOLE_NUMBER.findall(answer)) if n not in own]
    if not numbers:
        return None
    lines, given = _tool_lines(nodes, results, capabilities)
    asked = _asked(goal, deliverable, common, given, vocabulary, _searched(results))
    for n in numbers:
        if not any(n in WHOLE_NUMBER.findall(text) and (words(text) - {n}) & asked for _, text, _ in lines):
            return None
    parts = list(deliverable.parts) or ([deliverable.count_of] if deliverable.count_of else [])
    return Deliverable(kind="answer", answer_is="number", parts=parts, holds=list(deliverable.holds),
                       declared_by=deliverable.declared_by)


def unsupported_facts(
    goal: str, deliverable: Deliverable | None, delivered: str, nodes: Sequence[Step], results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None, common: Collection[str] | None,
    vocabulary: Collection[str] | None = None,
) -> tuple[list[str], list[str]]:
    """``(the delivered text's facts, lines they were found on)`` when the deliverable is an answer
    or a file, ``delivered`` (the answer, or the files as they are on disk) states facts that the
    run's tool outputs hold, and no line holding one shares a word with the request (see the module
    docstring); ``([], [])`` otherwise. ``common``: the workspace's ``common_words``; ``vocabulary``:
    its ``workspace_words`` (a request in another language than the files: ``_asked``)."""
    if deliverable is None or deliverable.kind == "count" or not delivered.strip():
        return [], []
    goal_folded = goal.casefold()
    facts = [f for f in answer_facts(delivered) if f.casefold() not in goal_folded]
    if not facts:
        return [], []
    lines, given = _tool_lines(nodes, results, capabilities)
    asked = _asked(goal, deliverable, common, given, vocabulary, _searched(results))
    seen: list[str] = []
    for fact in facts:
        pattern = re.compile(rf"(?<![\w.]){re.escape(fact)}(?![\w])", re.IGNORECASE)
        own = words(fact)
        for raw, text, context in lines:
            if not pattern.search(raw):
                continue
            if ((words(text) - own) | context) & asked:
                return [], []
            seen.append(raw.strip())
    if not seen:
        return [], []
    return facts, list(dict.fromkeys(seen))


def _sources(
    fact: str, nodes: Sequence[Step], results: Sequence[StepResult], capabilities: Mapping[str, Capability] | None,
) -> set[str]:
    """The workspace files whose lines, as the run's tool outputs gave them, hold ``fact``: a search
    line's ``path:N:`` label, else the path the step read. An output of no one file (a listing, a
    count) gives "" (a source that is no file)."""
    pattern = re.compile(rf"(?<![\w.]){re.escape(fact)}(?![\w])", re.IGNORECASE)
    out: set[str] = set()
    for step, r in _tool_results(nodes, results, capabilities):
        own = path_key((step.args or {}).get("path"))
        for raw in r.output.splitlines():
            m = LINE_LABEL.match(raw)
            text = raw[m.end():] if m else raw
            if pattern.search(text):
                out.add(path_key(m.group("path")) if m else own)
    return out


def _stem(name: str) -> str:
    return os.path.basename(name).split(".", 1)[0].casefold()


def other_sibling(
    goal: str, deliverable: Deliverable | None, delivered: str, nodes: Sequence[Step], results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None, workspace: str | None, common: Collection[str] | None,
) -> tuple[list[str], str, str] | None:
    """``(the delivered facts, the file they came from, the file beside it the goal names)`` when every
    fact of an answer (or file) that the tool outputs hold came only from one file, and the goal names
    not that file but another file of its folder, by the name before its extension; None otherwise.

    Measured on the embedded 1.5B, asked for the production database password, it read
    ``config/staging.toml`` and answered the staging password (``config/production.toml`` says the
    password is not kept in the files); every other check passed it, since the line it came from is
    about a password. Files side by side in one folder, named for what sets them apart (production
    and staging, de and en, 2023 and 2024), are the places a request picks one of: a fact from the
    sibling it did not pick answers another question. Names are compared as whole words of the goal,
    case aside, in any script; a name of fewer than four letters, or one most of the workspace's
    files hold, says too little to pick a file and is not taken."""
    if deliverable is None or deliverable.kind == "count" or workspace is None or not delivered.strip():
        return None
    asked = words(goal)
    goal_folded = goal.casefold()
    facts = [f for f in answer_facts(delivered) if f.casefold() not in goal_folded]
    found = {f: _sources(f, nodes, results, capabilities) for f in facts}
    found = {f: srcs for f, srcs in found.items() if srcs}
    files = set().union(*found.values()) if found else set()
    if len(files) != 1:
        return None
    (source,) = files
    # a goal that writes the file's name or path holds its stem as a word: that file was asked for
    if not source or source in (".", "") or _stem(source) in asked:
        return None
    folder = os.path.join(workspace, os.path.dirname(source))
    try:
        names = sorted(os.listdir(folder))[:_MAX_SIBLINGS] if os.path.isdir(folder) else []
    except OSError:
        return None
    for name in names:
        stem = _stem(name)
        if name == os.path.basename(source) or len(stem) < 4 or stem not in asked or (common and stem in common):
            continue
        if words(stem) != {stem} or not os.path.isfile(os.path.join(folder, name)):
            continue
        picked = path_key(os.path.join(os.path.dirname(source), name))
        return list(found), source, picked
    return None


def unsupported_parts(
    goal: str, deliverable: Deliverable | None, delivered: str, nodes: Sequence[Step], results: Sequence[StepResult],
    capabilities: Mapping[str, Capability] | None, common: Collection[str] | None,
) -> list[str]:
    """The deliverable's parts (when it names two or more) that no fact of the delivered text stands
    for: no fact sits on a tool-output line that, with its table's header or its file's path, shares
    a word with that part; [] otherwise.

    ``unsupported_facts`` is content with one supported fact for the whole answer. Measured on the
    embedded 1.5B, asked where the backups are uploaded *and how many days they are kept*, it wrote
    the bucket's variable and "kept for 7 days", the 7 read from ``max_backups: 7`` of the logging
    config: a line about backups, not about days or keeping, and the answer ended ``done``. Each part
    is judged alone here, by the words of the part as the declaration wrote it (in the request's
    language). A part none of whose words any output line holds is about the delivery's form ("as a
    markdown table"), not about the evidence, and is not judged; so is every part of a request in
    one language over files written in another (no line shares its words). Replayed over the last
    answer of every recorded goal run of the visible suites (598), it refused none of the 29
    successes of goals of two or more parts, and 6 of their 12 false successes."""
    if deliverable is None or deliverable.kind == "count" or len(deliverable.parts) < 2 or not delivered.strip():
        return []
    goal_folded = goal.casefold()
    facts = [f for f in answer_facts(delivered) if f.casefold() not in goal_folded]
    if not facts:
        return []
    lines, given = _tool_lines(nodes, results, capabilities)
    patterns = [(re.compile(rf"(?<![\w.]){re.escape(f)}(?![\w])", re.IGNORECASE), words(f)) for f in facts]
    held = [(raw, (words(text) - own) | context) for raw, text, context in lines
            for pattern, own in patterns if pattern.search(raw)]
    if not held:
        return []  # no fact from the outputs at all: grounding's to say, not this check's
    missing = []
    for part in deliverable.parts:
        asked = _asked(part, Deliverable(kind="answer"), common, given)
        if not asked or not any((words(text) | context) & asked for _, text, context in lines):
            continue  # a part about form, or of words that say nothing
        if not any(about & asked for _, about in held):
            missing.append(part)
    return missing
