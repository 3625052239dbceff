"""Which settings does the embedded model's server run with, and why these?

Every number below was chosen by ``python -m bench local`` (``bench/RESULTS.md`` §7) on a 2-core
machine, first for Qwen2.5-Coder-0.5B Q4_K_M, then checked one setting at a time on the shipped
1.5B and its compact prompts (``--sweep``: ``logits_all`` off read prompts about 15% faster, no
batch or context size beat 512 / 512 / 4096 beyond the run's drift, and with the RAM cache off the
loop's interleaving left nothing to reuse):

- ``logits_all``: the stock server keeps the logits of *every* prompt token (152k floats each) for
  ``logprobs``, which the planner never asks for. Computing and copying them is paid on every
  prompt token; off, only the last token's logits are made.
- ``n_batch`` / ``n_ubatch``: how many prompt tokens one decode takes.
- ``prompt_cache_mib``: llama-cpp-python keeps one KV state — the previous request's — and reuses
  its longest common prefix with the next prompt. The loop interleaves kinds of call (assess,
  generate, a model step, assess, ...), each with its own system prompt, so that one state
  almost never matches. The server's RAM cache keeps the state after each request, keyed by its
  tokens, and restores the one with the longest common prefix: each kind of call finds its own
  system prompt, schema and goal already evaluated. The size bounds the KV states kept (the
  launcher keeps the cache from also copying the logits buffer into every entry: see
  ``launcher.py``).
- ``prompt_states_mib``: the disk the cache's states may take in a folder beside the model, where
  the next server finds them (``prompt_states.py``): a new process's first call of each kind
  restores the last run's briefing instead of reading it again. Only with the RAM cache on.
- ``draft_tokens``: guess up to this many next tokens from the text so far and check them in the
  decode of the last chosen token (``drafting.py``). A decode of 5 tokens costs about 2.2 of one
  on two cores (197 vs 87 ms; 8 tokens cost 7 — a slower kernel from there), so guesses stay
  short: with 4, plans were written at 13.3 tokens/s against 9.7 without, 2 gave 11.7; model steps
  and assessments within noise (``--sweep``).
- ``grammar_last``: under a JSON schema, choose a token first and ask the grammar about that one
  token, rather than run the grammar over the whole vocabulary for every token (``sampling.py``;
  the same token under greedy decoding, generation 1.25-1.4x faster on the 1.5B).
- ``n_ctx``: the planner's prompt budget (6000 tokens by default, 1500–2500 in practice here)
  plus the longest answer; a larger context costs memory, not time, for a model this small.

``ServerTuning.stock()`` is the server as this package ran it before these measurements, kept
so the benchmark can measure before and after in one run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

__all__ = ["ServerTuning"]


@dataclass(frozen=True)
class ServerTuning:
    """The llama-cpp-python server's settings for the embedded model (threads come separately)."""

    n_ctx: int = 4096
    n_batch: int = 512
    n_ubatch: int = 512
    logits_all: bool = False
    prompt_cache_mib: int = 256
    """0 turns the RAM prompt cache off (only the previous request's prefix is reused)."""
    grammar_last: bool = True
    """False keeps llama-cpp-python's order: the grammar over the whole vocabulary before every choice."""
    prompt_states_mib: int = 512
    """Disk kept for the prompt cache's states, for the next server to restore (``prompt_states.py``); 0 keeps them in RAM only."""
    draft_tokens: int = 4
    """At most this many tokens guessed from the prompt and checked in one decode (``drafting.py``); 0 guesses none.

    A server started with default settings takes ``SOOTHE_LLM_DRAFT_TOKENS`` instead, when set."""

    def __post_init__(self) -> None:
        for name in ("n_ctx", "n_batch", "n_ubatch"):
            if getattr(self, name) < 1:
                raise ValueError(f"ServerTuning.{name} must be >= 1, got {getattr(self, name)}")
        if self.n_ubatch > self.n_batch:
            raise ValueError(f"ServerTuning.n_ubatch ({self.n_ubatch}) must be <= n_batch ({self.n_batch})")
        if self.prompt_states_mib < 0:
            raise ValueError(f"ServerTuning.prompt_states_mib must be >= 0 (0 keeps no states on disk), got {self.prompt_states_mib}")
        if self.draft_tokens < 0:
            raise ValueError(f"ServerTuning.draft_tokens must be >= 0 (0 turns guessing off), got {self.draft_tokens}")
        if self.prompt_cache_mib < 0:
            raise ValueError(f"ServerTuning.prompt_cache_mib must be >= 0 (0 turns it off), got {self.prompt_cache_mib}")

    @classmethod
    def stock(cls) -> ServerTuning:
        """The settings before tuning: the server's defaults, a 4096-token context."""
        return cls(n_ctx=4096, n_batch=512, n_ubatch=512, logits_all=True, prompt_cache_mib=0, grammar_last=False,
                   prompt_states_mib=0, draft_tokens=0)

    def with_(self, **changes: object) -> ServerTuning:
        return replace(self, **changes)  # type: ignore[arg-type]

    def env(self) -> dict[str, str]:
        """What the launcher reads from the environment for settings the server has no flag for.

        Empty for the defaults, so a variable the user set (``SOOTHE_LLAMA_GRAMMAR_FIRST=1``) still counts.
        """
        from soothe_planner.local.sampling import GRAMMAR_FIRST_ENV

        return {} if self.grammar_last else {GRAMMAR_FIRST_ENV: "1"}

    def flags(self) -> list[str]:
        """The server's command-line flags for these settings."""
        out = [
            "--n_ctx", str(self.n_ctx),
            "--n_batch", str(self.n_batch),
            "--n_ubatch", str(self.n_ubatch),
            "--logits_all", str(self.logits_all),
        ]  # fmt: skip
        if self.prompt_cache_mib:
            out += ["--cache", "True", "--cache_type", "ram", "--cache_size", str(self.prompt_cache_mib << 20)]
        if self.draft_tokens:
            out += ["--draft_model", "prompt-lookup-decoding", "--draft_model_num_pred_tokens", str(self.draft_tokens)]
        return out
