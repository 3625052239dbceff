"""The embedded model's server settings: threads, tuning flags, launcher patches, model names, sampling."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from soothe_planner.errors import ConfigError
from soothe_planner.local import threads
from soothe_planner.local.embedded import MODEL_SHA256, LocalModelServer

# --------------------------------------------------------------------------- threads and buffers


def test_launcher_turns_off_extra_buffer_types(monkeypatch: pytest.MonkeyPatch) -> None:
    bindings = pytest.importorskip("llama_cpp.llama_cpp", reason="needs the `local` extra (llama-cpp-python)")
    from soothe_planner.local.launcher import disable_extra_buffer_types

    monkeypatch.setattr(bindings, "llama_model_default_params", bindings.llama_model_default_params)
    assert bindings.llama_model_default_params().use_extra_bufts is True
    disable_extra_buffer_types()
    assert bindings.llama_model_default_params().use_extra_bufts is False


def _topology(root: Path, siblings: dict[int, str]) -> Path:
    for cpu, sib in siblings.items():
        folder = root / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "thread_siblings_list").write_text(sib + "\n")
    return root


def test_physical_cores_counts_hyper_threads_of_one_core_once(tmp_path: Path) -> None:
    ht = _topology(tmp_path / "ht", {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"})
    assert threads.physical_cores(range(4), ht) == 2
    assert threads.physical_cores({0, 2}, ht) == 1  # the process may run on one core's two threads only
    plain = _topology(tmp_path / "plain", {0: "0", 1: "1"})
    assert threads.physical_cores(range(2), plain) == 2
    assert threads.physical_cores(range(3), plain) is None  # cpu2 has no topology: unknown, not a guess


def test_cpu_quota_reads_cgroup_v2_cpu_max(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert threads.cpu_quota(tmp_path) == 2
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert threads.cpu_quota(tmp_path) is None
    assert threads.cpu_quota(tmp_path / "absent") is None


def test_thread_count_defaults_to_the_physical_cores_within_the_quota_and_honours_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("SOOTHE_LLM_THREADS", raising=False)
    monkeypatch.setattr(threads, "physical_cores", lambda: 2)
    monkeypatch.setattr(threads, "cpu_quota", lambda: None)
    assert threads.default_threads() == 2  # an idle 2-core machine: both cores (two threads beat one)
    monkeypatch.setattr(threads, "cpu_quota", lambda: 1)
    assert threads.default_threads() == 1  # a container allowed one CPU
    monkeypatch.setattr(threads, "physical_cores", lambda: None)
    monkeypatch.setattr(threads, "cpu_quota", lambda: None)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 8)
    assert threads.default_threads() == 4  # topology unknown: half the logical CPUs
    monkeypatch.setenv("SOOTHE_LLM_THREADS", "3")
    assert threads.default_threads() == 3
    argv = LocalModelServer(Path("m.gguf"), port=1).argv()
    assert argv[argv.index("--n_threads") + 1] == "3" and argv[argv.index("--n_threads_batch") + 1] == "3"


# --------------------------------------------------------------------------- server settings


def test_server_flags_come_from_its_tuning_and_the_stock_settings_stay_measurable() -> None:
    from soothe_planner.local.tuning import ServerTuning

    argv = LocalModelServer(Path("m.gguf"), port=1, n_threads=1).argv()
    flag = {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}
    tuned = ServerTuning()
    assert flag["--logits_all"] == "False" and flag["--n_batch"] == str(tuned.n_batch)
    assert flag["--cache"] == "True" and flag["--cache_size"] == str(tuned.prompt_cache_mib << 20)
    stock = LocalModelServer(Path("m.gguf"), port=1, tuning=ServerTuning.stock(), n_ctx=8192).argv()
    assert "--cache" not in stock and stock[stock.index("--logits_all") + 1] == "True"
    assert stock[stock.index("--n_ctx") + 1] == "8192"  # n_ctx= still wins, as before tuning existed


@pytest.mark.parametrize(("stock", "user", "seen"), [(False, None, None), (False, "1", "1"), (True, None, "1")])
def test_the_grammar_order_reaches_the_launcher_and_a_users_choice_is_kept(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stock: bool, user: str | None, seen: str | None
) -> None:
    import subprocess

    from soothe_planner.local.sampling import GRAMMAR_FIRST_ENV
    from soothe_planner.local.tuning import ServerTuning

    if user is None:
        monkeypatch.delenv(GRAMMAR_FIRST_ENV, raising=False)
    else:
        monkeypatch.setenv(GRAMMAR_FIRST_ENV, user)
    got: dict[str, Any] = {}

    def popen(argv: list[str], **kwargs: Any) -> None:
        got.update(kwargs["env"])
        raise OSError("not started in this test")

    monkeypatch.setattr(subprocess, "Popen", popen)
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    server = LocalModelServer(model, port=1, tuning=ServerTuning.stock() if stock else ServerTuning())
    with pytest.raises(OSError, match="not started"):
        server.start()
    assert got.get(GRAMMAR_FIRST_ENV) == seen and got["PATH"] == os.environ["PATH"]


@pytest.mark.parametrize(("changes", "message"), [
    ({"n_batch": 0}, r"n_batch must be >= 1, got 0"),
    ({"n_batch": 256, "n_ubatch": 512}, r"n_ubatch \(512\) must be <= n_batch \(256\)"),
    ({"prompt_cache_mib": -1}, r"prompt_cache_mib must be >= 0 \(0 turns it off\), got -1"),
])
def test_bad_server_settings_are_refused_naming_the_value_and_the_rule(changes: dict[str, int], message: str) -> None:
    from soothe_planner.local.tuning import ServerTuning

    with pytest.raises(ValueError, match=message):
        ServerTuning().with_(**changes)


def test_the_prompt_cache_keeps_kv_states_without_the_logits_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    llama_module = pytest.importorskip("llama_cpp.llama", reason="needs the `local` extra (llama-cpp-python)")
    import numpy as np

    from soothe_planner.local.launcher import lean_prompt_cache

    llama_cls = llama_module.Llama
    seen: dict[str, object] = {}

    def stock_save(self: object) -> object:
        seen["saved_rows"] = len(self._scores)  # type: ignore[attr-defined]
        return llama_module.LlamaState(np.zeros(4, dtype=np.intc), self._scores.copy(), 3, b"kv", 2, 0)  # type: ignore[attr-defined]

    def stock_load(self: object, state: object) -> None:
        self.scores[: state.n_tokens, :] = state.scores.copy()  # type: ignore[attr-defined]  # the library's own line
        self.input_ids = state.input_ids.copy()  # type: ignore[attr-defined]  # and this one
        seen["loaded"] = True

    monkeypatch.setattr(llama_cls, "save_state", stock_save)
    monkeypatch.setattr(llama_cls, "load_state", stock_load)
    lean_prompt_cache()
    model = object.__new__(llama_cls)  # no weights: only the attributes the cache touches
    model.scores, model.n_tokens, model._logits_all = np.ones((8, 5), dtype=np.single), 3, False
    model.input_ids, model._n_ctx = np.zeros(8, dtype=np.intc), 8
    model._stack = contextlib.ExitStack()  # what the library closes when the object goes away
    state = llama_cls.save_state(model)
    assert seen["saved_rows"] == 0 and len(state.scores) == 0 and model.scores.shape == (8, 5)
    llama_cls.load_state(model, state)  # the stock code would fail to broadcast an empty buffer
    assert seen["loaded"] and model.scores.shape == (8, 5)
    assert model.input_ids.shape == (8,)  # the state held 4 token slots (as one read from disk): padded to n_ctx

    def refused(self: object, state: object) -> None:
        self.input_ids = state.input_ids.copy()  # type: ignore[attr-defined]  # the library sets these first
        self.n_tokens = 3  # type: ignore[attr-defined]
        raise RuntimeError("Failed to set llama state data")  # llama.cpp refused it (another model's, say)

    monkeypatch.setattr(llama_cls, "load_state", refused)
    lean_prompt_cache()
    model._is_recurrent = model._is_hybrid = False
    llama_cls.load_state(model, state)  # no error: the prompt will be read in full
    assert model.n_tokens == 0 and model.input_ids.shape == (8,) and model.scores.shape == (8, 5)
    model._logits_all, model.n_tokens = True, 3  # logprobs need every row: the library's behaviour is kept
    assert len(llama_cls.save_state(model).scores) == 3


def test_the_embedded_models_are_named_and_an_unknown_name_lists_them() -> None:
    from soothe_planner.config.providers import check_model_spec
    from soothe_planner.local import EMBEDDED_MODELS, embedded_model

    assert embedded_model("") is embedded_model("0.5b") and embedded_model("").sha256 == MODEL_SHA256
    big = embedded_model("1.5B")
    assert (big.size, len(big.packages), big.filename) == (1_117_320_768, 22, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
    assert len({m.sha256 for m in EMBEDDED_MODELS.values()}) == len(EMBEDDED_MODELS)
    with pytest.raises(ConfigError, match=r"unknown embedded model '7b'.*'local:0\.5b', 'local:1\.5b'"):
        embedded_model("7b")
    assert check_model_spec("local:1.5b") == "local:1.5b"
    with pytest.raises(ValueError, match="unknown embedded model '3b'"):
        check_model_spec("local:3b")


def test_a_missing_part_of_the_larger_model_names_its_package_and_extra() -> None:
    from soothe_planner.local import embedded_model, part_files

    big = embedded_model("1.5b")
    missing = [p for p in big.packages if importlib.util.find_spec(p.replace("-", "_")) is None]
    if not missing:
        pytest.skip("the 1.5B parts are installed here")
    with pytest.raises(ConfigError, match=rf"needs the package {big.packages[0]}.*soothe-planner\[local-1-5b\]"):
        part_files(big)


def test_the_server_serves_the_model_it_was_given_under_its_alias() -> None:
    from soothe_planner.local import LocalModelServer, embedded_model

    argv = LocalModelServer(Path("m.gguf"), port=1, model=embedded_model("1.5b")).argv()
    assert argv[argv.index("--model_alias") + 1] == "qwen2.5-coder-1.5b-instruct"


class _FakeSamplers:
    """llama.cpp's sampler calls, in Python: the chain is greedy, the grammar allows ``allowed`` tokens."""

    def __init__(self, lib: Any, logits: list[float], allowed: set[int]) -> None:
        import ctypes

        self._lib, self.allowed, self.accepted = lib, allowed, {"chain": [], "grammar": []}
        self.llama_token_data = lib.llama_token_data
        self._logits = (ctypes.c_float * len(logits))(*logits)
        self.grammar_passes: list[int] = []  # the size of every array the grammar was run over

    def llama_get_logits_ith(self, ctx: object, idx: int) -> object:
        import ctypes

        return ctypes.cast(self._logits, ctypes.POINTER(ctypes.c_float))

    def llama_sampler_apply(self, sampler: object, arr_ref: Any) -> None:
        arr = arr_ref._obj
        items = [arr.data[i] for i in range(arr.size)]
        if sampler == "grammar":
            self.grammar_passes.append(arr.size)
            for item in items:
                if item.id not in self.allowed:
                    item.logit = float("-inf")
            return
        arr.selected = max(range(arr.size), key=lambda i: items[i].logit)

    def llama_sampler_accept(self, sampler: object, token: int) -> None:
        self.accepted["grammar" if sampler == "grammar" else "chain"].append(token)

    def llama_sampler_free(self, sampler: object) -> None:
        pass


