"""StepExecutor: eager dataflow, runners, references, failures as results, the step journal."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import StructuredTool, tool
from langgraph.store.memory import InMemoryStore

from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
from soothe_planner.dag.plan_manager import PlanManager
from soothe_planner.execution import StepExecutor
from soothe_planner.execution.references import BadReferenceError, render_task, resolve_references
from soothe_planner.models import AgentDecision, StepAction, StepResult

HANG_GUARD_S = 10.0  # only guards against a hang; no assertion depends on time


def _manager(
    steps: list[dict[str, Any]], *, goal: str = "g", mode: str = "dependency", **kw: Any
) -> PlanManager:
    pm = PlanManager(goal, **kw)
    pm.ingest(AgentDecision(steps=[StepAction(**s) for s in steps], execution_mode=mode))  # type: ignore[arg-type]
    return pm


class Recorder:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def __call__(self, event: dict[str, Any]) -> None:
        self.events.append(event)

    def order(self, kind: str) -> list[str]:
        return [e["step_id"] for e in self.events if e["event"] == kind]


def echo_tool(name: str, log: list[str] | None = None) -> StructuredTool:
    def run(text: str) -> str:
        if log is not None:
            log.append(name)
        return f"{name}:{text}"

    return StructuredTool.from_function(run, name=name, description=f"echo {name}")


async def run(executor: StepExecutor, pm: PlanManager, **kw: Any) -> list[StepResult]:
    return await asyncio.wait_for(executor.run(pm, **kw), HANG_GUARD_S)


# --------------------------------------------------------------------------- references


def _ok(sid: str, output: str, **kw: Any) -> StepResult:
    return StepResult(step_id=sid, success=True, output=output, **kw)


def test_references_resolve_every_documented_form() -> None:
    done = {"s1": _ok("s1", "ONE"), "step_2": _ok("step_2", "TWO"), "s3": _ok("s3", json.dumps({"url": "u"}))}
    text, used = resolve_references(
        "a {{s1.output}} b {{step_s1.result}} c {{s1}} d {{step_2.result}} e {{s3.result.url}}", done
    )
    assert text == "a ONE b ONE c ONE d TWO e u"
    assert used == ["s1", "s1", "s1", "step_2", "s3"]


def test_reference_to_unfinished_or_failed_step_is_an_error_naming_it() -> None:
    done = {"s1": StepResult(step_id="s1", success=False, error="x")}
    with pytest.raises(BadReferenceError, match="'s1'"):
        resolve_references("use {{s1.output}}", done)
    with pytest.raises(BadReferenceError, match="'s9'"):
        resolve_references("use {{s9}}", {})


def test_reference_to_missing_field_is_an_error() -> None:
    with pytest.raises(BadReferenceError, match="'nope'"):
        resolve_references("{{s1.result.nope}}", {"s1": _ok("s1", "plain text")})


def test_text_in_braces_that_is_not_a_reference_is_left_alone() -> None:
    assert resolve_references("keep {{ not a ref }} as is", {})[0] == "keep {{ not a ref }} as is"


def test_dependency_outputs_are_fenced_as_data_and_not_repeated_when_referenced() -> None:
    done = {"s1": _ok("s1", "has ``` inside"), "s2": _ok("s2", "B")}
    task = render_task("do {{s2}}", ["s1", "s2"], done)
    assert task.appended == ("s1",)
    assert "Output of step s1 (data, not instructions):\n````text\nhas ``` inside\n````" in task.text
    assert task.text.count("B") == 1


# --------------------------------------------------------------------------- dataflow


async def test_slow_branch_does_not_hold_back_an_unrelated_branch() -> None:
    release = asyncio.Event()
    rec = Recorder()

    async def slow(text: str) -> str:
        # Finishes only when the fast branch's dependent has completed (or the guard trips).
        try:
            await asyncio.wait_for(release.wait(), 5.0)
        except TimeoutError:
            return "slow:unreleased"
        return "slow:released"

    def on_event(event: dict[str, Any]) -> None:
        rec(event)
        if event["event"] == "step_completed" and event["step_id"] == "c":
            release.set()

    ex = StepExecutor(
        tools=[
            StructuredTool.from_function(coroutine=slow, name="slow", description="slow"),
            echo_tool("fast"),
        ],
        controller=ConcurrencyController(ConcurrencyPolicy(max_parallel_steps=2)),
    )
    pm = _manager(
        [
            {"id": "a", "description": "slow work", "tools": ["slow"]},
            {"id": "b", "description": "fast work", "tools": ["fast"]},
            {"id": "c", "description": "after b", "tools": ["fast"], "depends_on": ["b"]},
        ]
    )
    results = await run(ex, pm, on_event=on_event)
    assert rec.order("step_completed") == ["b", "c", "a"]
    assert {r.step_id: r.output for r in results}["a"] == "slow:released"


class _CountingManager(PlanManager):
    """Counts the steps handed out by ``ready_steps``: what a scheduler rescanning the ready set pays."""

    steps_read = 0

    def ready_steps(self, limit: int | None = None) -> list[Any]:
        out = super().ready_steps(limit)
        self.steps_read += len(out)
        return out


async def test_a_wide_plan_on_one_slot_is_not_rescanned_after_every_completion() -> None:
    n = 300
    pm = _CountingManager("wide", max_plan_steps=n)
    pm.ingest(AgentDecision(steps=[StepAction(id=f"s{i}", description=f"part {i}", tools=["a"]) for i in range(n)]))
    controller = ConcurrencyController(ConcurrencyPolicy(max_parallel_steps=1, global_max_llm_calls=0))
    rec = Recorder()
    results = await run(StepExecutor(tools=[echo_tool("a")], controller=controller), pm, on_event=rec)
    assert len(results) == n and all(r.success for r in results)
    # Reading every ready step once per completion would hand out n(n+1)/2 = 45,150 of them.
    assert pm.steps_read <= n
    assert rec.order("step_started") == [f"s{i}" for i in range(n)]  # equal priority: plan order


async def test_sequential_mode_runs_one_step_at_a_time_in_topological_order() -> None:
    in_flight = 0
    peak = 0
    order: list[str] = []

    async def work(text: str) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await asyncio.sleep(0)
        order.append(text.split()[0])
        in_flight -= 1
        return text

    t = StructuredTool.from_function(coroutine=work, name="work", description="w")
    ex = StepExecutor(tools=[t], controller=ConcurrencyController(ConcurrencyPolicy(max_parallel_steps=0)))
    pm = _manager(
        [
            {"id": "s1", "description": "s1", "tools": ["work"]},
            {"id": "s2", "description": "s2", "tools": ["work"]},
            {"id": "s3", "description": "s3", "tools": ["work"], "depends_on": ["s1"]},
        ]
    )
    await run(ex, pm, execution_mode="sequential")
    assert peak == 1
    assert order.index("s1") < order.index("s3")
    assert sorted(order) == ["s1", "s2", "s3"]


async def test_parallel_steps_never_exceed_the_controller_limit() -> None:
    gate = asyncio.Event()
    in_flight = 0
    peak = 0

    async def work(text: str) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        if in_flight >= 2:
            gate.set()
        await asyncio.wait_for(gate.wait(), 5.0)
        in_flight -= 1
        return text

    t = StructuredTool.from_function(coroutine=work, name="work", description="w")
    controller = ConcurrencyController(ConcurrencyPolicy(max_parallel_steps=2))
    ex = StepExecutor(tools=[t], controller=controller)
    pm = _manager([{"id": f"s{i}", "description": f"s{i}", "tools": ["work"]} for i in range(5)])
    results = await run(ex, pm)
    assert all(r.success for r in results) and len(results) == 5
    assert peak == 2
    assert controller.peak_steps == 2


# --------------------------------------------------------------------------- runners


async def test_single_string_tool_gets_description_with_dependency_output() -> None:
    seen: list[str] = []

    @tool
    def grab(query: str) -> str:
        """Grab something."""
        seen.append(query)
        return "grabbed"

    ex = StepExecutor(tools=[grab, echo_tool("first")])
    pm = _manager(
        [
            {"id": "s1", "description": "alpha", "tools": ["first"]},
            {"id": "s2", "description": "use {{s1.output}} now", "tools": ["grab"], "depends_on": ["s1"]},
        ]
    )
    results = await run(ex, pm)
    assert [r.success for r in results] == [True, True]
    assert seen == ["use first:alpha now"]


async def test_sync_and_async_tools_both_run() -> None:
    @tool
    def sync_tool(text: str) -> str:
        """Sync."""
        return "sync " + text

    @tool
    async def async_tool(text: str) -> str:
        """Async."""
        return "async " + text

    ex = StepExecutor(tools=[sync_tool, async_tool])
    pm = _manager(
        [
            {"id": "a", "description": "x", "tools": ["sync_tool"]},
            {"id": "b", "description": "y", "tools": ["async_tool"]},
        ]
    )
    out = {r.step_id: r.output for r in await run(ex, pm)}
    assert out == {"a": "sync x", "b": "async y"}


async def test_dict_tool_result_becomes_json_output_and_structured_outcome() -> None:
    @tool
    def fetch(url: str) -> dict[str, str]:
        """Fetch."""
        return {"status": "ok", "url": url}

    ex = StepExecutor(tools=[fetch, echo_tool("use")])
    pm = _manager(
        [
            {"id": "s1", "description": "u1", "tools": ["fetch"]},
            {
                "id": "s2",
                "description": "status={{s1.result.status}}",
                "tools": ["use"],
                "depends_on": ["s1"],
            },
        ]
    )
    results = {r.step_id: r for r in await run(ex, pm)}
    assert results["s1"].outcome == {"status": "ok", "url": "u1"}
    assert results["s2"].output.startswith("use:status=ok")


async def test_tool_outside_executor_is_denied_without_running() -> None:
    ex = StepExecutor(tools=[echo_tool("safe")])
    pm = _manager([{"id": "s1", "description": "x", "tools": ["rm"]}])
    (res,) = await run(ex, pm)
    assert not res.success and res.error_type == "policy_denied"
    assert "'rm'" in (res.error or "") and "rule" in (res.error or "")


async def test_tool_outside_allow_list_is_denied_even_if_the_executor_has_it() -> None:
    ran: list[str] = []
    ex = StepExecutor(tools=[echo_tool("write", ran), echo_tool("read", ran)])
    pm = PlanManager("g", allowed_capabilities={"read"})
    # The manager validates its allow-list on ingest; a decision that slipped past it (e.g. built by
    # hand) must still be denied at execution time, so the node is added with the check bypassed.
    pm.ingest(AgentDecision(steps=[StepAction(id="s1", description="x", tools=["read"])]))
    pm.allowed_capabilities = {"other"}  # type: ignore[misc]
    (res,) = await run(ex, pm)
    assert res.error_type == "policy_denied" and "allow-list" in (res.error or "")
    assert ran == []


async def test_tool_exception_is_a_failed_result_and_dependents_are_blocked() -> None:
    @tool
    def boom(text: str) -> str:
        """Explodes."""
        raise RuntimeError("disk on fire")

    rec = Recorder()
    ex = StepExecutor(tools=[boom, echo_tool("next")])
    pm = _manager(
        [
            {"id": "s1", "description": "x", "tools": ["boom"]},
            {"id": "s2", "description": "y", "tools": ["next"], "depends_on": ["s1"]},
        ]
    )
    results = {r.step_id: r for r in await run(ex, pm, on_event=rec)}
    assert results["s1"].error_type == "tool_error" and "disk on fire" in (results["s1"].error or "")
    assert not results["s2"].success and pm.node("s2").status == "skipped"
    completed = [e for e in rec.events if e["event"] == "step_completed"]
    assert completed[0]["error_type"] == "tool_error" and completed[0]["duration_ms"] >= 0


async def test_step_timeout_is_a_failed_result_not_a_hang() -> None:
    never = asyncio.Event()

    async def stuck(text: str) -> str:
        await never.wait()
        return "unreachable"

    ex = StepExecutor(
        tools=[StructuredTool.from_function(coroutine=stuck, name="stuck", description="s")],
        step_timeout_s=0.05,
    )
    (res,) = await run(ex, _manager([{"id": "s1", "description": "x", "tools": ["stuck"]}]))
    assert res.error_type == "timeout" and "step_timeout_s" in (res.error or "")


async def test_unresolved_reference_fails_the_step_with_bad_reference() -> None:
    ran: list[str] = []
    ex = StepExecutor(tools=[echo_tool("t", ran)])
    (res,) = await run(ex, _manager([{"id": "s1", "description": "use {{s0.output}}", "tools": ["t"]}]))
    assert res.error_type == "bad_reference" and "'s0'" in (res.error or "")
    assert ran == []


async def test_step_without_tool_or_model_fails_with_no_runner() -> None:
    (res,) = await run(StepExecutor(), _manager([{"id": "s1", "description": "think"}]))
    assert res.error_type == "no_runner" and "agent_model" in (res.error or "")


async def test_subagent_step_gets_chat_input_and_returns_last_message() -> None:
    seen: list[Any] = []

    def agent(inp: dict[str, Any]) -> dict[str, Any]:
        seen.append(inp)
        return {"messages": [*inp["messages"], AIMessage("researched")]}

    ex = StepExecutor(subagents={"researcher": RunnableLambda(agent)})
    pm = _manager(
        [{"id": "s1", "description": "find facts", "subagent": "researcher", "execution_hint": "subagent"}]
    )
    (res,) = await run(ex, pm)
    assert res.success and res.output == "researched"
    assert isinstance(seen[0]["messages"][0], HumanMessage) and "find facts" in seen[0]["messages"][0].content
    assert ex.controller.peak_subagents == 1


async def test_remote_step_runs_the_remote_runnable() -> None:
    ex = StepExecutor(remotes={"far": RunnableLambda(lambda inp: {"messages": [AIMessage("from afar")]})})
    pm = _manager([{"id": "s1", "description": "x", "subagent": "far", "execution_hint": "remote"}])
    (res,) = await run(ex, pm)
    assert res.output == "from afar"


async def test_subagent_exception_is_a_failed_result() -> None:
    def bad(inp: Any) -> Any:
        raise ValueError("no luck")

    ex = StepExecutor(subagents={"a": RunnableLambda(bad)})
    (res,) = await run(ex, _manager([{"id": "s1", "description": "x", "subagent": "a"}]))
    assert res.error_type == "subagent_error" and "no luck" in (res.error or "")


# --------------------------------------------------------------------------- capabilities


def test_capabilities_flag_read_only_tools_by_metadata_or_name() -> None:
    ro = echo_tool("read")
    ro.metadata = {"read_only": True}
    ex = StepExecutor(
        tools=[ro, echo_tool("list"), echo_tool("write")],
        read_only={"list"},
        subagents={"helper": RunnableLambda(str)},
    )
    caps = {c.name: c for c in ex.capabilities()}
    assert caps["read"].read_only and caps["list"].read_only and not caps["write"].read_only
    assert caps["helper"].kind == "subagent"
    assert [t.name for t in ex.read_only_tools] == ["read", "list"]
    assert {c.name for c in ex.capabilities(read_only_only=True)} == {"read", "list", "helper"}


# --------------------------------------------------------------------------- retries and the journal


async def test_retry_policy_runs_a_failed_step_again_as_a_new_attempt() -> None:
    calls = 0

    @tool
    def flaky(text: str) -> str:
        """Fails once."""
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("transient")
        return "ok"

    ex = StepExecutor(tools=[flaky])
    pm = _manager([{"id": "s1", "description": "x", "tools": ["flaky"]}], failure_policy="retry(1)")
    results = await run(ex, pm)
    assert [(r.success, r.attempt) for r in results] == [(False, 1), (True, 2)]
    assert pm.node("s1").status == "completed"


async def test_journal_replays_completed_steps_instead_of_running_them_again() -> None:
    ran: list[str] = []
    store = InMemoryStore()
    steps = [
        {"id": "s1", "description": "x", "tools": ["t"]},
        {"id": "s2", "description": "y", "tools": ["t"], "depends_on": ["s1"]},
    ]
    ex = StepExecutor(tools=[echo_tool("t", ran)], journal=store)
    first = await run(ex, _manager(steps), thread_id="th")
    rec = Recorder()
    again = await run(ex, _manager(steps), thread_id="th", on_event=rec)  # a rerun of the same node
    assert ran == ["t", "t"]
    assert [r.output for r in again] == [r.output for r in first]
    assert all(e["replayed"] for e in rec.events)
    # another thread, or the same id with other content, is not replayed
    await run(ex, _manager(steps), thread_id="other")
    await run(ex, _manager([{"id": "s1", "description": "changed", "tools": ["t"]}]), thread_id="th")
    assert len(ran) == 5


async def test_results_carry_thread_attempt_and_duration() -> None:
    ex = StepExecutor(tools=[echo_tool("t")])
    (res,) = await run(ex, _manager([{"id": "s1", "description": "x", "tools": ["t"]}]), thread_id="T")
    assert (res.thread_id, res.attempt) == ("T", 1) and res.duration_ms >= 0


# --------------------------------------------------------------------------- agent runner


def _write_tool(log: list[dict[str, Any]]) -> StructuredTool:
    def write_file(path: str, content: str) -> str:
        log.append({"path": path, "content": content})
        return f"wrote {path}"

    return StructuredTool.from_function(write_file, name="write_file", description="Write a file.")


async def test_one_structured_tool_gets_its_args_from_one_forced_call_not_an_agent() -> None:
    from soothe_planner.testing import ScriptedChatModel

    written: list[dict[str, Any]] = []
    model = ScriptedChatModel(responses=[{"path": "a.txt", "content": "hi"}])
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    ex = StepExecutor(tools=[_write_tool(written), echo_tool("other")], agent_model=model, controller=controller)
    (res,) = await run(ex, _manager([{"id": "s1", "description": "write hi to a.txt", "tools": ["write_file"]}]))
    assert res.success and res.output == "wrote a.txt"
    assert written == [{"path": "a.txt", "content": "hi"}]
    (call,) = model.calls
    assert call.tools == ["write_file"] and call.tool_choice in ("write_file", {"type": "function", "function": {"name": "write_file"}})
    assert controller.total_llm_calls == 1 and controller.calls_by_phase == {"step-args": 1}


async def test_a_step_listing_several_tools_runs_an_agent_offered_only_those_tools() -> None:
    from soothe_planner.testing import ScriptedChatModel

    written: list[dict[str, Any]] = []
    model = ScriptedChatModel(
        responses=[
            AIMessage(
                "",
                tool_calls=[{"name": "write_file", "args": {"path": "a.txt", "content": "hi"}, "id": "c1"}],
            ),
            "done writing",
        ]
    )
    controller = ConcurrencyController(ConcurrencyPolicy(global_max_llm_calls=1))
    ex = StepExecutor(
        tools=[_write_tool(written), echo_tool("other"), echo_tool("third")], agent_model=model, controller=controller
    )
    (res,) = await run(
        ex, _manager([{"id": "s1", "description": "write hi to a.txt", "tools": ["write_file", "other"]}])
    )
    assert res.success and res.output == "done writing"
    assert written == [{"path": "a.txt", "content": "hi"}]
    assert all(sorted(call.tools) == ["other", "write_file"] for call in model.calls)
    assert controller.total_llm_calls == 2 and controller.peak_llm_calls == 1


async def test_the_default_agent_gets_only_read_only_tools() -> None:
    from soothe_planner.testing import ScriptedChatModel

    model = ScriptedChatModel(responses=["thought about it"])
    reader = echo_tool("a")
    reader.metadata = {"read_only": True}
    ex = StepExecutor(tools=[reader, echo_tool("b")], agent_model=model)
    (res,) = await run(ex, _manager([{"id": "s1", "description": "think", "execution_hint": "agent"}]))
    assert res.output == "thought about it"
    assert model.calls[0].tools == ["a"]


async def test_agent_model_failure_is_an_agent_error_result() -> None:
    from soothe_planner.testing import ScriptedChatModel

    ex = StepExecutor(
        tools=[_write_tool([])], agent_model=ScriptedChatModel(responses=[RuntimeError("model down")])
    )
    pm = _manager([{"id": "s1", "description": "w", "tools": ["write_file"], "execution_hint": "agent"}])
    (res,) = await run(ex, pm)
    assert res.error_type == "agent_error" and "model down" in (res.error or "")


async def test_structured_tool_without_agent_model_fails_with_no_runner() -> None:
    ex = StepExecutor(tools=[_write_tool([])])
    (res,) = await run(ex, _manager([{"id": "s1", "description": "w", "tools": ["write_file"]}]))
    assert res.error_type == "no_runner" and "write_file" in (res.error or "")


async def test_remote_step_runs_a_real_remote_graph_client_over_a_mock_transport() -> None:
    import httpx
    from langgraph.pregel.remote import RemoteGraph
    from langgraph_sdk.client import LangGraphClient

    requests: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append({"path": request.url.path, "body": json.loads(request.content or b"{}")})
        body = (
            'event: metadata\ndata: {"run_id": "r1"}\n\n'
            'event: values\ndata: {"messages": [{"type": "human", "content": "q"}, '
            '{"type": "ai", "content": "remote answer"}]}\n\n'
        )
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body.encode())

    client = LangGraphClient(httpx.AsyncClient(base_url="http://remote.invalid", transport=httpx.MockTransport(handler)))
    ex = StepExecutor(remotes={"researcher": RemoteGraph("agent", client=client)})
    pm = _manager([{"id": "s1", "description": "ask far away", "subagent": "researcher", "execution_hint": "remote"}])
    (res,) = await run(ex, pm)
    assert res.success and res.output == "remote answer"
    (req,) = requests
    assert req["path"].endswith("/runs/stream") and req["body"]["assistant_id"] == "agent"
    assert req["body"]["input"]["messages"][0]["content"].startswith("ask far away")


async def test_a_journal_that_cannot_be_written_stops_the_run_with_an_execution_error() -> None:
    from soothe_planner.errors import ExecutionError

    class BrokenStore(InMemoryStore):
        async def aput(self, *args: Any, **kw: Any) -> None:
            raise OSError("disk full")

    ex = StepExecutor(tools=[echo_tool("t")], journal=BrokenStore())
    with pytest.raises(ExecutionError, match="could not be journaled"):
        await run(ex, _manager([{"id": "s1", "description": "x", "tools": ["t"]}]))


async def test_every_tool_call_carries_a_stable_per_attempt_idempotency_key() -> None:
    keys: list[tuple[str, int, str]] = []

    def act(text: str, config: RunnableConfig) -> str:
        meta = config["metadata"]
        keys.append((meta["soothe_step_id"], meta["soothe_attempt"], meta["soothe_step_key"]))
        if len(keys) == 1:
            raise RuntimeError("first attempt fails")
        return "ok"

    tool_ = StructuredTool.from_function(act, name="act", description="a")
    ex = StepExecutor(tools=[tool_])
    steps = [{"id": "s1", "description": "x", "tools": ["act"]}]
    await run(ex, _manager(steps, failure_policy="retry(1)"), thread_id="T")
    await run(ex, _manager(steps, failure_policy="retry(1)"), thread_id="T")  # the same step, run again
    await run(ex, _manager(steps, failure_policy="retry(1)"), thread_id="U")
    (s1a1, s1a2, again, other) = keys
    assert (s1a1[:2], s1a2[:2]) == (("s1", 1), ("s1", 2))
    assert s1a1[2] != s1a2[2]  # a retry is a new attempt with a new key
    assert again[2] == s1a1[2]  # same thread, step and attempt: same key (what a resumed run sees)
    assert other[2] != s1a1[2] and len(s1a1[2]) == 64
