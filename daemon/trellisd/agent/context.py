"""What the model sees: the system message (the daemon's prompt, then the turn's standing
instructions), the session's path from its first turn to the head, then the prompt."""

from __future__ import annotations

from ..providers.base import Message
from ..records import Step, Turn
from .steering import STEER_NOTE

SYSTEM_PROMPT = (
    "You are a coding agent working in the folder {root} for a developer in their editor. "
    "Use the tools to look at the files before you answer questions about them; paths are "
    "relative to that folder. Answer concisely."
)


def conversation(
    root: str, path: list[Turn], prompt: str, instructions: str | None = None
) -> list[Message]:
    system = SYSTEM_PROMPT.format(root=root)
    if instructions:
        system += "\n\n" + instructions
    messages = [Message("system", system)]
    for turn in path:
        messages.append(Message("user", turn.prompt))
        messages.append(Message("assistant", turn.reply or f"(no reply: the turn {turn.outcome})"))
    messages.append(Message("user", prompt))
    return messages


def replay(steps: list[Step]) -> list[Message]:
    """The messages a run's committed steps added, to continue it where it stopped."""
    messages: list[Message] = []
    for step in steps:
        if step.prompt and step.step > 1:
            messages.append(Message("user", STEER_NOTE + step.prompt))
        if step.tool_call is not None:
            messages.append(Message("assistant", step.text, (step.tool_call,)))
            messages.append(Message("tool", step.result or "", tool_call_id=step.tool_call.id))
        elif step.text:
            messages.append(Message("assistant", step.text))
    return messages
