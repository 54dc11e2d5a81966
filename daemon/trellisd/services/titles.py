"""A session's title when the user gave none: the first line of its first prompt, the same
whichever protocol the prompt came over."""

from __future__ import annotations

TITLE_CHARS = 60


def title_of(prompt: str) -> str:
    """The title an untitled session takes from ``prompt``: its first line, cut to
    ``TITLE_CHARS`` with an ellipsis."""
    line = prompt.strip().splitlines()[0] if prompt.strip() else "untitled"
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1] + "\u2026"
