"""The embedded model for real: it plans into a valid DAG, and a whole run ends as done or failed, never a crash.

Slow (each model call takes seconds on two cores) and needs the ``local`` extra, so these tests are
marked ``real_model`` and skipped, with the reason, where llama-cpp-python or the model parts are
missing. Run them with ``pytest -m real_model tests/test_real_model.py``. One server is started
for the module and shared through ``SOOTHE_LOCAL_LLM_URL``, the same hook users have for reusing a
running server.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from soothe_planner.errors import ConfigError

pytestmark = pytest.mark.real_model

ROOT = Path(__file__).resolve().parents[1]
GOAL = "Find the TODO lines in the workspace and summarise them"
README_GOAL = "Find every line containing TODO in the workspace and write those lines to TODO_REPORT.md"
"""The goal of the README's first command (``tests/test_readme.py`` holds the two to one text)."""
TODO_LINES = ("reject empty notes", "make the search case-insensitive", "explain how to run the tests",
              "sync between two machines", "decide whether tags are case-sensitive")
MODEL = "1.5b"  # what config/default.yaml and config/ci.yaml run on


def _skip_reason() -> str | None:
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python is not installed (pip install 'soothe-planner[local]')"
    from soothe_planner.local import embedded_model, part_files

    try:
        part_files(embedded_model(MODEL))
    except ConfigError as exc:
        return str(exc)
    return None


def embedded_server() -> Iterator[str]:
    """A server of MODEL for a module's fixture (skipped, with the reason, where it cannot run)."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    from soothe_planner.local import LocalModelServer, embedded_model

    with LocalModelServer(model=embedded_model(MODEL)) as server:
        yield server.base_url


def point_at(url: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Make every ``local`` model of the test use the server at ``url``, whatever the environment says."""
    monkeypatch.setenv("SOOTHE_LOCAL_LLM_URL", url)
    monkeypatch.delenv("SOOTHE_CI_MODEL", raising=False)
    monkeypatch.delenv("SOOTHE_SCRIPTED_MODEL", raising=False)
    return url


@pytest.fixture(scope="module")
def local_server() -> Iterator[str]:
    yield from embedded_server()