@pytest.mark.parametrize(("allowed", "token", "passes"), [
    ({0, 3}, 3, [1]),  # the best token is allowed: the grammar looks at that one token only
    ({0, 1}, 1, [1, 5]),  # refused: the grammar runs over all five, and the best it allows is chosen
])
def test_a_grammar_is_asked_about_the_chosen_token_and_over_everything_only_when_it_refuses(
    allowed: set[int], token: int, passes: list[int]
) -> None:
    llama_cpp = pytest.importorskip("llama_cpp", reason="needs the `local` extra (llama-cpp-python)")
    from types import SimpleNamespace

    from soothe_planner.local.sampling import GrammarLastSampler

    chain = SimpleNamespace(sampler="chain", close=lambda: None)
    sampler = GrammarLastSampler(chain, "grammar", n_vocab=5)
    fake = _FakeSamplers(llama_cpp, [0.1, 0.5, 0.2, 0.9, 0.3], allowed)
    sampler._lib = fake  # type: ignore[assignment]
    assert sampler.sample(SimpleNamespace(ctx=None), -1) == token
    assert fake.grammar_passes == passes and sampler.fallbacks == len(passes) - 1
    assert fake.accepted == {"chain": [token], "grammar": [token]}  # both learn the token, once
    fake.grammar_passes.clear()
    assert sampler.sample(SimpleNamespace(ctx=None), -1) == token  # a second token: the arrays are refilled
    assert fake.grammar_passes == passes


