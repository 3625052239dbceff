"""Why does the embedded model check its grammar after choosing a token rather than before?

The planner asks the embedded model for JSON under a schema (plans, assessments); llama-cpp-python
turns the schema into a grammar and puts the grammar sampler *first* in its sampler chain, so every
generated token first runs the grammar over the whole vocabulary (152k tokens for Qwen2.5) before
the greedy pick. On the package's 2-core benchmark machine that costs 50-60 ms a token: the 1.5B
model wrote plans at 5.2 tokens/s in the library's order and 7.2 in this one, in the same run
(``bench/RESULTS.md`` §7).

llama.cpp's own samplers do it the other way round: choose a token with the chain as if there were
no grammar, ask the grammar about that one token, and only when it refuses run the grammar over the
whole vocabulary and choose again. For greedy decoding (temperature 0, the planner's default) the
token is the same either way: the highest-scoring token the grammar allows. With sampling it is the
usual approximation llama.cpp makes. ``GrammarLastSampler`` is that order, behind the interface the
library calls (``sample(ctx, idx)``); ``SOOTHE_LLAMA_GRAMMAR_FIRST=1`` keeps the library's order.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

__all__ = ["GRAMMAR_FIRST_ENV", "GrammarLastSampler", "grammar_last_sampling"]

GRAMMAR_FIRST_ENV = "SOOTHE_LLAMA_GRAMMAR_FIRST"


class GrammarLastSampler:
    """Choose with ``chain`` (no grammar); run ``grammar`` over everything only when it refuses the choice.

    ``chain`` is the library's sampler chain built without the grammar (owned here from now on);
    ``grammar`` a raw ``llama_sampler`` pointer for the grammar (freed here). Both are told of every
    token chosen, as the library's chain would be.
    """

    def __init__(self, chain: Any, grammar: Any, n_vocab: int) -> None:
        import llama_cpp
        import numpy as np

        self._lib = llama_cpp
        self._chain = chain
        self._grammar = grammar
        self._n_vocab = n_vocab
        self._all = (llama_cpp.llama_token_data * n_vocab)()
        self._all_view = np.ctypeslib.as_array(self._all)
        self._ids = np.arange(n_vocab, dtype=np.intc)
        self._one = (llama_cpp.llama_token_data * 1)()
        self._all_arr = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._all, ctypes.POINTER(llama_cpp.llama_token_data)), size=n_vocab, selected=-1, sorted=False
        )
        self._one_arr = llama_cpp.llama_token_data_array(
            data=ctypes.cast(self._one, ctypes.POINTER(llama_cpp.llama_token_data)), size=1, selected=-1, sorted=False
        )
        self.fallbacks = 0
        """How many tokens needed the grammar over the whole vocabulary (the slow path)."""

    def _candidates(self, logits: Any) -> Any:
        view = self._all_view
        view["id"] = self._ids  # a previous pick may have sorted or cut the array: refill all of it
        view["logit"] = logits
        view["p"] = 0.0
        arr = self._all_arr
        arr.size, arr.selected, arr.sorted = self._n_vocab, -1, False
        return arr

    def _choose(self, arr: Any) -> int:
        self._lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(arr))
        return int(arr.data[arr.selected].id)

    def _grammar_allows(self, token: int) -> bool:
        one = self._one[0]
        one.id, one.logit, one.p = token, 0.0, 0.0  # type: ignore[assignment]  # ctypes converts the int
        arr = self._one_arr
        arr.size, arr.selected, arr.sorted = 1, -1, False
        self._lib.llama_sampler_apply(self._grammar, ctypes.byref(arr))
        return math.isfinite(one.logit)

    def sample(self, ctx: Any, idx: int) -> int:
        """The library's call: choose the next token from the logits of output ``idx``."""
        import numpy as np

        lib = self._lib
        logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx.ctx, idx), shape=(self._n_vocab,))
        token = self._choose(self._candidates(logits))
        if not self._grammar_allows(token):
            self.fallbacks += 1
            arr = self._candidates(logits)
            lib.llama_sampler_apply(self._grammar, ctypes.byref(arr))
            token = self._choose(arr)
        lib.llama_sampler_accept(self._grammar, token)
        lib.llama_sampler_accept(self._chain.sampler, token)
        return token

    def close(self) -> None:
        if self._grammar is not None:
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None
        self._chain.close()

    def __del__(self) -> None:
        self.close()


def grammar_last_sampling() -> None:
    """Make every llama-cpp-python model in this process check grammars after choosing (see the module docstring)."""
    import llama_cpp
    from llama_cpp.llama import Llama

    stock = Llama._init_sampler

    def init_sampler(self: Any, **kwargs: Any) -> Any:  # the library passes every setting by name
        grammar = kwargs.pop("grammar", None)
        chain = stock(self, **kwargs)
        if grammar is None:
            return chain
        pointer = llama_cpp.llama_sampler_init_grammar(
            self._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8")
        )
        if not pointer:  # llama.cpp refused the grammar: leave it to the library, as before
            chain.close()
            return stock(self, grammar=grammar, **kwargs)
        return GrammarLastSampler(chain, pointer, self._n_vocab)

    Llama._init_sampler = init_sampler  # type: ignore[method-assign,assignment]
