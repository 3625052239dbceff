"""Two tiny goal suites and a scripted model that plays real runs of them, for ``bench local --record``/``--replay``.

The scripted model answers at the HTTP level, as a server would, so the recording holds the
requests the real loop sent. Per goal it gives ``wrong`` bad step replies first (the step says it
does not know), then good ones, and it assesses what it sees: ``replan`` after a bad reply,
``done`` after a good one. So a goal with ``wrong=0`` is done in one iteration, ``wrong=1`` is
re-planned once, and a goal with more bad replies than the loop has iterations ends failed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SUITES: dict[str, dict[str, Any]] = {
    "alpha": {
        "files": {"notes.txt": "port 8443\nowner Priya Raman\n", "docs/a.md": "# A\n"},
        "goals": [
            {"id": "port-file", "goal": "Write the port from notes.txt into PORT.md",
             "checks": [{"file": "PORT.md", "contains": ["8443"]}]},
            {"id": "owner", "goal": "Who is the owner in notes.txt?", "checks": [{"answer_contains": ["Priya Raman"]}]},
            {"id": "owner-again", "goal": "Which owner does notes.txt name?",
             "checks": [{"answer_contains": ["Priya Raman"]}]},
        ],
    },
    "beta": {
        "files": {"team.txt": "lead Dariusz Mensah\nbackup Ana Ruiz\n"},
        "goals": [
            {"id": "lead", "goal": "Who is the lead in team.txt?", "checks": [{"answer_contains": ["Dariusz Mensah"]}]},
            {"id": "backup", "goal": "Who is the backup in team.txt?", "checks": [{"answer_contains": ["Ana Ruiz"]}]},
        ],
    },
}
FACTS = {"port-file": ("notes.txt", "8443"), "owner": ("notes.txt", "Priya Raman"),
         "owner-again": ("notes.txt", "Priya Raman"), "lead": ("team.txt", "Dariusz Mensah"),
         "backup": ("team.txt", "Ana Ruiz")}
FILES = {"port-file": "PORT.md"}


def write_suites(root: Path) -> Path:
    """The two suites under ``root`` (each ``suite.yaml`` and ``workspace/``); returns ``root``."""
    for name, suite in SUITES.items():
        folder = root / name
        for rel, text in suite["files"].items():
            path = folder / "workspace" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        (folder / "suite.yaml").write_text(json.dumps({"workspace": "workspace", "goals": suite["goals"]}))
    return root


def _goal_of(messages: list[dict[str, Any]]) -> str | None:
    text = "\n".join(str(m.get("content") or "") for m in messages)
    for suite in SUITES.values():
        for g in suite["goals"]:
            if g["goal"] in text:
                return str(g["id"])
    return None


class Scripted:
    """The model: ``wrong[goal]`` bad step replies first, then good ones; assessments follow what it saw."""

    def __init__(self, wrong: dict[str, int], always: str | None = None) -> None:
        self.wrong = dict(wrong)
        self.always = always  # an assessment status given whatever the evidence (None: judged from it)
        self.goal: str | None = None
        self.steps: dict[str, int] = {}
        self.last_good: dict[str, bool] = {}
        self.plans: dict[str, int] = {}

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        from soothe_planner.execution.steps import MODEL_STEP_SYSTEM

        messages = body.get("messages") or []
        self.goal = _goal_of(messages) or self.goal
        goal = self.goal or "?"
        source, fact = FACTS[goal]
        tools = body.get("tools") or []
        fmt = body.get("response_format") or {}
        name = tools[0]["function"]["name"] if tools else (fmt.get("json_schema") or {}).get("name", "")
        system = next((m.get("content") for m in messages if m.get("role") == "system"), "") or ""
        if name:
            return _structured(body, name, self._object(name, goal, fact, messages))
        if system == MODEL_STEP_SYSTEM:
            n = self.steps[goal] = self.steps.get(goal, 0) + 1
            good = n > self.wrong.get(goal, 0)
            self.last_good[goal] = good
            return _text(body, f"The answer is {fact}." if good else "I do not know.")
        if system.startswith("You write a plan as Python"):
            n = self.plans[goal] = self.plans.get(goal, 0) + 1  # another task each time: a plan never repeats itself
            plan = f's1 = read_file(path="{source}")\ns2 = answer(s1, task="what the goal asks, try {n}")\n'
            if goal in FILES:
                plan += f's3 = write_file(path="{FILES[goal]}", content=s2)\n'
            return _text(body, plan)
        return _text(body, f"The answer is {fact}.")

    def _object(self, name: str, goal: str, fact: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
        if name == "DeclareDeliverable":
            if goal in FILES:
                return {"kind": "file", "files": [FILES[goal]], "answer_is": "text", "parts": [], "every_match": False,
                        "count_of": ""}
            return {"kind": "answer", "files": [], "answer_is": "name", "parts": [], "every_match": False, "count_of": ""}
        if name == "AssessStatus":
            status = self.always or ("done" if self.last_good.get(goal) else "replan")
            return {"status": status, "goal_progress": 1.0 if status == "done" else 0.5, "confidence": 0.9,
                    "summary": "judged from the outputs"}
        if name == "CrossCheck":
            return {"values": [fact]}
        if name == "RouteIntake":
            return {"route": "complex", "answer": ""}
        raise AssertionError(f"the scripted model does not know the schema {name!r}")


def _reply(body: dict[str, Any], message: dict[str, Any]) -> dict[str, Any]:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


def _text(body: dict[str, Any], text: str) -> dict[str, Any]:
    return _reply(body, {"role": "assistant", "content": text})


def _structured(body: dict[str, Any], name: str, value: dict[str, Any]) -> dict[str, Any]:
    if body.get("tools"):
        return _reply(body, {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(value)}}]})
    return _text(body, json.dumps(value))
