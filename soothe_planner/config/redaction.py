"""How is a value that came from the environment kept out of every message and printout?

One function, used by the loader (validation errors), the config model (``redact_text``,
``redacted_dump``) and resolution (its errors): the values interpolated from ``${VAR}`` are
replaced by ``(hidden)`` — each whole, then each long word of it, since a message may quote part
of a value (the module of a ``module:attr`` spec). Words shorter than six characters, and values
shorter than four, are left in prose: they are too common in the rules' own wording to remove
(a ``3`` is in many rules), and they are still hidden wherever the value itself is shown.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["HIDDEN", "scrub"]

HIDDEN = "(hidden)"
_MIN_SCRUBBED = 4
_MIN_SCRUBBED_WORD = 6


def scrub(text: str, hidden: Iterable[str]) -> str:
    """``text`` with the ``hidden`` values replaced by ``(hidden)``: each whole, then each long word of it.

    The words (runs of letters, digits and ``_`` of ``_MIN_SCRUBBED_WORD`` or more) catch a message
    that quotes *part* of a value, as one naming the module of a ``module:attr`` spec does.
    """
    pieces: set[str] = set()
    for value in hidden:
        if len(value) >= _MIN_SCRUBBED:
            pieces.add(value)
        pieces.update(w for w in re.findall(r"\w+", value) if len(w) >= _MIN_SCRUBBED_WORD)
    for piece in sorted(pieces, key=len, reverse=True):  # longest first: one may contain another
        text = text.replace(piece, HIDDEN)
    return text
