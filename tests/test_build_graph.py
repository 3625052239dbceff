"""One place builds the StrangeLoop from a config: the CLI and the LangGraph server get a graph with
the same options for the same config, and the server honours ``run.intake`` and ``tracing.langfuse``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tracing_support import SECRET, Capture, attr, capture, no_langfuse_env, tree

from soothe_planner.config import (
    load_config,
    loop_options,
    resolve_persistence,
    resolve_run,
    resolve_seal_key,
)
from soothe_planner.graph import goal_input, run_config
from soothe_planner.models import PlanContext
from soothe_planner.tracing import RunTracer, trace_id_for, trace_run

__all__ = ["capture", "no_langfuse_env"]  # fixtures, used by name

ROOT = Path(__file__).resolve().parents[1]
WORKSPACE = ROOT / "examples" / "workspace"
GOAL = "List the TODO lines"
PLAN = {
    "plan_action": "new", "execution_mode": "sequential", "next_action": "search",
    "steps": [{"id": "find", "description": "Search the workspace for TODO lines", "tools": ["search_text"]}],
}  # fmt: skip
SCRIPT = {  # no RouteIntake: a routing call would exhaust the script
    "AssessStatus": [{"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "found"}],
    "GeneratePlan": [PLAN],
    # the step names one tool with structured arguments: one call fills them in, then the tool runs
    "text": [{"pattern": "TODO"}],
}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SOOTHE_SCRIPTED_MODEL", "SOOTHE_CONFIG", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


def _config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **sections: Any) -> Path:
    """A config that sets every key the graph reads to a value that is not its default."""
    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    config: dict[str, Any] = {
        "models": {"default": "scripted:script.json"},
        "planner": {"max_iterations": 4, "max_plan_steps": 5, "transport_backoff_s": 0, "retries": 1},
        "execution": {"workspace": str(WORKSPACE), "failure_policy": "retry(2)"},
        "checkpoint": {"backend": "memory"},
        "run": {"approval": True, "synthesize": False, "intake": False},
    }
    for key, value in sections.items():
        config[key] = {**config.get(key, {}), **value}
    path = tmp_path / "soothe.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML
    monkeypatch.setenv("SOOTHE_SCRIPTED_MODEL", str(tmp_path / "script.json"))
    monkeypatch.setenv("SOOTHE_CONFIG", str(path))
    return path


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    import soothe_planner.graph as graph_door

    seen: list[dict[str, Any]] = []
    real = graph_door.build_strange_loop

    def recording(planner: Any, executor: Any, **kw: Any) -> Any:
        seen.append(kw)
        return real(planner, executor, **kw)

    monkeypatch.setattr(graph_door, "build_strange_loop", recording)
    return seen


async def _cli_graph(path: Path) -> Any:
    from soothe_planner.cli.running import graph_for as _graph

    config = load_config(path)
    async with resolve_persistence(config) as persistence:
        return _graph(config, resolve_run(config), persistence)


def _options(kw: dict[str, Any]) -> dict[str, Any]:
    """The graph's options, without persistence (the server brings its own) and the tracer instance."""
    out = {k: v for k, v in kw.items() if k not in ("checkpointer", "store", "callbacks", "iteration_ceiling")}
    out["callbacks"] = [type(c).__name__ for c in kw.get("callbacks") or ()]
    return out


async def test_the_cli_and_the_server_build_the_graph_with_the_same_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from soothe_planner.server import make_graph

    path = _config(tmp_path, monkeypatch)
    seen = _spy(monkeypatch)
    served = await make_graph()
    cli = await _cli_graph(path)
    assert len(seen) == 2
    server_kw, cli_kw = seen
    assert _options(server_kw) == _options(cli_kw)
    assert server_kw["checkpointer"] is None and cli_kw["checkpointer"] is not None
    # a server's clients may not ask the input for more iterations than the operator allows
    assert server_kw["iteration_ceiling"] == 4 and cli_kw["iteration_ceiling"] is None
    # every key of the config, as the config says it
    assert _options(server_kw) == {
        "approval": True, "synthesize": False, "intake": False, "failure_policy": "retry(2)",
        "max_iterations": 4, "max_plan_steps": 5, "context": PlanContext(workspace=str(WORKSPACE)),
        "callbacks": [], "model_name": f"scripted:{tmp_path / 'script.json'}",
        "seal_key": resolve_seal_key(load_config(path)),
    }  # fmt: skip
    assert len(server_kw["seal_key"].get()) == 64  # one key, kept outside the checkpoint, for both
    assert loop_options(load_config(path)).keys() == _options(cli_kw).keys() - {"callbacks", "model_name"}
    assert set(served.nodes) == set(cli.nodes) and "approve" in served.nodes
    assert served.config is not None and cli.config is not None
    assert served.config["recursion_limit"] == cli.config["recursion_limit"]


async def test_the_server_graph_skips_the_routing_call_when_intake_is_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from soothe_planner.server import make_graph

    _config(tmp_path, monkeypatch, run={"approval": False})
    final = await (await make_graph()).ainvoke(goal_input(GOAL, thread_id="s"), run_config("s", 4))
    assert final["status"] == "done" and final["intake"] == "complex"
    assert "src/notes.py:11: # TODO: reject empty notes" in final["final_answer"]  # synthesize: false, the step summary


