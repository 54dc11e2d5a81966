"""What the model sees: the system message (the daemon's prompt, then the turn's standing
instructions), the session's path from its first turn to the head, then the prompt."""

from __future__ import annotations

from ..providers.base import Message
from ..records import Step, Turn
from ..vocabulary import StepKind
from .steering import STEER_NOTE

SYSTEM_PROMPT = (
    "You are a coding agent working in the folder {root} for a developer in their editor. "
    "Use the tools to look at the files before you answer questions about them; paths are "
    "relative to that folder. Answer concisely."
)


def system_message(root: str, instructions: str | None = None) -> Message:
    """The daemon's prompt for the folder ``root``, then the standing instructions."""
    system = SYSTEM_PROMPT.format(root=root)
    if instructions:
        system += "\n\n" + instructions
    return Message("system", system)


def turn_messages(turns: list[Turn]) -> list[Message]:
    """The messages that stand for ``turns``: each prompt and its reply."""
    messages: list[Message] = []
    for turn in turns:
        messages.append(Message("user", turn.prompt))
        messages.append(Message("assistant", turn.reply or f"(no reply: the turn {turn.outcome})"))
    return messages


def conversation(
    root: str, path: list[Turn], prompt: str, instructions: str | None = None
) -> list[Message]:
    return [
        system_message(root, instructions),
        *turn_messages(path),
        Message("user", prompt),
    ]


def replay(steps: list[Step]) -> list[Message]:
    """The messages a run's committed steps added, to continue it where it stopped."""
    messages: list[Message] = []
    for step in steps:
        if step.decision == StepKind.COMPACTION:
            continue  # the summary is in the conversation's head
        if step.prompt and step.step > 1:
            messages.append(Message("user", STEER_NOTE + step.prompt))
        if step.tool_call is not None:
            messages.append(Message("assistant", step.text, (step.tool_call,)))
            messages.append(Message("tool", step.result or "", tool_call_id=step.tool_call.id))
        elif step.text:
            messages.append(Message("assistant", step.text))
    return messages
