"""What every wire shares about reasoning: the text a call thinks, kept as it streams.

A call's reasoning is bounded like its tool calls (see ``calls``): past ``STEP_LIMIT``
characters (counting the records kept to send back, such as signatures), the call is ended
with a ``ProviderError`` instead of running the daemon out of memory. The pieces are kept in a
list and joined once, when the call ends.
"""

from __future__ import annotations

from .base import STEP_LIMIT, ThoughtDelta
from .calls import CallBytes

PARAGRAPH = "\n\n"  # between two separate pieces of reasoning (two thinking blocks)


class Thoughts:
    """The reasoning of one response so far, against ``limit``."""

    def __init__(self, limit: int = STEP_LIMIT) -> None:
        self.counted = CallBytes(limit, "reasoning")
        self.pieces: list[str] = []
        self._paragraph = False

    def take(self, count: int) -> None:
        """Count ``count`` more characters; a ``ProviderError`` past the limit."""
        self.counted.take(count)

    def paragraph(self) -> None:
        """The next piece starts a new paragraph, if any reasoning came before it."""
        self._paragraph = bool(self.pieces)

    def add(self, text: str) -> ThoughtDelta:
        """A piece of the reasoning, kept, as the event that streams it."""
        if self._paragraph:
            text = PARAGRAPH + text
            self._paragraph = False
        self.take(len(text))
        self.pieces.append(text)
        return ThoughtDelta(text)

    @property
    def text(self) -> str:
        return "".join(self.pieces)
