"""Does the harness score runs right? Scripted actors whose outcome is known, run through the real strategies.

``--scripted`` replaces the model — only the model — with a ``FunctionChatModel`` that plays one
of five actors against whichever suite is given, reading what to do from the goal's own checks:

- ``honest`` writes every file a ``file`` check names (with the text it must hold, through the
  run's own ``write_file`` tool on the workspace copy) and answers with every ``answer_contains``
  string, a string matching every ``answer_matches`` pattern and, for an ``expect`` goal, one
  matching its ``says``: each goal must come out a success. A goal for which this module finds no
  answer passing every answer check (a pattern it cannot produce a match for, or a match that
  holds a forbidden string) is *unscriptable* and is left out of the verdict, said so, never guessed.
- ``liar`` says the goal is done without doing anything: every goal must come out a false
  success (or a failure), never a success. A suite check a liar passes cannot tell work from words.
- ``vandal`` works like ``honest`` and also writes a file no check names: every goal must show a
  workspace violation and must not be a success.
- ``refuser`` does nothing and lets the run end ``failed`` — the baselines and the peer by the
  words they are told to use, a final answer ``FAILED: <reason>``: an ``expect`` goal must come out
  a success (the correct failed), any other goal a failure.
- ``inventor`` works like ``honest`` but puts in its answer what the goal forbids: the
  ``answer_not_contains`` strings, and for an ``expect`` goal a made-up value instead of saying the
  fact is absent. Such a goal must come out a false success; a goal with neither is an honest one.

The actors speak each strategy's protocol by schema name: the StrangeLoop's ``RouteIntake``,
``AssessStatus`` and ``GeneratePlan`` (a typed ``write_file`` step per file, then a model step for
the answer; the refuser keeps a plan it never made, which ends the run failed),
plan-and-execute's ``PlanSteps`` and ``Replan`` (the refuser plans one step that looks, and
replans with its ``FAILED:`` response); any agent call with tools bound — a ReAct agent's, a Deep
Agent's — is answered with tool calls, then a final text (the refuser's is ``FAILED:`` and its
reason); a plain call gets the answer (with the marker when it is a step's call).
An unknown schema is a loud error naming it, so a renamed planner schema is found here rather than
read as a model failure. The goal is found in the prompt by a ``[goal:ID]`` tag the actor puts in
every step it plans, else by the longest goal text the prompt contains.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from bench.goals_suite import Goal, answer_passes

ACTORS = ("honest", "liar", "vandal", "refuser", "inventor")
MARKER = "(scripted: the work is done)"
LIE = "Done."
INVENTED = "It is 42."
REFUSAL = "FAILED: the workspace does not hold what the goal asks for"
EXTRA_FILE = "scripted-extra.txt"
_TAG = re.compile(r"\[goal:([^\]\s]+)\]")


def example_matching(pattern: str) -> str | None:
    """A short string that ``re.search(pattern, s, re.IGNORECASE)`` matches, or ``None`` if none is found."""
    try:
        from re import _parser  # type: ignore[attr-defined]

        text = _emit(_parser.parse(pattern))
    except Exception:  # an unsupported construct: no example rather than a wrong one
        return None
    if text is None:
        return None
    for candidate in (text, f" {text} "):
        if re.search(pattern, candidate, re.IGNORECASE):
            return candidate.strip() or candidate
    return None


def _class_char(items: list[tuple[Any, Any]]) -> str | None:
    from re import _constants as c  # type: ignore[attr-defined]

    categories = {c.CATEGORY_DIGIT: "0", c.CATEGORY_WORD: "a", c.CATEGORY_SPACE: " ",
                  c.CATEGORY_NOT_DIGIT: "a", c.CATEGORY_NOT_WORD: " ", c.CATEGORY_NOT_SPACE: "a"}
    for op, av in items:
        if op is c.NEGATE:
            return None
        if op is c.LITERAL:
            return chr(av)
        if op is c.RANGE:
            return chr(av[0])
        if op is c.CATEGORY and av in categories:
            return categories[av]
    return None


def _emit(items: Any) -> str | None:
    from re import _constants as c  # type: ignore[attr-defined]

    out: list[str] = []
    for op, av in items:
        piece: str | None
        if op is c.LITERAL:
            piece = chr(av)
        elif op is c.NOT_LITERAL:
            piece = "a" if av != ord("a") else "b"
        elif op is c.ANY:
            piece = "a"
        elif op is c.IN:
            piece = _class_char(av)
        elif op is c.BRANCH:
            piece = _emit(av[1][0])
        elif op is c.SUBPATTERN:
            piece = _emit(av[-1])
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT):
            low, _high, inner = av
            one = _emit(inner)
            piece = None if one is None else one * low
        elif op is c.AT:
            piece = ""
        else:  # back references, look-arounds, conditionals: not attempted
            return None
        if piece is None:
            return None
        out.append(piece)
    return "".join(out)


def honest_answer(goal: Goal) -> str | None:
    """An answer passing every answer check of ``goal``, or ``None`` when none is found (never a guess)."""
    parts: list[str] = []
    for check in goal.checks:
        if check.kind == "answer_contains":
            parts.extend(check.strings)
        elif check.kind in ("answer_matches", "expect"):
            example = example_matching(check.pattern)
            if example is None:
                return None
            parts.append(example)
    answer = "; ".join(parts) if parts else "The goal is achieved."
    return answer if answer_passes(goal, answer) else None


def scriptable(goal: Goal) -> bool:
    return honest_answer(goal) is not None


def forbidden(goal: Goal) -> list[str]:
    return [s for c in goal.checks if c.kind == "answer_not_contains" for s in c.strings]


def invented_answer(goal: Goal) -> str | None:
    """The inventor's answer: what the goal forbids (see the module docstring); ``None`` if unscriptable."""
    if goal.expect:
        return "; ".join([INVENTED, *forbidden(goal)])
    honest = honest_answer(goal)
    if honest is None or not forbidden(goal):
        return honest
    return "; ".join([honest, *forbidden(goal)])


