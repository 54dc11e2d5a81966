"""Text that arrives in pieces (a model's reply, token by token), kept at little more than the
memory of its characters.

A list of a million two-character strings takes some fifty times the memory of their text, so
``Pieces`` joins every ``RUN`` pieces into one string as they come; ``size`` counts the
characters, for the caps on what a step may stream.
"""

from __future__ import annotations

RUN = 1024


class Pieces:
    __slots__ = ("_runs", "_loose", "size")

    def __init__(self) -> None:
        self._runs: list[str] = []
        self._loose: list[str] = []
        self.size = 0

    def add(self, text: str) -> None:
        loose = self._loose
        loose.append(text)
        self.size += len(text)
        if len(loose) >= RUN:
            self._runs.append("".join(loose))
            loose.clear()

    def text(self) -> str:
        """All the text so far (kept as one string from here on)."""
        if self._loose or len(self._runs) > 1:
            self._runs = ["".join(self._runs + self._loose)]
            self._loose.clear()
        return self._runs[0] if self._runs else ""

    def __bool__(self) -> bool:
        return bool(self._runs or self._loose)
