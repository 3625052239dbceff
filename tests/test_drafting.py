"""Guessing the next tokens from the prompt (``local/drafting.py``)."""

from __future__ import annotations

import pytest

np = pytest.importorskip("numpy", reason="needs the 'local' extra: pip install -e '.[local]'")

from soothe_planner.local.drafting import LookupDrafter  # noqa: E402 (after the skip)


def ids(*tokens: int) -> np.ndarray:
    return np.array(tokens, dtype=np.intc)


def test_the_guess_continues_the_latest_earlier_copy_of_the_longest_matching_suffix() -> None:
    drafter = LookupDrafter(4, min_match=2)
    # "5 6" occurs at 0 (then 1 1) and at 6 (then 3 3 3): the latest copy wins; "7 5 6" at 5 is longer still
    text = ids(5, 6, 1, 1, 9, 7, 5, 6, 3, 3, 3, 8, 7, 5, 6)
    assert list(drafter(text)) == [3, 3]  # length starts at half of max_tokens


def test_no_guess_without_a_long_enough_match() -> None:
    drafter = LookupDrafter(4, min_match=3)
    assert len(drafter(ids(1, 2, 3, 9, 2, 3))) == 0  # "2 3" matches, but 3 tokens are needed
    assert drafter.guessed == 0


def test_a_guess_taken_whole_doubles_the_next_one_and_a_miss_shrinks_it() -> None:
    drafter = LookupDrafter(8, min_match=2)
    source = [1, 2, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    text = [*source, 0, 1, 2]
    assert list(drafter(ids(*text))) == [10, 11, 12, 13]
    text += [10, 11, 12, 13, 14]  # all four taken, and the model's own next token
    assert list(drafter(ids(*text))) == [15, 16, 17, 18, 19, 0, 1, 2]  # doubled to 8, read on past the copy
    assert drafter.taken == 4
    text += [15, 16, 99]  # two taken, then another token
    drafter(ids(*text))
    assert drafter.taken == 6 and drafter.length == 2


def test_another_request_starts_the_guess_length_over() -> None:
    drafter = LookupDrafter(8, min_match=2)
    drafter(ids(1, 2, 3, 4, 5, 1, 2))
    drafter.length = 1
    drafter(ids(*range(40), 7, 8))  # not a continuation of the last text
    assert drafter.length == 4


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"max_tokens": 0}, r"max_tokens must be >= 1, got 0"),
    ({"max_tokens": 4, "min_match": 5, "max_match": 3}, r"1 <= min_match <= max_match, got 5 and 3"),
])
def test_bad_settings_are_refused_naming_them(kwargs: dict[str, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LookupDrafter(**kwargs)


def test_the_launcher_guesses_with_the_lookup_drafter_and_keeps_logits_all_off(monkeypatch: pytest.MonkeyPatch) -> None:
    speculative = pytest.importorskip("llama_cpp.llama_speculative", reason="needs the `local` extra")
    from llama_cpp.llama import Llama

    from soothe_planner.local.launcher import lean_drafting

    calls: list[tuple[str, object]] = []

    def stock_init(self: object, *args: object, **kwargs: object) -> None:
        self.draft_model = kwargs.get("draft_model")  # type: ignore[attr-defined]
        self._logits_all = True if self.draft_model is not None else kwargs.get("logits_all", False)  # type: ignore[attr-defined]  # the library's rule

    def stock_eval(self: object, tokens: list[int]) -> None:
        calls.append(("stock", len(tokens)))

    monkeypatch.setattr(speculative, "LlamaPromptLookupDecoding", speculative.LlamaPromptLookupDecoding)
    monkeypatch.setattr(Llama, "__init__", stock_init)
    monkeypatch.setattr(Llama, "eval", stock_eval)
    monkeypatch.setattr(Llama, "__del__", lambda self: None, raising=False)
    lean_drafting()
    draft = speculative.LlamaPromptLookupDecoding(num_pred_tokens=4)  # what the server builds for --draft_model
    assert isinstance(draft.drafter, LookupDrafter) and draft.drafter.max_tokens == 4

    class Batch:
        def set_batch(self, batch: list[int], n_past: int, logits_all: bool) -> None:
            calls.append(("batch", (list(batch), n_past, logits_all)))

    class Ctx:
        def kv_cache_seq_rm(self, *args: int) -> None:
            calls.append(("rm", args))

        def decode(self, batch: Batch) -> None:
            calls.append(("decode", None))

    model = Llama("m.gguf", draft_model=draft, logits_all=False)
    assert model._logits_all is False  # prompts keep asking for the last row only
    model._batch, model._ctx, model.n_tokens = Batch(), Ctx(), 10
    model.input_ids = np.zeros(32, dtype=np.intc)
    model.eval([5, 6, 7])  # a chosen token and two guesses: every row's logits
    assert ("batch", ([5, 6, 7], 10, True)) in calls and ("rm", (-1, 10, -1)) in calls
    assert model.n_tokens == 13 and list(model.input_ids[10:13]) == [5, 6, 7] and model._requires_eval is False
    calls.clear()
    model.eval(list(range(20)))  # a prompt: the library's own eval (last row only)
    model.eval([9])
    assert calls == [("stock", 20), ("stock", 1)]
    assert Llama("m.gguf", logits_all=False)._logits_all is False and Llama("m.gguf", draft_model=draft, logits_all=True)._logits_all
