"""What every strategy of the goal suites gets for one goal, and what it hands back.

``GoalEnv`` is one goal's machinery, resolved as the CLI resolves it (``goal_env``): the goal, the
config with ``execution.workspace`` pointing at the goal's copy, the one shared chat model, the
run's ``ResolvedRun`` (planner, executor with the tools built for the copy, the limiter) and a
usage counter. ``RunOutcome`` is what a strategy reports. The helpers below read an agent's
messages the same way for every baseline, so none is judged by a reader of its own.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool

DEFAULT_TURNS = 25
AUDIT_CHARS = 500  # of each step's output kept in the results file


@dataclass
class RunOutcome:
    """What a strategy reports: ``status`` is ``done`` or ``failed``; ``answer`` is its final answer.

    ``state`` is what the checks before ``done`` read at the end of the run (ours only: the plan
    manager and the decision in flight, as plain data); it never goes into the results file, only
    to ``--keep-state`` (``bench/guard_replay.py`` replays the checks over it)."""

    status: str
    answer: str = ""
    error: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] | None = None


class UsageCounter(BaseCallbackHandler):
    """Counts the model calls of one run and their token usage, from each reply's ``usage_metadata``.

    A call refused by the budget never reached the model and is not counted; a call that failed
    (a transport error) is counted in ``llm_calls`` and in ``llm_errors``. ``calls_without_usage``
    says how many replies carried no usage, so a token total of 0 cannot pass for a measurement.
    """

    run_inline = True  # counted on the caller's thread, so totals are complete when the run returns

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.llm_calls = 0
        self.llm_errors = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.calls_without_usage = 0

    def on_llm_end(self, response: Any, **kwargs: Any) -> None:
        usage = None
        for generations in response.generations:
            for generation in generations:
                usage = getattr(getattr(generation, "message", None), "usage_metadata", None) or usage
        with self._lock:
            self.llm_calls += 1
            if usage:
                self.prompt_tokens += int(usage.get("input_tokens") or 0)
                self.completion_tokens += int(usage.get("output_tokens") or 0)
            else:
                self.calls_without_usage += 1

    def on_llm_error(self, error: BaseException, **kwargs: Any) -> None:
        from soothe_planner.errors import LLMBudgetExceeded

        if isinstance(error, LLMBudgetExceeded):
            return
        with self._lock:
            self.llm_calls += 1
            self.llm_errors += 1

    def as_dict(self) -> dict[str, int]:
        return {
            "llm_calls": self.llm_calls,
            "llm_errors": self.llm_errors,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "calls_without_usage": self.calls_without_usage,
        }


@dataclass
class GoalEnv:
    """Everything one goal's run gets: the goal, its config (workspace = the copy), model, tools."""

    goal: str
    config: Any  # SootheConfig with execution.workspace pointing at the copy
    model: BaseChatModel  # the one shared instance
    resolved: Any  # ResolvedRun: planner, executor (tools bound to the copy), controller
    counter: UsageCounter

    @property
    def tools(self) -> list[BaseTool]:
        """The tools ours' executor holds (``execution.tools`` built for the copy): every strategy gets these."""
        return list(self.resolved.executor.tools.values())

    @property
    def limited_model(self) -> BaseChatModel:
        """The shared model, its calls taking this run's LLM slots and budget."""
        limited: BaseChatModel = self.resolved.controller.wrap_model(self.model)
        return limited

    def run_config(self, **extra: Any) -> Any:
        """A run config (``RunnableConfig``) with the usage counter at the root, plus ``extra``."""
        return {"callbacks": [self.counter], **extra}


def goal_env(goal: str, config: Any, model: BaseChatModel) -> GoalEnv:
    """The run's machinery for ``config``, sharing ``model``, resolved as the CLI resolves it."""
    from soothe_planner.config import resolve_run

    return GoalEnv(goal=goal, config=config, model=model, resolved=resolve_run(config, model), counter=UsageCounter())


def turns(config: Any) -> int:
    """The model turns an agent may take: the call budget, or ``DEFAULT_TURNS`` when it is unlimited."""
    return int(config.concurrency.max_total_llm_calls) or DEFAULT_TURNS


def tool_calls(messages: list[Any]) -> list[str]:
    """The tool calls an agent made, as ``name(args)`` lines cut to ``AUDIT_CHARS``, for the results file."""
    out = []
    for m in messages:
        for call in getattr(m, "tool_calls", None) or []:
            out.append(f"{call['name']}({json.dumps(call['args'], ensure_ascii=False)})"[:AUDIT_CHARS])
    return out


def final_text(messages: list[Any]) -> str:
    """The agent's final answer: its last message's text when that is an AI message calling no tool."""
    last = messages[-1] if messages else None
    if not isinstance(last, AIMessage) or last.tool_calls:
        return ""
    return last.text.strip()
