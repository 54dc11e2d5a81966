"""What the model sees: the session's path from its first turn to the head, then the prompt."""

from __future__ import annotations

from ..providers.base import Message
from ..store.records import Turn

SYSTEM_PROMPT = (
    "You are a coding agent working in the folder {root} for a developer in their editor. "
    "Use the tools to look at the files before you answer questions about them; paths are "
    "relative to that folder. Answer concisely."
)


def conversation(root: str, path: list[Turn], prompt: str) -> list[Message]:
    messages = [Message("system", SYSTEM_PROMPT.format(root=root))]
    for turn in path:
        messages.append(Message("user", turn.prompt))
        messages.append(Message("assistant", turn.reply or f"(no reply: the turn {turn.outcome})"))
    messages.append(Message("user", prompt))
    return messages
