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
- **Prompt states kept on disk for the next server.** With ``SOOTHE_LLAMA_PROMPT_STATES`` set
  (``LocalModelServer`` sets it), the RAM prompt cache the server builds is ``PromptStates``,
  which also writes each state to that folder and finds the previous servers' states there
  (``prompt_states.py``). A state read from disk holds only its own tokens; loading it pads the
  token buffer back to the context size, and a state llama.cpp refuses is dropped (the prompt is
  then read in full).
- **Guessed tokens checked in one decode, without the logits of every prompt token.** With
  ``--draft_model`` the server guesses the next tokens and decodes them with the last one chosen,
  keeping those the model would have chosen anyway (``drafting.py``). The library's guesser is
  replaced by ``LookupDrafter``, and the library's price for guessing is not paid: it turns
  ``logits_all`` on for the whole model, so every *prompt* token's logits would be computed and
  copied again (the cost ``logits_all`` off removes). Here only the short batches of a chosen
  token and its guesses ask for every row's logits, which the sampler reads straight from the
  context; prompts keep asking for the last row only.
"""

from __future__ import annotations

import os
import runpy
import sys
from pathlib import Path
from typing import Any

import numpy as np

from soothe_planner.local.prompt_states import PROMPT_STATES_ENV, PROMPT_STATES_MIB_ENV, PromptStates
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
        except RuntimeError:  # llama.cpp refused the state: start from nothing, the prompt is read in full
            self.reset()
        finally:
            self.scores = scores
            if len(self.input_ids) < self._n_ctx:  # a state read from disk keeps only its own tokens
                ids = np.zeros(self._n_ctx, dtype=np.intc)
                ids[: len(self.input_ids)] = self.input_ids
                self.input_ids = ids

    Llama.save_state = save_state  # type: ignore[method-assign]
    Llama.load_state = load_state  # type: ignore[method-assign]


def prompt_states_on_disk() -> None:
    """With ``SOOTHE_LLAMA_PROMPT_STATES`` set, the server's RAM prompt cache also keeps its states there."""
    folder = os.environ.get(PROMPT_STATES_ENV)
    if not folder:
        return
    import llama_cpp
    from llama_cpp.llama import LlamaState

    disk = int(os.environ.get(PROMPT_STATES_MIB_ENV, "512")) << 20

    def make_state(*, input_ids: Any, n_tokens: int, llama_state: bytes, seed: int) -> Any:
        return LlamaState(input_ids=input_ids, scores=np.zeros((0, 1), dtype=np.single), n_tokens=n_tokens,
                          llama_state=llama_state, llama_state_size=len(llama_state), seed=seed)

    stock = llama_cpp.LlamaRAMCache

    def cache(capacity_bytes: int = 2 << 30) -> Any:
        try:
            return PromptStates(Path(folder), disk, ram_bytes=capacity_bytes, make_state=make_state)
        except OSError as exc:  # a folder it cannot make or read: the RAM cache alone, as before
            print(f"prompt states stay in RAM: {folder}: {exc}", file=sys.stderr)
            return stock(capacity_bytes=capacity_bytes)

    llama_cpp.LlamaRAMCache = cache  # type: ignore[misc,assignment]  # what the server builds for --cache_type ram


def lean_drafting() -> None:
    """``--draft_model`` guesses with ``LookupDrafter`` and keeps ``logits_all`` as asked (see the module docstring)."""
    import llama_cpp.llama_speculative as speculative
    from llama_cpp.llama import Llama

    from soothe_planner.local.drafting import LookupDrafter

    class Drafter(speculative.LlamaDraftModel):
        def __init__(self, num_pred_tokens: int = 8, **_: Any) -> None:
            self.drafter = LookupDrafter(max_tokens=num_pred_tokens)
            self.max_tokens = num_pred_tokens

        def __call__(self, input_ids: Any, /, **kwargs: Any) -> Any:
            return self.drafter(input_ids)

    speculative.LlamaPromptLookupDecoding = Drafter  # type: ignore[misc,assignment]  # what the server builds
    stock_init, stock_eval = Llama.__init__, Llama.eval

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        stock_init(self, *args, **kwargs)
        if self.draft_model is not None:
            self._logits_all = bool(kwargs.get("logits_all", False))  # the library forces it on

    def eval(self: Any, tokens: Any) -> None:
        draft = self.draft_model
        if draft is None or self._logits_all or not 1 < len(tokens) <= 1 + draft.max_tokens:
            stock_eval(self, tokens)
            return
        # a chosen token and its guesses: every row's logits, kept in the context only
        self._ctx.kv_cache_seq_rm(-1, self.n_tokens, -1)
        self._batch.set_batch(batch=tokens, n_past=self.n_tokens, logits_all=True)
        self._ctx.decode(self._batch)
        self.input_ids[self.n_tokens : self.n_tokens + len(tokens)] = tokens
        self.n_tokens += len(tokens)
        self._requires_eval = False

    Llama.__init__ = init  # type: ignore[method-assign]
    Llama.eval = eval  # type: ignore[method-assign]


def main() -> None:
    if os.environ.get(EXTRA_BUFTS_ENV) != "1":
        disable_extra_buffer_types()
    lean_prompt_cache()
    prompt_states_on_disk()
    lean_drafting()
    if os.environ.get(GRAMMAR_FIRST_ENV) != "1":
        grammar_last_sampling()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
