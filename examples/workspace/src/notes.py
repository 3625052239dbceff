"""An in-memory notebook."""

from __future__ import annotations


class Notebook:
    def __init__(self) -> None:
        self.notes: list[str] = []

    def add(self, text: str) -> int:
        # TODO: reject empty notes
        self.notes.append(text)
        return len(self.notes) - 1

    def search(self, word: str) -> list[str]:
        # TODO: make the search case-insensitive
        return [n for n in self.notes if word in n]
