"""How is one step run, and when has it really done its work?

**Which runner** is ``step_kinds.step_kind``'s table; this module runs each kind.

**Done means done** (``_settle``, on every output a model produced — model steps, the argument
call, agents, subagents and remote graphs; never on a tool's output, which is data: a file may
well hold JSON that looks like a call):

- An output that is a tool call written as text (``parsing.read_text_tool_calls``: JSON
  ``{"name", "arguments"}`` with arguments as an object or a JSON string, ``<tool_call>`` tags, a
  fenced call, several calls) is executed when every call names a tool the step may use — its
  ``tools``, the tool it was to fill in, or the default agent's read-only tools; a model step may
  use none — that the allow-list permits, with arguments that fit the tool's schema. The tools'
  output becomes the step's output. Otherwise the step fails with ``unexecuted_tool_call``,
  naming the call and the reason. ``recover_text_tool_calls=False`` keeps the failure and drops
  the execution, so a benchmark can tell this recovery (ours alone) from the model adapter's
  lifting (``local/embedded.py``, which helps every strategy on the model).
- An empty or whitespace-only output fails the step (``empty_output``).
- A model step answering ``MISSING: ...`` (its briefing asks for that when the data does not hold
  the answer) fails as ``missing_data``: the sentence is not the answer, and must not be written.
- The argument call that answers in prose with no call fails the step (``no_tool_call``).
- With a ``final_reply_check`` (the small-model rules give ``small_model.echo.echo_reask``, with the
  re-ask sampled at ``reask_temperature``), the reply of a
  model step whose text is the plan's answer or a write's content is checked, and a reply the check
  flags (only the request's own words) gets one re-ask, shown that reply and the check's note;
  the second reply stands, and is judged like any other.

Other failure kinds decided here: ``policy_denied`` (a tool the executor lacks, or outside the
plan's allow-list), ``tool_error`` (the tool raised, returned an error status, or its arguments
do not fit its schema), ``agent_error``/``subagent_error``/``remote_error``, ``model_error``.

**Bounded calls.** Each call kind gets its own output cap (``StepCalls``): the model is copied
with ``max_tokens`` lowered (``runners.cap_output``), and every call carries ``soothe_phase``
metadata (``step-model``, ``step-args``, ``step-agent``) so the controller counts them by kind.
The model step's system prompt is short: answer from the data, call no tool, invent nothing.

**Async only.** A step is run in one form: a sync ``graph.invoke`` reaches it through the
package's sync bridge (``concurrency.run_sync``, one background event loop), so there is no
sync twin of this module to keep in step with it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable
from langchain_core.runnables.config import ensure_config, merge_configs
from langchain_core.tools import BaseTool

from soothe_planner.errors import LLMBudgetExceeded
from soothe_planner.execution.references import fence_for, render_task, resolve_args
from soothe_planner.execution.runners import (
    NoRunnerError,
    StepFailure,
    args_problem,
    call_tool,
    cap_output,
    output_text,
    run_agent,
    run_runnable,
    single_string_field,
)
from soothe_planner.execution.step_kinds import (
    MISSING_MARK,
    MODEL_STEP_SOURCES,
    MODEL_STEP_SYSTEM,
    TOOL_ARGS_SYSTEM,
    StepCalls,
    StepKind,
    StepOutput,
    step_kind,
)
from soothe_planner.models import PlanStep, StepResult
from soothe_planner.parsing import TextToolCall, TextToolCalls, read_text_tool_calls
from soothe_planner.planner import sampled

if TYPE_CHECKING:
    from soothe_planner.concurrency import ConcurrencyController
    from soothe_planner.dag import PlanManager

__all__ = ["MODEL_STEP_SYSTEM", "TOOL_ARGS_SYSTEM", "ReplyCheck", "StepCalls", "StepKind", "StepOutput", "StepRunner",
           "step_kind"]

logger = logging.getLogger(__name__)

ReplyCheck = Callable[[str, str], str | None]
"""``(goal, reply) -> re-ask note or None``: a check of the reply of a model step whose text is the
plan's answer (or what a write writes); a note gets the step one re-ask with it (``final_reply_check``)."""