def test_a_grammar_llama_cpp_refuses_is_left_to_the_library(monkeypatch: pytest.MonkeyPatch) -> None:
    llama_cpp = pytest.importorskip("llama_cpp", reason="needs the `local` extra (llama-cpp-python)")
    from types import SimpleNamespace

    from llama_cpp.llama import Llama

    from soothe_planner.local.sampling import GrammarLastSampler, grammar_last_sampling

    built: list[object] = []

    def stock(self: object, **kwargs: Any) -> object:
        chain = SimpleNamespace(sampler="chain", grammar=kwargs.get("grammar"), closed=False)
        chain.close = lambda: setattr(chain, "closed", True)  # type: ignore[attr-defined]
        built.append(chain)
        return chain

    monkeypatch.setattr(Llama, "_init_sampler", stock)
    grammar_last_sampling()
    model = SimpleNamespace(_model=SimpleNamespace(vocab=None), _n_vocab=5)
    grammar = SimpleNamespace(_grammar="root ::= x", _root="root")
    monkeypatch.setattr(llama_cpp, "llama_sampler_init_grammar", lambda *a: "grammar")
    sampler = Llama._init_sampler(model, grammar=grammar, temp=0.0)
    assert isinstance(sampler, GrammarLastSampler)
    sampler._grammar = None  # a fake pointer: nothing for llama.cpp to free
    assert built[-1].grammar is None  # type: ignore[attr-defined]  # the chain itself has no grammar
    monkeypatch.setattr(llama_cpp, "llama_sampler_init_grammar", lambda *a: None)
    chain = Llama._init_sampler(model, grammar=grammar, temp=0.0)
    assert chain.grammar is grammar and built[-2].closed  # type: ignore[attr-defined]


def test_the_guessed_tokens_come_from_the_environment_for_a_default_server(monkeypatch: pytest.MonkeyPatch) -> None:
    from soothe_planner.errors import ConfigError
    from soothe_planner.local.tuning import ServerTuning

    monkeypatch.delenv("SOOTHE_LLM_DRAFT_TOKENS", raising=False)
    argv = LocalModelServer(Path("m.gguf"), port=1).argv()
    assert argv[argv.index("--draft_model_num_pred_tokens") + 1] == str(ServerTuning().draft_tokens)
    monkeypatch.setenv("SOOTHE_LLM_DRAFT_TOKENS", "0")
    assert "--draft_model" not in LocalModelServer(Path("m.gguf"), port=1).argv()  # a host where guessing costs
    assert "--draft_model" in LocalModelServer(Path("m.gguf"), port=1, tuning=ServerTuning()).argv()  # given: kept
    monkeypatch.setenv("SOOTHE_LLM_DRAFT_TOKENS", "two")
    with pytest.raises(ConfigError, match=r"SOOTHE_LLM_DRAFT_TOKENS='two': give a whole number of tokens >= 0"):
        LocalModelServer(Path("m.gguf"), port=1)
