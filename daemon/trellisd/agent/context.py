"""What the model sees: the system message (the daemon's prompt, then the turn's standing
instructions), the session's path from its first turn to the head, then the prompt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from ..providers.base import Image, Message, Reasoning
from ..records import ImageRef, Step, Tokens, Turn
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


Transcripts = Mapping[str, Sequence[Step]]
"""The committed steps of a path's turns, by run id."""

NO_TOKENS = Tokens(0, 0, 0)  # what the loop records for a model call's second and later calls
UNFINISHED_CALL = "(no result: the turn was cancelled while this call ran)"


Sent = Mapping[str, Image]
"""The earlier turns' images a request carries again, by SHA-256."""


def turn_messages(
    turns: Sequence[Turn], transcripts: Transcripts | None = None, images: Sent | None = None
) -> list[Message]:
    """The messages that stand for ``turns``: each turn as it happened, from its committed
    steps (its prompt, each steer, each tool call with its result, what the model said), in
    the messages its own requests held; a turn whose steps are not in ``transcripts``: its
    prompt and its reply. A turn's images go with its prompt when ``images`` holds them, a
    ``placeholder`` line in their stead when it does not."""
    messages: list[Message] = []
    for turn in turns:
        steps = None if transcripts is None else transcripts.get(turn.run_id)
        if steps is None:
            messages.append(prompt_message(turn.prompt, turn.images, images))
            messages.append(Message("assistant", turn.reply or _no_reply(turn)))
            continue
        messages.append(prompt_message(opening(steps) or turn.prompt, turn.images, images))
        messages += replay(steps)
        said = [s for s in steps if s.decision != StepKind.COMPACTION]
        if not said or said[-1].decision != StepKind.REPLY:
            messages.append(Message("assistant", _no_reply(turn)))
    return messages


def _no_reply(turn: Turn) -> str:
    return f"(no reply: the turn {turn.outcome})"


def prompt_message(prompt: str, refs: Sequence[ImageRef], images: Sent | None = None) -> Message:
    """A turn's prompt as the user's message: with the images of ``refs`` that ``images``
    holds, and a ``placeholder`` line after the prompt for each it does not."""
    sent = {} if images is None else images
    kept = tuple(sent[r.sha256] for r in refs if r.sha256 in sent)
    left = [placeholder(r) for r in refs if r.sha256 not in sent]
    content = "\n\n".join([prompt, *left]) if left else prompt
    return Message("user", content, images=kept)


def placeholder(ref: ImageRef) -> str:
    """What stands for an earlier image a request has no room for."""
    return f"[image {ref.sha256[:12]} ({ref.mime_type}, {ref.bytes} bytes): not sent again]"


def conversation(
    root: str,
    path: list[Turn],
    prompt: str,
    instructions: str | None = None,
    images: Sequence[Image] = (),
) -> list[Message]:
    """The system message, ``path``'s turns, then the prompt with the turn's ``images``."""
    return [
        system_message(root, instructions),
        *turn_messages(path),
        Message("user", prompt, images=tuple(images)),
    ]


def opening(steps: Sequence[Step]) -> str | None:
    """The prompt a run's first model call was sent with (the editor's context framed in),
    held by its first step that is not a compaction."""
    for step in steps:
        if step.decision != StepKind.COMPACTION:
            return step.prompt
    return None


def replay(steps: Sequence[Step]) -> list[Message]:
    """The messages a run's committed steps added after its prompt, as its requests held
    them: a steer as the user's, the text and tool calls of one model call as one assistant
    message (with what the model reasoned in that call, for the provider to send back), each
    call's result as a tool message. A call the turn was cancelled in gets a result saying so,
    as both wires need one for every call."""
    messages: list[Message] = []
    first = True  # the run's first model call: its prompt is the opening, not a steer
    previous: Step | None = None
    for step in steps:
        if step.decision == StepKind.COMPACTION:
            continue  # the summary is in the conversation's head
        if step.prompt and not first:
            messages.append(Message("user", STEER_NOTE + step.prompt))
        first = False
        call = step.tool_call
        if call is not None:
            result = Message("tool", _result(step), tool_call_id=call.id)
            if _same_call(step, previous):
                asking = next(i for i in range(len(messages) - 1, -1, -1) if messages[i].tool_calls)
                calls = (*messages[asking].tool_calls, call)
                messages[asking] = replace(messages[asking], tool_calls=calls)
            else:
                messages.append(Message("assistant", step.text, (call,), reasoning=_thought(step)))
            messages.append(result)
        elif step.text or step.decision == StepKind.REPLY:
            messages.append(Message("assistant", step.text, reasoning=_thought(step)))
        previous = step
    return messages


def _thought(step: Step) -> Reasoning | None:
    """What the model reasoned in the step's call, as its assistant message carries it."""
    thought = step.thought
    return None if thought is None else Reasoning(thought.provider, thought.text, thought.items)


def _same_call(step: Step, previous: Step | None) -> bool:
    """Whether ``step`` is a further tool call of the model call ``previous`` made: the loop
    records those with no prompt, no text and no tokens of their own."""
    return (
        previous is not None
        and previous.tool_call is not None
        and step.prompt is None
        and not step.text
        and step.tokens == NO_TOKENS
    )


def _result(step: Step) -> str:
    if step.result is None and step.decision == StepKind.CANCELLED:
        return UNFINISHED_CALL
    return step.result or ""