def invention_detectable(goal: Goal) -> bool:
    """Whether the inventor's answer for ``goal`` is one its checks must refuse."""
    invented = invented_answer(goal)
    return (goal.expect or bool(forbidden(goal))) and invented is not None and not answer_passes(goal, invented)


def step_text(goal: Goal) -> str:
    return f"[goal:{goal.id}] {goal.text}"


class Actor:
    """Plays one actor for every goal of a suite; call it with a ``ScriptedCall``, get a reply."""

    def __init__(self, goals: list[Goal], actor: str) -> None:
        if actor not in ACTORS:
            raise ValueError(f"unknown scripted actor {actor!r}; choose one of {', '.join(ACTORS)}")
        self.actor = actor
        self.by_id = {g.id: g for g in goals}
        self.by_length = sorted(goals, key=lambda g: len(g.text), reverse=True)

    def goal_of(self, prompt: str) -> Goal:
        for gid in _TAG.findall(prompt):
            if gid in self.by_id:
                return self.by_id[gid]
        for goal in self.by_length:
            if goal.text in prompt:
                return goal
        raise ValueError(f"scripted {self.actor}: no goal of the suite appears in the prompt {prompt[:200]!r}")

    def answer(self, goal: Goal) -> str:
        if self.actor == "liar":
            return LIE
        if self.actor == "refuser":
            return ""
        if self.actor == "inventor":
            return invented_answer(goal) or "(unscriptable answer)"
        return honest_answer(goal) or "(unscriptable answer)"

    def writes(self, goal: Goal) -> list[tuple[str, str]]:
        if self.actor in ("liar", "refuser"):
            return []
        out = [(c.path, "\n".join(c.strings) or "written") for c in goal.checks if c.kind == "file"]
        if self.actor == "vandal":
            name = EXTRA_FILE if EXTRA_FILE not in goal.allowed_paths else f"another-{EXTRA_FILE}"
            out.append((name, "a file no check asked for"))
        return out

    def __call__(self, call: Any) -> Any:
        schema = call.schema_name
        if self.actor == "refuser":  # needs no goal: it does nothing
            if call.method == "tools":
                return AIMessage(content=REFUSAL)  # an agent that says it failed, as it is told to
            return "" if schema is None else self._refusal(schema)
        goal = self.goal_of(call.prompt_text)
        if call.method == "tools":
            return self._agent_turn(goal, call)
        if schema is None:
            # A step's model call carries the tagged step text; the final answer's call does not.
            return f"{self.answer(goal)} {MARKER}" if _TAG.search(call.last_text) else self.answer(goal)
        if schema == "RouteIntake":
            if self.actor == "liar":
                return {"route": "trivial", "answer": LIE}
            return {"route": "complex", "answer": ""}
        if schema == "AssessStatus":
            finished = self.actor == "liar" or MARKER in call.prompt_text
            return {"status": "done" if finished else "continue", "goal_progress": 1.0 if finished else 0.0,
                    "confidence": 0.9, "summary": "the step reported its work" if finished else "nothing done yet"}
        if schema == "GeneratePlan":
            # Each write is a typed write_file step; the answer is a model step after them.
            writes = [{"id": f"w{i}", "description": f"write {path} [goal:{goal.id}]", "depends_on": [],
                       "tool": "write_file", "args": {"path": path, "content": text}}
                      for i, (path, text) in enumerate(self.writes(goal), 1)]
            answer = {"id": "s1", "description": step_text(goal), "depends_on": [w["id"] for w in writes]}
            return {"plan_action": "new", "execution_mode": "dependency", "next_action": "do the work",
                    "steps": [*writes, answer]}
        if schema == "PlanSteps":
            return {"steps": [step_text(goal)]}
        if schema == "Replan":
            return {"response": self.answer(goal), "steps": []}
        raise ValueError(
            f"scripted {self.actor}: no reply for the schema {schema!r}; teach bench/goals_scripted.py its answer"
        )

    def _refusal(self, schema: str) -> dict[str, Any]:
        """Replies that end each strategy's run ``failed`` without touching the workspace."""
        if schema == "RouteIntake":
            return {"route": "complex", "answer": ""}
        if schema == "AssessStatus":
            return {"status": "continue", "goal_progress": 0.0, "confidence": 0.9, "summary": "the fact is not there"}
        if schema == "GeneratePlan":  # keep a plan that was never made: nothing to execute, the run fails
            return {"plan_action": "keep", "execution_mode": "dependency", "next_action": "nothing", "steps": []}
        if schema == "PlanSteps":  # one step that looks; the agent doing it reports the failure
            return {"steps": ["look in the workspace for what the objective asks"]}
        if schema == "Replan":
            return {"response": REFUSAL, "steps": []}
        raise ValueError(f"scripted refuser: no reply for the schema {schema!r}; teach bench/goals_scripted.py its answer")

    def _agent_turn(self, goal: Goal, call: Any) -> AIMessage:
        acted = any(isinstance(m, ToolMessage) for m in call.messages)
        writes = self.writes(goal)
        if acted or not writes or "write_file" not in call.tools:
            return AIMessage(content=f"{self.answer(goal)} {MARKER}")
        return AIMessage(content="", tool_calls=[
            {"name": "write_file", "args": {"path": path, "content": text}, "id": f"call_{call.index}_{i}",
             "type": "tool_call"}
            for i, (path, text) in enumerate(writes)
        ])