@pytest.fixture
def use_server(local_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    return point_at(local_server, monkeypatch)


async def test_embedded_model_plans_a_goal_into_a_valid_dag(use_server: str) -> None:
    from soothe_planner.config import load_config, resolve_run
    from soothe_planner.dag import validate_steps
    from soothe_planner.graph.loop import offered_context
    from soothe_planner.models import PlanContext

    config = load_config(ROOT / "config" / "ci.yaml")
    run = resolve_run(config)
    context = offered_context(run.executor, PlanContext(workspace=str(config.execution.workspace)))
    plan = await run.planner.create_plan(GOAL, context)
    assert 1 <= len(plan.steps) <= config.planner.max_plan_steps
    allowed = {c.name for c in context.available_capabilities}
    assert validate_steps(plan.steps, max_steps=config.planner.max_plan_steps, allowed_capabilities=allowed) == []


def test_a_full_run_of_the_sample_goal_ends_done_or_failed(use_server: str, capsys: pytest.CaptureFixture[str]) -> None:
    from soothe_planner.cli import main

    code = main(["run", "--json", "--config", str(ROOT / "config" / "ci.yaml"), GOAL])
    captured = capsys.readouterr()
    assert code in (0, 1), captured.err
    report = json.loads(captured.out)
    assert report["status"] == ("done" if code == 0 else "failed")
    ids = {s["id"] for s in report["steps"]}
    for step in report["steps"]:
        assert step["status"] in {"pending", "completed", "failed", "skipped"}
        assert set(step["depends_on"]) <= ids  # no plan with a dangling dependency was accepted



def test_checking_the_grammar_after_the_choice_gives_the_same_greedy_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """The launcher's sampler order (``local/sampling.py``) against the library's, on the embedded model in-process."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    import llama_cpp.llama_cpp as bindings
    from llama_cpp import Llama, LlamaGrammar

    from soothe_planner.local import embedded_model, ensure_model_file
    from soothe_planner.local.launcher import disable_extra_buffer_types
    from soothe_planner.local.sampling import GrammarLastSampler, grammar_last_sampling

    monkeypatch.setattr(bindings, "llama_model_default_params", bindings.llama_model_default_params)
    monkeypatch.setattr(Llama, "_init_sampler", Llama._init_sampler)  # both patches undone after the test
    disable_extra_buffer_types()
    model = Llama(str(ensure_model_file(model=embedded_model(MODEL))), n_ctx=1024, n_threads=2, verbose=False)
    tools = ["search_text", "read_file", "write_file"]
    schema = {"type": "object", "required": ["steps"], "properties": {"steps": {"type": "array", "items": {
        "type": "object", "required": ["id", "tool", "why"],
        "properties": {"id": {"type": "string"}, "tool": {"enum": tools}, "why": {"type": "string"}}}}}}
    grammar = LlamaGrammar.from_json_schema(json.dumps(schema), verbose=False)
    messages = [{"role": "user", "content": f"Plan three steps to list the TODO lines of a repository in REPORT.md. "
                 f"Tools: {', '.join(tools)}, list_files. Answer as JSON."}]

    def answer() -> str:
        model.reset()  # the whole prompt evaluated afresh: a reused prefix can tip a near-tie another way
        reply = model.create_chat_completion(messages, temperature=0, max_tokens=96, grammar=grammar)
        return str(reply["choices"][0]["message"]["content"])

    stock = answer()
    grammar_last_sampling()
    assert isinstance(model._init_sampler(grammar=grammar), GrammarLastSampler)
    assert answer() == stock  # greedy: the best token the grammar allows, whichever order finds it
    plan = json.loads(stock) if stock.rstrip().endswith("}") else None
    assert plan is None or all(step["tool"] in tools for step in plan["steps"])


def test_a_prompt_state_saved_by_one_model_is_restored_by_the_next_with_the_same_answer(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """``local/prompt_states.py`` with the launcher's patches, on the embedded model in-process: two "servers"."""
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    import llama_cpp
    import llama_cpp.llama_cpp as bindings
    from llama_cpp import Llama

    from soothe_planner.local import embedded_model, ensure_model_file
    from soothe_planner.local.launcher import (
        disable_extra_buffer_types,
        lean_prompt_cache,
        prompt_states_on_disk,
    )
    from soothe_planner.local.prompt_states import PROMPT_STATES_ENV

    for owner, name in ((bindings, "llama_model_default_params"), (Llama, "save_state"), (Llama, "load_state"),
                        (llama_cpp, "LlamaRAMCache")):
        monkeypatch.setattr(owner, name, getattr(owner, name))  # every patch undone after the test
    monkeypatch.setenv(PROMPT_STATES_ENV, str(tmp_path))
    disable_extra_buffer_types()
    lean_prompt_cache()
    prompt_states_on_disk()
    path = str(ensure_model_file(model=embedded_model(MODEL)))
    briefing = "You list files. " + " ".join(f"Rule {i}: keep the answer short." for i in range(20))
    ask = [{"role": "system", "content": briefing}, {"role": "user", "content": "Name two files of a Python repo."}]

    def server() -> tuple[Llama, object]:
        model = Llama(path, n_ctx=1024, n_threads=2, verbose=False, logits_all=False)
        cache = llama_cpp.LlamaRAMCache(capacity_bytes=256 << 20)  # what the server builds
        model.set_cache(cache)
        return model, cache

    first, cache = server()
    before = first.create_chat_completion(ask, temperature=0, max_tokens=24)["choices"][0]["message"]["content"]
    cache.flush()  # type: ignore[attr-defined]
    assert list(tmp_path.glob("*.npz"))
    second, restored = server()
    after = second.create_chat_completion(ask, temperature=0, max_tokens=24)["choices"][0]["message"]["content"]
    assert restored.loaded == 1  # type: ignore[attr-defined]
    assert second.input_ids.shape == (1024,) and after == before
