"""Keeping a branch's requests inside the model's context window.

Before each model call the loop asks the ``ContextKeeper`` to ``fit`` the request. The
keeper estimates its size from what the provider reported for the turn's previous call (its
input tokens, plus its output, now a message of the conversation) and an estimate of the
messages added since (``estimate_tokens``: four characters a token, no tokenizer). The turn's
first call, with nothing reported yet, is estimated whole.

When the estimate passes ``compact_at`` of the window, the keeper first asks the model for a
summary of the oldest turns of the path (all but the ``KEEP_RECENT`` newest, and
never the newest) and records it as
a step of kind ``compaction``: its prompt, the summary as its ``result``, its tokens. An event
``compaction`` on that step says how many turns of the path, from its first, the summary
stands for. From then on the branch sends the summary in their place, then the pinned turns
among them (verbatim, with a prompt-cache breakpoint after the last pinned turn), then the
turns after them, each as it happened (``context.turn_messages``): a later turn finds the
compaction among the runs of its path (``Summary``), and a turn
branched from before the compaction point does not, so it sends the original turns. The
turns themselves stay as they were, in the store and in ``session/history``.

A request the provider refuses as too long (``ProviderError.too_long``) is compacted once
(``overflow``) and sent once more; the loop ends the turn ``error`` if that fails too.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass
from typing import Protocol

from ..providers.base import (
    Message,
    ModelRequest,
    Provider,
    TextDelta,
    ToolSpec,
    Usage,
)
from ..records import Step, Tokens, Turn
from ..vocabulary import EventKind, StepKind
from .context import Sent, Transcripts, turn_messages

log = logging.getLogger(__name__)

CHARS_PER_TOKEN = 4
MESSAGE_OVERHEAD = 4  # tokens a message costs beyond its text (its role, its framing)
KEEP_RECENT = 2  # the newest turns of the path a compaction leaves as they are
SUMMARY_MAX_TOKENS = 2048
RESULT_CHARS = 2000  # of each tool result, in what a compaction is asked to summarize
SUMMARY_NOTE = "Summary of the earlier part of this conversation (its turns were compacted):\n\n"
SUMMARIZER = (
    "You compact the history of a coding session so that it can go on within the model's"
    " context window. Write a summary that lets the work continue: what the user asked for,"
    " what was decided and done (files, commands, results), what is still open. Be factual"
    " and concise; keep names, paths and numbers exactly."
)
TOO_LONG_AGAIN = (
    "the request is longer than the model's context window even after compacting the"
    " session's history: {error}"
)
NOTHING_TO_COMPACT = (
    "the request is longer than the model's context window and there are no earlier turns"
    " left to compact: {error}"
)


class EventRecorder(Protocol):
    def add_event(
        self, kind: EventKind, step: int | None, detail: dict[str, object]
    ) -> Awaitable[None]: ...


Commit = Callable[[Step], Awaitable[None]]


@dataclass(frozen=True)
class Summary:
    """A compaction in force on a path: its summary stands for the path's first ``turns``."""

    text: str
    turns: int


def estimate_tokens(messages: list[Message]) -> int:
    """A tokenizer-free estimate of what ``messages`` cost as input."""
    chars = 0
    for m in messages:
        chars += len(m.content)
        for call in m.tool_calls:
            chars += len(call.name) + len(json.dumps(call.arguments))
    return chars // CHARS_PER_TOKEN + MESSAGE_OVERHEAD * len(messages)


def tools_tokens(tools: list[ToolSpec]) -> int:
    """A tokenizer-free estimate of what the tool declarations cost as input."""
    text = json.dumps([[t.name, t.description, t.parameters] for t in tools])
    return len(text) // CHARS_PER_TOKEN


def summary_prompt(
    previous: Summary | None, turns: list[Turn], transcripts: Transcripts | None = None
) -> str:
    """What the model is asked to summarize: the summary in force, then the turns it adds,
    each with its tool calls and their results (each result cut to ``RESULT_CHARS``)."""
    parts = []
    if previous is not None:
        parts.append(f"The summary so far:\n{previous.text}")
    for turn in turns:
        lines = []
        for m in turn_messages([turn], transcripts):
            if m.role == "tool":
                cut = m.content[:RESULT_CHARS] + ("…" if len(m.content) > RESULT_CHARS else "")
                lines.append(f"Result: {cut}")
                continue
            if m.content:
                lines.append(f"{'User' if m.role == 'user' else 'Assistant'}: {m.content}")
            for call in m.tool_calls:
                lines.append(f"Assistant called {call.name} {json.dumps(call.arguments)}")
        parts.append("\n\n".join(lines))
    parts.append("Summarize the conversation above.")
    return "\n\n---\n\n".join(parts)


class CompactionHooks(Protocol):
    """The hooks run around a compaction (``preCompact``, ``postCompact``)."""

    async def before_compact(self, step: int, why: dict[str, object]) -> None: ...

    async def after_compact(self, step: int, detail: dict[str, object]) -> None: ...