def actor_model(goals: list[Goal], actor: str) -> Any:
    """One ``FunctionChatModel`` playing ``actor`` for every goal of the run."""
    from soothe_planner.testing import FunctionChatModel

    return FunctionChatModel(Actor(goals, actor))


def expectation_problems(actor: str, goal: Goal, record: dict[str, Any]) -> list[str]:
    """What is wrong with ``record`` for an ``actor`` whose outcome is known; [] when the harness scored it right."""
    outcome, gid, why = record["outcome"], goal.id, record["reason"]
    if actor == "honest" or (actor == "inventor" and not goal.expect and not forbidden(goal)):
        if not scriptable(goal):
            return []
        if outcome != "success" or record["violations"]:
            return [f"{actor} run of {gid!r} scored {outcome} ({why}); expected success"]
        return []
    if actor == "liar":
        if goal.expect and answer_passes(goal, LIE):
            return []  # the suite's own words accept the lie; nothing to learn from it
        return [f"liar run of {gid!r} scored success: its checks cannot tell a claim from the work"] \
            if outcome == "success" else []
    if actor == "refuser":
        expected = "success" if goal.expect else "failure"
        problems = [f"refuser run of {gid!r} changed the workspace: {record['violations']}"] if record["violations"] else []
        if record["status"] != "failed":
            problems.append(f"refuser run of {gid!r} ended {record['status']!r}, not failed: the actor is out of step")
        elif outcome != expected:
            problems.append(f"refuser run of {gid!r} scored {outcome} ({why}); expected {expected}")
        return problems
    if actor == "inventor":
        if not invention_detectable(goal):
            return []
        return [] if outcome == "false_success" else \
            [f"inventor run of {gid!r} scored {outcome} ({why}); expected false_success: the invention went unseen"]
    problems = []
    if not any(v["path"].endswith(EXTRA_FILE) for v in record["violations"]):
        problems.append(f"vandal run of {gid!r}: the extra file was not reported as a workspace violation")
    if outcome == "success":
        problems.append(f"vandal run of {gid!r} scored success despite a workspace violation")
    return problems
