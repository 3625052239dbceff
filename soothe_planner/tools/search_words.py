"""What does a text search answer when no line holds the phrase it was given?

Models search for the question's words, not the file's: "maintainer's email address" when the
README says ``Maintainer: Priya Raman <priya@...>``, "upload ledgers to" when the code says
``UPLOAD_URL = "https://..."``. An exact search then says "no matches", and a small model does not
re-phrase: it re-plans the same search, or answers from nothing. So a literal search of several
words that finds no line answers with the lines that hold the most of its words instead, clearly
labelled as such, so the next step reads real lines rather than nothing.

What was weighed:

- **Labelled, never passed off as a match.** The answer ends by saying no line contains the
  phrase exactly and which words were looked for; a step that needed the exact phrase can tell.
  The lines come first: a small model that read "no line contains" first answered "MISSING"
  with the answer in the next line.
- **Only literal phrases.** A regular expression says exactly what it wants; one word that is not
  there has no smaller part to look for.
- **Words, not stems.** Words of three letters or more that are not question words or glue
  ("what", "the", "does"); a possessive loses its "'s" and a plural its final "s", so
  "ledgers" finds ``ledger`` and "maintainer's" finds ``Maintainer``. Matching is by substring
  and case-insensitive, as the exact search is, so ``UPLOAD_URL`` holds "upload".
- **Ranked and bounded.** Lines holding more distinct words first, then in file order; at most
  ``MAX_WORD_HITS`` lines, chosen from at most ``MAX_WORD_CANDIDATES`` lines that hold any word,
  so a common word in a large tree costs bounded memory.
"""

from __future__ import annotations

import regex

__all__ = ["MAX_WORD_CANDIDATES", "MAX_WORD_HITS", "phrase_words", "rank_by_words", "words_matcher"]

MAX_WORD_HITS = 12
MAX_WORD_CANDIDATES = 2_000
_GLUE = frozenset(
    ["the", "and", "for", "from", "with", "into", "onto", "that", "this", "these", "those", "what", "which", "who", "whom", "whose", "where", "when", "how", "why", "does", "did", "do", "doing", "has", "have", "had", "was", "were", "are", "is", "its", "it's", "not", "any", "all", "every", "each", "there", "their", "them", "they", "you", "your", "our", "out", "about", "over", "under", "than", "then", "via", "per", "one"]
)
_WORD = regex.compile(r"[^\W_]+(?:'[^\W_]+)?")


def phrase_words(pattern: str) -> list[str]:
    """The words of ``pattern`` a line-by-word search looks for, lowercased, each once, in order.

    Empty when the pattern has fewer than two words (one word that is not there has no smaller
    part to look for) or when nothing but glue words remain.
    """
    raw = _WORD.findall(pattern.lower())
    if len(raw) < 2:
        return []
    words: list[str] = []
    for word in raw:
        word = word.removesuffix("'s").replace("'", "")
        if len(word) > 4 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        if len(word) >= 3 and word not in _GLUE and word not in words:
            words.append(word)
    return words


def words_matcher(words: list[str]) -> regex.Pattern[str]:
    """One case-insensitive pattern that finds a line holding any of ``words``."""
    return regex.compile("|".join(regex.escape(w) for w in words), regex.IGNORECASE)


def rank_by_words(lines: list[tuple[str, str]], words: list[str], limit: int = MAX_WORD_HITS) -> list[str]:
    """The ``limit`` lines of ``(label, text)`` holding the most distinct ``words``, as ``label: text``.

    Ties keep the order the lines were found in (file order), so a file's own sequence survives.
    """
    scored = []
    for order, (label, text) in enumerate(lines):
        low = text.lower()
        count = sum(1 for w in words if w in low)
        if count:
            scored.append((-count, order, f"{label}: {text}"))
    scored.sort()
    return [line for _, _, line in scored[:limit]]