def _phase(config: Mapping[str, Any], phase: str) -> dict[str, Any]:
    return {**config, "metadata": {**(config.get("metadata") or {}), "soothe_phase": phase}}


class StepRunner:
    """Runs one step with the executor's tools, delegates and model (see the module docstring)."""

    def __init__(
        self,
        *,
        tools: Mapping[str, BaseTool],
        subagents: Mapping[str, Runnable[Any, Any]],
        remotes: Mapping[str, Runnable[Any, Any]],
        model: BaseChatModel | None,
        is_read_only: Callable[[BaseTool], bool],
        calls: StepCalls,
        recover_text_tool_calls: bool = True,
        controller: ConcurrencyController | None = None,
        final_reply_check: ReplyCheck | None = None,
        reask_temperature: float | None = None,
    ) -> None:
        self.controller = controller
        self.final_reply_check = final_reply_check
        self.reask_temperature = reask_temperature
        self.tools = tools
        self.subagents = subagents
        self.remotes = remotes
        self.is_read_only = is_read_only
        self.recover_text_tool_calls = recover_text_tool_calls
        self._models: dict[str, BaseChatModel] = (
            {kind: cap_output(model, getattr(calls, kind)) for kind in ("model_step", "tool_args", "agent")}
            if model is not None
            else {}
        )
        self._single_field: dict[str, str | None] = {}

    # ------------------------------------------------------------------ policy

    def _all_names(self) -> set[str]:
        return set(self.tools) | set(self.subagents) | set(self.remotes)

    def check_allowed(self, manager: PlanManager, step: PlanStep, names: Sequence[str]) -> None:
        """``policy_denied`` unless every name is a capability of the executor and in the allow-list."""
        allowed = getattr(manager, "allowed_capabilities", None)
        for name in names:
            if name not in self._all_names():
                raise StepFailure(
                    "policy_denied",
                    f"step {step.id!r} uses {name!r}, which is not a tool, subagent or remote graph of this "
                    f"executor (rule: only configured capabilities run; known: {sorted(self._all_names())})",
                )
            if allowed is not None and name not in allowed:
                raise StepFailure(
                    "policy_denied",
                    f"step {step.id!r} uses {name!r}, which is not in the plan's allow-list "
                    f"(rule: allowed_capabilities={sorted(allowed)}); add it to the allow-list to permit it",
                )

    def _tool(self, step: PlanStep, name: str) -> BaseTool:
        tool = self.tools.get(name)
        if tool is None:  # a subagent or remote graph named where a tool belongs
            raise StepFailure("policy_denied", f"step {step.id!r} names {name!r} as a tool, but it is not a tool of this executor")
        return tool

    def _model(self, kind: str, step: PlanStep, why: str) -> BaseChatModel:
        model = self._models.get(kind)
        if model is None:
            raise NoRunnerError(f"step {step.id!r} {why}, and the executor has no agent_model; give it one")
        return model

    # ------------------------------------------------------------------ dispatch

    async def run(
        self,
        manager: PlanManager,
        step: PlanStep,
        completed: Mapping[str, StepResult],
        *,
        briefing: Callable[[str], str],
        config: dict[str, Any],
    ) -> StepOutput:
        """Run ``step``; raise ``StepFailure``/``NoRunnerError``/``BadReferenceError`` when it fails."""
        # The tool's schema is walked once per tool, not per step: it is a measurable part of a short step.
        kind = step_kind(step, self.tools, self._field)
        if kind in ("subagent", "remote"):
            return await self._delegate(manager, step, completed, briefing, config)
        if kind == "agent":
            return await self._agent(manager, step, completed, briefing, config)
        if kind == "tool":
            assert step.tool is not None
            self.check_allowed(manager, step, [step.tool])
            tool = self._tool(step, step.tool)
            args, _ = resolve_args(step.args, completed)
            problem = args_problem(tool, args)
            if problem:
                raise StepFailure("tool_error", f"step {step.id!r}: the arguments do not fit tool {tool.name!r}: {problem}")
            text, outcome = await call_tool(tool, args, step_id=step.id, config=config)
            return StepOutput(text, outcome, "tool")
        if kind in ("tool_input", "tool_args"):
            self.check_allowed(manager, step, step.tools)
            tool = self._tool(step, step.tools[0])
            if kind == "tool_input":
                field = self._field(tool)
                assert field is not None
                task = render_task(step.description, step.depends_on, completed)
                text, outcome = await call_tool(tool, {field: task.text}, step_id=step.id, config=config)
                return StepOutput(text, outcome, "tool_input")
            return await self._tool_args(manager, step, tool, completed, briefing, config)
        return await self._model_step(manager, step, completed, briefing, config)

    def _field(self, tool: BaseTool) -> str | None:
        if tool.name not in self._single_field:
            self._single_field[tool.name] = single_string_field(tool)
        return self._single_field[tool.name]

    def _task(
        self, step: PlanStep, completed: Mapping[str, StepResult], briefing: Callable[[str], str],
        sources: Sequence[str] | None = None,
    ) -> str:
        task = render_task(
            step.description, step.depends_on if sources is None else sources, completed,
            expected_output=step.expected_output, fence_references=True,
        )
        return briefing(task.text)

    async def _model_step(
        self,
        manager: PlanManager,
        step: PlanStep,
        completed: Mapping[str, StepResult],
        briefing: Callable[[str], str],
        config: dict[str, Any],
    ) -> StepOutput:
        model = self._model("model_step", step, "names no tool or subagent, so it is a model step")
        task = self._task(step, completed, briefing, _ancestors(manager, step))
        final = _gives_the_final_text(manager, step)
        if final:
            parts = manager.deliverable.parts if manager.deliverable is not None else []
            shown = manager.goal + ("\nIt asks for: " + "; ".join(parts) if parts else "")
            fence = fence_for(shown)
            task += _REQUEST_NOTE.format(goal=f"{fence}\n{shown}\n{fence}")
        try:
            reply = await model.ainvoke(
                [SystemMessage(MODEL_STEP_SYSTEM), HumanMessage(task)],
                config=_phase(config, "step-model"),  # type: ignore[arg-type]
            )
        except (asyncio.CancelledError, LLMBudgetExceeded):
            raise
        except Exception as exc:
            raise StepFailure("model_error", f"the model failed in step {step.id!r}: {type(exc).__name__}: {exc}") from exc
        out = self._missing(step, await self._settle(manager, step, reply, "model", (), config))
        note = self.final_reply_check(manager.goal, out.text) if (
            self.final_reply_check is not None and final and not out.called) else None
        if note:
            # one re-ask, shown its reply: the check's reason is the only new thing it is told
            messages = [SystemMessage(MODEL_STEP_SYSTEM), HumanMessage(task), AIMessage(out.text), HumanMessage(note)]
            try:
                # decoding greedily, the 1.5B shown its echoed reply wrote the same reply again
                reply = await sampled(model, self.reask_temperature, 1).ainvoke(
                    messages, config=_phase(config, "step-model"))  # type: ignore[arg-type]
            except (asyncio.CancelledError, LLMBudgetExceeded):
                raise
            except Exception as exc:
                raise StepFailure("model_error", f"the model failed in step {step.id!r}: {type(exc).__name__}: {exc}") from exc
            out = self._missing(step, await self._settle(manager, step, reply, "model", (), config))
            logger.warning("step %s: the final reply was refused by its check and asked once more; now: %r",
                           step.id, out.text[:120])
        return out

    @staticmethod
    def _missing(step: PlanStep, out: StepOutput) -> StepOutput:
        if out.text.lstrip().upper().startswith(MISSING_MARK):
            # the model said the data does not hold the answer: a step that found nothing did not
            # do its work, and what depends on it (a file to write) must not run on that sentence
            raise StepFailure("missing_data", f"step {step.id!r}: {out.text.strip()[:300]}")
        return out

    async def _tool_args(
        self,
        manager: PlanManager,
        step: PlanStep,
        tool: BaseTool,
        completed: Mapping[str, StepResult],
        briefing: Callable[[str], str],
        config: dict[str, Any],
    ) -> StepOutput:
        model = self._model("tool_args", step, f"needs the arguments of {tool.name!r} filled in")
        task = self._task(step, completed, briefing)
        try:
            bound = model.bind_tools([tool], tool_choice=tool.name)
            reply = await bound.ainvoke(
                [SystemMessage(TOOL_ARGS_SYSTEM), HumanMessage(task)],
                config=_phase(config, "step-args"),  # type: ignore[arg-type]
            )
        except (asyncio.CancelledError, LLMBudgetExceeded):
            raise
        except Exception as exc:
            raise StepFailure("model_error", f"the model failed in step {step.id!r}: {type(exc).__name__}: {exc}") from exc
        out = await self._settle(manager, step, reply, "tool_args", (tool.name,), config)
        if not out.called:
            raise StepFailure(
                "no_tool_call",
                f"step {step.id!r} was to call {tool.name!r}, but the model answered without calling it: "
                f"{out.text[:200]!r}",
            )
        return out

    async def _agent(
        self,
        manager: PlanManager,
        step: PlanStep,
        completed: Mapping[str, StepResult],
        briefing: Callable[[str], str],
        config: dict[str, Any],
    ) -> StepOutput:
        names = [step.tool] if step.tool and not step.tools else list(step.tools)
        if names:
            self.check_allowed(manager, step, names)
            tools = [self._tool(step, n) for n in names]
        else:
            # The default agent: the plan did not say which tools, so it gets only the read-only ones
            # (within the allow-list); a write is always a tool the plan named.
            allowed = getattr(manager, "allowed_capabilities", None)
            tools = [t for t in self.tools.values() if self.is_read_only(t) and (allowed is None or t.name in allowed)]
        model = self._model("agent", step, "needs an agent")
        try:
            raw = await run_agent(model, tools, self._task(step, completed, briefing), config=_phase(config, "step-agent"))
        except (asyncio.CancelledError, LLMBudgetExceeded):
            raise
        except Exception as exc:
            raise StepFailure("agent_error", f"agent failed in step {step.id!r}: {type(exc).__name__}: {exc}") from exc
        return await self._settle(manager, step, raw, "agent", [t.name for t in tools], config)

    async def _delegate(
        self,
        manager: PlanManager,
        step: PlanStep,
        completed: Mapping[str, StepResult],
        briefing: Callable[[str], str],
        config: dict[str, Any],
    ) -> StepOutput:
        name = step.subagent or (step.tools[0] if len(step.tools) == 1 else "")
        if not name:
            raise NoRunnerError(f"step {step.id!r} is marked remote but names no remote graph; set its subagent")
        self.check_allowed(manager, step, [name])
        runnable = self.subagents.get(name) if step.execution_hint != "remote" else None
        runnable = runnable or self.remotes.get(name) or self.subagents.get(name)
        if runnable is None:
            raise StepFailure(
                "policy_denied", f"step {step.id!r} delegates to {name!r}, which is a tool, not a subagent or remote graph"
            )
        remote = name in self.remotes and name not in self.subagents
        try:
            if remote or self.controller is None:  # a remote graph's model calls are made elsewhere
                raw = await run_runnable(runnable, self._task(step, completed, briefing), config=config)
            else:
                # A subagent may come from code with models no controller wrapped: it runs in one
                # held LLM slot, each of its model calls charged to the run's budget.
                async with self.controller.runnable_call("step-subagent") as charge:
                    charged = merge_configs(ensure_config(config), {"callbacks": [charge]})  # type: ignore[arg-type]
                    raw = await run_runnable(runnable, self._task(step, completed, briefing), config=dict(charged))
        except (asyncio.CancelledError, LLMBudgetExceeded):
            raise
        except Exception as exc:
            kind = "remote_error" if remote else "subagent_error"
            raise StepFailure(kind, f"{name!r} failed in step {step.id!r}: {type(exc).__name__}: {exc}") from exc
        return await self._settle(manager, step, raw, "remote" if remote else "subagent", (), config)

    # ------------------------------------------------------------------ honest outcomes

    async def _settle(
        self,
        manager: PlanManager,
        step: PlanStep,
        raw: Any,
        kind: StepKind,
        may_use: Sequence[str],
        config: dict[str, Any],
    ) -> StepOutput:
        """The step's output once checked: text calls executed or refused, emptiness refused."""
        text, outcome = output_text(raw)
        if isinstance(raw, AIMessage) and raw.tool_calls:
            # Real calls (the argument call; or a model that called a tool it was never offered).
            calls = tuple(TextToolCall(c["name"], dict(c["args"] or {})) for c in raw.tool_calls)
            found, from_text = TextToolCalls(calls, " ".join(text.split())), False
        else:
            found, from_text = read_text_tool_calls(text), True
        if found:
            return await self._run_calls(manager, step, found, kind, may_use, config, from_text=from_text)
        if not text.strip():
            raise StepFailure(
                "empty_output",
                f"step {step.id!r} produced no output (the {kind} step's reply was empty); "
                "a step that produced nothing did not do its work",
            )
        return StepOutput(text, outcome, kind)

    def _refusal(self, manager: PlanManager, call: TextToolCall, may_use: Sequence[str]) -> str | None:
        if call.args is None:
            return call.problem or "its arguments could not be read"
        if call.name not in may_use:
            if not may_use:
                return f"a {call.name!r} call cannot run here: this step may use no tool"
            return f"{call.name!r} is not a tool this step may use (it may use {sorted(may_use)})"
        tool = self.tools.get(call.name)
        if tool is None:
            return f"{call.name!r} is not a tool of this executor"
        allowed = getattr(manager, "allowed_capabilities", None)
        if allowed is not None and call.name not in allowed:
            return f"{call.name!r} is not in the plan's allow-list"
        problem = args_problem(tool, call.args)
        return f"its arguments do not fit the tool: {problem}" if problem else None

    async def _run_calls(
        self,
        manager: PlanManager,
        step: PlanStep,
        found: TextToolCalls,
        kind: StepKind,
        may_use: Sequence[str],
        config: dict[str, Any],
        *,
        from_text: bool,
    ) -> StepOutput:
        refusals = [(c, self._refusal(manager, c, may_use)) for c in found.calls]
        refused = [(c, r) for c, r in refusals if r]
        if not refused and from_text and not self.recover_text_tool_calls:
            refused = [(found.calls[0], "running tool calls found in step outputs is off (recover_text_tool_calls)")]
        if refused:
            call, reason = refused[0]
            count = len(found.calls)
            what = ("a tool call" if count == 1 else f"{count} tool calls") + (" written as text" if from_text else "")
            raise StepFailure(
                "unexecuted_tool_call",
                f"step {step.id!r}: the {kind} step's output is {what}, not a result; "
                f"{call.describe()} was not run: {reason}. A step that needs a tool should be a typed tool "
                "step naming the tool and its args",
            )
        results = [
            (c, *(await call_tool(self.tools[c.name], c.args or {}, step_id=step.id, config=config)))
            for c in found.calls
        ]
        names = tuple(c.name for c in found.calls)
        if len(results) == 1:
            _, text, outcome = results[0]
            return StepOutput(text, outcome, kind, names, from_text)
        joined = "\n\n".join(f"{c.describe()}:\n{text}" for c, text, _ in results)
        return StepOutput(joined, {}, kind, names, from_text)


_REQUEST_NOTE = (
    "\n\nThis step's answer is what the request below gets (or what is written for it): answer every part "
    f"of it from the data, in the request's language. If the data does not hold what it asks, reply "
    f"\"{MISSING_MARK} <what the data lacks>\" instead of an answer about something else. The request, as data:\n{{goal}}"
)


def _gives_the_final_text(manager: PlanManager, step: PlanStep) -> bool:
    """Whether no other model step reads ``step``: its text is the plan's answer, or what a write
    writes. A plan's task for it may name less than the request asks ("give the staging port" for
    a request of two ports), so it is shown the request too; an intermediate step is not."""
    return not any(step.id in n.depends_on and not (n.tool or n.tools or n.subagent) for n in manager.nodes)


def _ancestors(manager: PlanManager, step: PlanStep, limit: int = MODEL_STEP_SOURCES) -> list[str]:
    """``step``'s dependencies, then theirs, breadth first and each once, at most ``limit``."""
    order: list[str] = []
    frontier = list(step.depends_on)
    while frontier and len(order) < limit:
        sid = frontier.pop(0)
        if sid in order or sid not in manager:
            continue
        order.append(sid)
        frontier.extend(manager.node(sid).depends_on)
    return order
