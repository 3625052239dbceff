"""Why does the embedded model guess its next tokens from its own prompt?

On two cores the 1.5B writes 7-9 tokens a second, and most of what the loop asks it to write is
copied: a model step's TODO lines are the search's lines, a plan's arguments are the goal's paths
and patterns, every JSON step repeats the keys of the one before. Decoding a few tokens in one
batch costs little more than decoding one (the weights are read once per batch), so when the text
about to be written already appears in the prompt, the server can check several of those tokens
in one decode and keep every one the model itself would have chosen (*prompt lookup decoding*).
Each kept token is the model's own choice from its own logits; a guess only decides which tokens
are decoded together. That is not a promise of the same text token for token: a pass of several
tokens adds up in another order than a pass of one, so a near-tie can tip another way (once in
a by-hand check, never in the benchmark's replies) — the kind of difference a prompt cache's
other batch split makes too.

``LookupDrafter`` makes the guesses. llama-cpp-python ships one too, but it takes the *first*
place where the last one or two tokens occurred, so after a common pair (``": "``) it guesses from
anywhere; and it always guesses ten tokens. This one:

- matches the longest suffix of the text so far, of ``min_match`` to ``max_match`` tokens, and
  continues from its *latest* earlier occurrence (the nearest copy is the likeliest one);
- guesses ``length`` tokens, doubling after a guess the model took whole (a long copy) and
  falling back to one after a miss, between 1 and ``max_tokens``.

It is plain NumPy over token ids; the launcher plugs it into the server (``launcher.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["LookupDrafter"]


class LookupDrafter:
    """Guess the next tokens by finding the text's last few tokens earlier in it."""

    def __init__(self, max_tokens: int = 8, *, min_match: int = 3, max_match: int = 8) -> None:
        if max_tokens < 1:
            raise ValueError(f"LookupDrafter.max_tokens must be >= 1, got {max_tokens}")
        if not 1 <= min_match <= max_match:
            raise ValueError(f"LookupDrafter needs 1 <= min_match <= max_match, got {min_match} and {max_match}")
        self.max_tokens = max_tokens
        self.min_match = min_match
        self.max_match = max_match
        self.length = max(1, max_tokens // 2)
        self._guess: tuple[int, np.ndarray] | None = None  # (where the last guess started, the guess)
        self.guessed = 0
        """Tokens guessed so far (for the benchmark: guessed against taken)."""
        self.taken = 0
        """Guessed tokens the model chose itself."""

    def _learn(self, ids: np.ndarray) -> None:
        """Compare the last guess with what was written since, and size the next guess."""
        if self._guess is None:
            return
        start, guess = self._guess
        self._guess = None
        written = ids[start:]
        if start > len(ids) or len(written) > len(guess) + 1:
            self.length = max(1, self.max_tokens // 2)  # another request: start over
            return
        n = min(len(written), len(guess))
        same = written[:n] == guess[:n]
        taken = n if same.all() else int(np.argmin(same))
        self.taken += taken
        self.length = min(self.max_tokens, self.length * 2) if taken == len(guess) else max(1, taken)

    def continuation(self, ids: np.ndarray) -> np.ndarray:
        """What followed the latest earlier occurrence of the longest matching suffix (empty if none)."""
        size = len(ids)
        for n in range(min(self.max_match, size - 1), self.min_match - 1, -1):
            suffix = ids[size - n :]
            windows = np.lib.stride_tricks.sliding_window_view(ids[: size - 1], n)
            hits = np.flatnonzero((windows == suffix).all(axis=1))
            if len(hits):
                after = int(hits[-1]) + n
                return ids[after : after + self.length]
        return ids[:0]

    def __call__(self, input_ids: Any, /, **_: Any) -> np.ndarray:
        ids = np.asarray(input_ids, dtype=np.intc)
        self._learn(ids)
        guess = self.continuation(ids).copy()
        if len(guess):
            self._guess = (len(ids), guess)
            self.guessed += len(guess)
        return guess
