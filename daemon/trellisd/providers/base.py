"""The seam between the agent loop and a model: a ``Provider`` streams ``ProviderEvent``s.

The loop never knows which wire format a provider speaks. Every failure a provider meets
reaches the loop as a ``ProviderError`` whose message a person can act on.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ..records import ToolCall

STEP_LIMIT = 16 * 1024 * 1024
"""The most one model call (a step) may stream of text, and of tool calls (their names and
arguments), counted in characters: past either, the call is ended and the turn ends ``error``
(the agent loop caps the text, ``calls.CallBytes`` the tool calls)."""


Effort = Literal["low", "medium", "high"]
"""How hard a reasoning model thinks; each wire maps it to its own setting."""


@dataclass(frozen=True)
class Image:
    """An image given with a prompt: its bytes and media type (``image/png``, ``image/jpeg``,
    ``image/gif`` or ``image/webp``). Each wire sends it in its own form."""

    mime_type: str
    data: bytes


@dataclass(frozen=True)
class Reasoning:
    """What the model thought in one call. ``text``: what a person is shown (the thinking,
    or its summary). ``items``: the provider's own records of it (Anthropic's signed
    ``thinking`` and ``redacted_thinking`` blocks, a Responses ``reasoning`` item), sent back
    unchanged with the assistant's message on later calls, and only to the wire that made
    them (``provider``, a ``Provider.name``): another wire drops them."""

    provider: str
    text: str = ""
    items: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class Message:
    """One message of the conversation sent to the model. ``cache``: a prompt-cache
    breakpoint follows it, on the wires that take one (Anthropic's ``cache_control``).
    ``images``: a user message's images, after its text. ``reasoning``: an assistant
    message's reasoning, to send back as its wire requires."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    cache: bool = False
    images: tuple[Image, ...] = ()
    reasoning: Reasoning | None = None


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class ModelRequest:
    messages: list[Message]
    tools: list[ToolSpec] = field(default_factory=list)
    temperature: float | None = None
    max_tokens: int | None = None
    effort: Effort | None = None  # None: the model's own default


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class ThoughtDelta:
    """A piece of the model's reasoning (or its summary), as it streams."""

    text: str


@dataclass(frozen=True)
class ReasoningDone:
    """The call's reasoning, whole, with the records to send back (``Reasoning.items``);
    sent once, before ``Stop``, by a call that reasoned."""

    reasoning: Reasoning


@dataclass(frozen=True)
class ToolCallRequested:
    call: ToolCall


@dataclass(frozen=True)
class Usage:
    """Token figures as the provider reported them; ``None`` where it reported none."""

    input: int | None
    output: int | None
    cached: int | None = None
    reasoning: int | None = None  # of ``output``, the tokens spent reasoning


@dataclass(frozen=True)
class Stop:
    """The call ended. ``reason`` uses one vocabulary on every wire: ``stop`` (the model
    finished), ``tool_calls``, ``length`` (the token limit was reached), ``content_filter``,
    or the provider's own word for anything else."""

    reason: str


@dataclass(frozen=True)
class Retrying:
    """The provider is about to send the request again, after ``delay`` seconds.

    ``attempt`` is the number of the attempt about to be made (the first retry is attempt 2);
    ``reason`` says in a few words why the previous attempt failed.
    """

    attempt: int
    delay: float
    reason: str


ProviderEvent = (
    TextDelta | ThoughtDelta | ReasoningDone | ToolCallRequested | Usage | Stop | Retrying
)


class ProviderError(Exception):
    """A model call failed; ``str(error)`` is the message shown to the user.

    ``status`` is the HTTP status when there was one. ``retryable`` says the same request may
    succeed if sent again, and ``retry_after`` how long the provider asked to wait first.
    ``too_long`` says the provider refused the request as longer than the model's context
    window (OpenAI's ``context_length_exceeded``, Anthropic's ``prompt is too long``).
    """

    def __init__(
        self,
        message: str,
        status: int | None = None,
        *,
        retryable: bool = False,
        retry_after: float | None = None,
        too_long: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable
        self.retry_after = retry_after
        self.too_long = too_long


TOO_LONG_WORDS = (
    "context_length_exceeded",
    "prompt is too long",
    "maximum context length",
)


def says_too_long(text: str) -> bool:
    """Whether a provider's words about a failed request say it was too long for the model."""
    lowered = text.lower()
    return any(words in lowered for words in TOO_LONG_WORDS)


def size_words(count: int) -> str:
    """``count`` characters (or bytes) as a person reads it: ``16 MiB``, ``512 KiB``, ``900``."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count >= scale and count % scale == 0:
            return f"{count // scale} {unit}"
    return f"{count:,} characters"


class Provider(Protocol):
    name: str
    model: str

    def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        """Stream one model call's events, ending with ``Stop``."""
        ...
