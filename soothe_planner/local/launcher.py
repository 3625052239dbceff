"""Why does the embedded model start through this module rather than ``python -m llama_cpp.server``?

Three changes to llama-cpp-python (0.3.x) that its server's flags cannot make; after them the stock
server runs unchanged, with the same command-line flags.

- **No extra buffer types.** llama.cpp may move weights into "extra buffer types" (repacked
  layouts for the CPU's matrix units). On CPUs with AMX, llama-cpp-python 0.3.36 built for the
  host crashes (SIGSEGV) in the first batched decode of this model — any prompt longer than one
  token — while single-token decoding works (seen again on this package's 2-core benchmark
  machine). Turning the extra buffers off (``use_extra_bufts = False``, a llama.cpp model
  parameter the Python server does not expose) avoids that code path. Tried on that machine with
  the 1.5B and dropped: sending only the Q4_K weights to the AMX buffer (a tensor override)
  crashes the same way, and the other extra buffer, CPU_REPACK, given the Q4_K weights, was no
  faster (prompt 50-57 vs 59-62 tokens/s, generation 8.3-9.2 vs 9.5-9.7 tokens/s, two threads).
  ``SOOTHE_LLAMA_EXTRA_BUFTS=1`` keeps llama.cpp's default, for machines where it works.
- **A prompt cache that holds KV states, not logits.** With ``--cache`` the server saves the model
  state after every request so that a later prompt sharing a prefix can restore it. Each saved
  state also carries a copy of the Python-side logits buffer — up to ``n_batch`` rows of 152k
  floats, about 300 MB for this model, on every request — which the cache's size limit does not
  count. With ``logits_all`` off those rows are never read again: sampling uses the context's own
  logits, and a restored state is always re-evaluated from at least its last token before
  anything is sampled. So the saved state keeps the KV cache and drops that buffer; with
  ``logits_all`` on, the library's own behaviour is kept.
- **Grammars checked after the choice, not before.** Under a JSON schema the library runs the
  grammar over the whole vocabulary for every token; ``sampling.py`` chooses first and asks the
  grammar about that token (the same token under greedy decoding, 1.25-1.4x faster generation
  of plans and assessments). ``SOOTHE_LLAMA_GRAMMAR_FIRST=1`` keeps the library's order.
"""

from __future__ import annotations

import os
import runpy
from typing import Any

from soothe_planner.local.sampling import GRAMMAR_FIRST_ENV, grammar_last_sampling

EXTRA_BUFTS_ENV = "SOOTHE_LLAMA_EXTRA_BUFTS"


def disable_extra_buffer_types() -> None:
    """Make every model llama-cpp-python loads in this process skip the extra buffer types."""
    import llama_cpp.llama_cpp as bindings

    stock = bindings.llama_model_default_params

    def params() -> Any:
        value = stock()
        value.use_extra_bufts = False
        return value

    bindings.llama_model_default_params = params


def lean_prompt_cache() -> None:
    """Saved states keep no logits rows when ``logits_all`` is off (see the module docstring)."""
    from llama_cpp.llama import Llama

    stock_save, stock_load = Llama.save_state, Llama.load_state

    def save_state(self: Any) -> Any:
        if self._logits_all:
            return stock_save(self)
        scores = self.scores
        self.scores = scores[:0]  # the library copies scores[:n_tokens]: nothing
        try:
            return stock_save(self)
        finally:
            self.scores = scores

    def load_state(self: Any, state: Any) -> None:
        if self._logits_all or len(state.scores):
            stock_load(self, state)
            return
        scores = self.scores
        self.scores = scores[:0]  # the library writes the saved rows back: there are none
        try:
            stock_load(self, state)
        finally:
            self.scores = scores

    Llama.save_state = save_state  # type: ignore[method-assign]
    Llama.load_state = load_state  # type: ignore[method-assign]


def main() -> None:
    if os.environ.get(EXTRA_BUFTS_ENV) != "1":
        disable_extra_buffer_types()
    lean_prompt_cache()
    if os.environ.get(GRAMMAR_FIRST_ENV) != "1":
        grammar_last_sampling()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