class ContextKeeper:
    """The context of one branch as a turn sends it: the system message, the summary in
    force, the path's turns after it; what the provider reported of the last call."""

    def __init__(
        self,
        provider: Provider,
        recorder: EventRecorder,
        system: Message,
        path: list[Turn],
        summary: Summary | None,
        context_window: int,
        compact_at: float,
        transcripts: Transcripts | None = None,
        pinned: Collection[str] = (),
        images: Sent | None = None,
    ) -> None:
        self.provider, self.recorder = provider, recorder
        self.system, self.path, self.summary = system, path, summary
        self.context_window, self.compact_at = context_window, compact_at
        self.transcripts = transcripts  # the path's committed steps, by run
        self.pinned = frozenset(pinned)  # the turns sent verbatim whatever is compacted
        self.images = images  # the path's images sent again, by SHA-256
        self.context_tokens = 0  # the size of the context, as last reported or estimated
        self._reported: tuple[int, int, int | None] | None = None  # messages, input, output
        self._head = len(self.head())
        self.hooks: CompactionHooks | None = None  # run around each compaction

    @property
    def limit(self) -> int:
        """The size a request may reach before the path is compacted."""
        return int(self.context_window * self.compact_at)

    def head(self) -> list[Message]:
        """The messages that stand for the path: the system, the summary, the pinned turns it
        stands for (verbatim), the later turns, each as it happened. A prompt-cache
        breakpoint follows the last pinned turn."""
        messages = [self.system]
        start = 0 if self.summary is None else self.summary.turns
        if self.summary is not None:
            messages.append(Message("user", SUMMARY_NOTE + self.summary.text))
        kept = [t for t in self.path[:start] if t.turn_id in self.pinned]
        last_pin = None
        for turn in kept + self.path[start:]:
            messages += turn_messages([turn], self.transcripts, self.images)
            if turn.turn_id in self.pinned:
                last_pin = len(messages) - 1
        if last_pin is not None:
            messages[last_pin] = dataclasses.replace(messages[last_pin], cache=True)
        return messages

    def estimate(self, messages: list[Message], tools: list[ToolSpec]) -> int:
        """The request's size: the last call's reported input and output, plus an estimate
        of what was added since; the whole request estimated when nothing was reported."""
        if self._reported is None:
            return tools_tokens(tools) + estimate_tokens(messages)
        sent, input_tokens, output = self._reported
        added = messages[sent:]
        if output is not None and added and added[0].role == "assistant":
            return input_tokens + output + estimate_tokens(added[1:])
        return input_tokens + estimate_tokens(added)

    async def fit(
        self, messages: list[Message], tools: list[ToolSpec], number: int, commit: Commit
    ) -> bool:
        """Compact the path into step ``number`` when the request would pass the limit;
        True when it did (``messages`` then holds the compacted request)."""
        size = self.estimate(messages, tools)
        self.context_tokens = size
        if size <= self.limit:
            return False
        log.info(
            "a request of about %d tokens passes %d of %d", size, self.limit, self.context_window
        )
        done = await self.compact(messages, number, commit, {"estimate": size})
        if done:
            self.context_tokens = self.estimate(messages, tools)
        return done

    async def compact(
        self,
        messages: list[Message],
        number: int,
        commit: Commit,
        why: dict[str, object] | None = None,
    ) -> bool:
        """Summarize the oldest turns sent into step ``number``; ``messages`` (which starts
        with this keeper's ``head``) is rewritten in place. False when no turn is left to
        summarize."""
        start = 0 if self.summary is None else self.summary.turns
        unsummarized = self.path[start:]
        keep = min(KEEP_RECENT, max(len(unsummarized) - 1, 1))  # the newest stays
        cover = unsummarized[: len(unsummarized) - keep]
        if not cover:
            return False
        unpinned = [t for t in cover if t.turn_id not in self.pinned]  # sent as they are
        if not unpinned:
            return False
        if self.hooks is not None:
            await self.hooks.before_compact(number, why or {})
        prompt = summary_prompt(self.summary, unpinned, self.transcripts)
        text, usage = await self._ask(prompt)
        tokens = Tokens(usage.input, usage.output, usage.cached)
        await commit(Step(number, StepKind.COMPACTION, prompt, "", None, text, tokens))
        summary = Summary(text, start + len(cover))
        detail: dict[str, object] = {
            "turns": summary.turns,
            "throughTurnId": cover[-1].turn_id,
            "contextWindow": self.context_window,
            **(why or {}),
        }
        await self.recorder.add_event(EventKind.COMPACTION, number, detail)
        tail = messages[self._head :]
        self.summary = summary
        head = self.head()
        messages[:] = head + tail
        self._head, self._reported = len(head), None
        if self.hooks is not None:
            await self.hooks.after_compact(number, detail)
        return True

    async def _ask(self, prompt: str) -> tuple[str, Usage]:
        request = ModelRequest(
            [Message("system", SUMMARIZER), Message("user", prompt)],
            max_tokens=SUMMARY_MAX_TOKENS,
        )
        pieces: list[str] = []
        usage = Usage(None, None, None)
        async for event in self.provider.stream(request):
            if isinstance(event, TextDelta):
                pieces.append(event.text)
            elif isinstance(event, Usage):
                usage = event
        return "".join(pieces).strip(), usage

    async def reported(self, sent: int, usage: Usage, number: int) -> None:
        """What the provider reported of the call that sent ``sent`` messages; a cache read
        is recorded as an event ``cache``."""
        if usage.input is None:
            return
        self._reported = (sent, usage.input, usage.output)
        self.context_tokens = usage.input + (usage.output or 0)
        if usage.cached:
            detail: dict[str, object] = {
                "cachedTokens": usage.cached,
                "inputTokens": usage.input,
                "prefixMessages": sent - 1,
            }
            await self.recorder.add_event(EventKind.CACHE, number, detail)