@pytest.mark.usefixtures("no_langfuse_env")
async def test_the_server_graph_traces_each_run_as_the_cli_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capture: Capture
) -> None:
    from soothe_planner.server import make_graph

    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", capture.public_key)  # the capture's client, found by key
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    _config(tmp_path, monkeypatch, run={"approval": False},
            tracing={"langfuse": {"enabled": True, "tags": ["srv"], "user_id": "ops"}})
    graph = await make_graph()
    assert graph.config is not None and [type(c) for c in graph.config["callbacks"]] == [RunTracer]
    final = await graph.ainvoke(goal_input(GOAL, thread_id="t-srv"), run_config("t-srv", 4))
    assert final["status"] == "done"
    spans = capture.spans()
    roots = [name for depth, name in tree(spans) if depth == 0]
    assert roots == [f"soothe-run: {GOAL}"]
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id_for("t-srv")}
    root = next(s for s in spans if s.name == roots[0])
    assert attr(root, "session.id") == "t-srv" and attr(root, "user.id") == "ops"
    assert any(s.name == "plan-generate" for s in spans) and any(s.name == "step:find" for s in spans)


@pytest.mark.usefixtures("no_langfuse_env")
async def test_a_run_the_caller_traces_itself_is_not_traced_twice(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capture: Capture
) -> None:
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", capture.public_key)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    path = _config(tmp_path, monkeypatch, run={"approval": False}, tracing={"langfuse": {"enabled": True}})
    config = load_config(path)
    graph = resolve_run(config).graph()
    with trace_run(config, goal=GOAL, thread_id="t-cli", client=capture.client) as handle:
        await graph.ainvoke(goal_input(GOAL, thread_id="t-cli"), handle.config_for(run_config("t-cli", 4)))
    roots = [name for depth, name in tree(capture.spans()) if depth == 0]
    assert roots == [f"soothe-run: {GOAL}"]  # the caller's trace only, no second one from the graph


@pytest.mark.usefixtures("no_langfuse_env")
async def test_concurrent_runs_of_one_traced_graph_are_separate_traces_and_a_resume_joins_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capture: Capture
) -> None:
    import asyncio

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command

    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", capture.public_key)
    monkeypatch.setenv("LANGFUSE_SECRET_KEY", SECRET)
    doubled = {k: v * 2 for k, v in SCRIPT.items()}
    path = _config(tmp_path, monkeypatch, tracing={"langfuse": {"enabled": True}})  # approval on
    (tmp_path / "script.json").write_text(json.dumps(doubled))
    graph = resolve_run(load_config(path)).graph(checkpointer=InMemorySaver())
    configs = [run_config(t, 4) for t in ("t-a", "t-b")]
    paused = await asyncio.gather(*(graph.ainvoke(goal_input(GOAL, thread_id=t), c)
                                    for t, c in zip(("t-a", "t-b"), configs, strict=True)))
    assert all("__interrupt__" in p for p in paused)
    for c in configs:
        digest = (await graph.aget_state(c)).interrupts[0].value["sha256"]
        await graph.ainvoke(Command(resume={"approved": True, "sha256": digest}), c)
    spans = capture.spans()
    for thread in ("t-a", "t-b"):
        mine = [s for s in spans if format(s.context.trace_id, "032x") == trace_id_for(thread)]
        roots = [name for depth, name in tree(mine) if depth == 0]
        assert roots == [f"soothe-run: {GOAL}", "soothe-run (resumed)"], thread
        steps = [s for s in mine if s.name == "step:find" and attr(s, "langfuse.observation.type") != "generation"]
        assert len(steps) == 1, thread  # each run's step under its own trace, none under the other's
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace_id_for("t-a"), trace_id_for("t-b")}


async def test_the_server_builds_each_run_from_its_context_on_the_process_wide_parts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from soothe_planner.graph import recursion_limit_for
    from soothe_planner.server import _process, graph_for_run

    _config(tmp_path, monkeypatch, run={"approval": False},
            server={"client_context": ["approval", "max_iterations", "model"], "client_models": ["openai:gpt-4o-mini"]})
    monkeypatch.delenv("SOOTHE_SCRIPTED_MODEL")  # the model comes from the config, or the run's context
    seen = _spy(monkeypatch)
    graph = graph_for_run({"approval": True, "max_iterations": 2, "user": "x"})
    assert seen[-1]["approval"] is True and seen[-1]["max_iterations"] == 2
    assert seen[-1]["model_name"] == f"scripted:{tmp_path / 'script.json'}"  # relative to the config's folder
    assert graph.config is not None and graph.config["recursion_limit"] == recursion_limit_for(2)
    paused = await graph.ainvoke(goal_input(GOAL, thread_id="ctx"), run_config("ctx", 2))
    assert "__interrupt__" in paused and paused["status"] == "running"  # approval, from the context
    # a model the operator lists is built for the run, once, and kept for later runs (not called here)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-a-real-key")
    graph_for_run({"model": "openai:gpt-4o-mini"})
    assert seen[-1]["model_name"] == "openai:gpt-4o-mini"
    assert set(_process().pool.built) >= {"openai:gpt-4o-mini"}
    with pytest.raises(ValueError, match="run context max_iterations = 'two'"):
        graph_for_run({"max_iterations": "two"})
