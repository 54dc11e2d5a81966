"""What a server answers, apart from the SDK (``connection``), which is imported only when a
server first starts: a daemon with no MCP server starts as fast as without them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class McpFailure(Exception):
    """The server could not do what was asked; the message says why, in one line."""


@dataclass(frozen=True)
class RemoteTool:
    """A tool as the server listed it, not yet judged (see ``tools``)."""

    name: Any
    description: Any
    schema: Any


@dataclass(frozen=True)
class Answer:
    """A tool's answer: its text for the model, and whether the server called it an error."""

    text: str
    is_error: bool
