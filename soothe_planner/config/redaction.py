"""How is a value that came from the environment kept out of every message and printout?

``scrub``, used by the loader (validation errors), the config model (``redact_text``,
``redacted_dump``) and resolution (its errors): the values interpolated from ``${VAR}`` are
replaced by ``(hidden)`` — each whole, then each long word of it, since a message may quote part
of a value (the module of a ``module:attr`` spec). Words shorter than six characters, and values
shorter than four, are left in prose: they are too common in the rules' own wording to remove
(a ``3`` is in many rules), and they are still hidden wherever the value itself is shown.
``redacted`` applies it to the ``ConfigError`` of a function that takes the config first.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from soothe_planner.errors import ConfigError

__all__ = ["HIDDEN", "redacted", "scrub"]

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


class _Redacting(Protocol):
    def redact_text(self, text: str) -> str: ...


F = TypeVar("F", bound=Callable[..., Any])


def redacted(func: F) -> F:
    """Re-raise ``func``'s ``ConfigError`` with the config's interpolated values hidden."""

    @functools.wraps(func)
    def wrapper(config: _Redacting, *args: Any, **kwargs: Any) -> Any:
        try:
            return func(config, *args, **kwargs)
        except ConfigError as exc:
            message = config.redact_text(str(exc))
            if message == str(exc):
                raise
            raise ConfigError(message) from None

    return wrapper  # type: ignore[return-value]
