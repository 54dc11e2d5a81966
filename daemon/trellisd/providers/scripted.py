"""The scripted model: plays replies from a JSON-lines file, or echoes when it has none.

Each line of the script is one model call, played in order and from the top again once all
have been played:

    {"text": "Hello there."}                                  a reply, streamed word by word
    {"tool": "read_file", "arguments": {"path": "a.txt"}}     a tool call (text may go with it)
    {"error": "the model is down"}                            a failed call
    {"thought": "Look first.", "text": "Done."}               reasoning, streamed before the text

A ``thought`` streams word by word as reasoning, then is given whole (``ReasoningDone``, with
``reasoningItems`` as the provider's records when the line has them), and its words count as
reasoning tokens, part of the output's.

``delayMs`` on a line waits that long before each piece, to imitate a slow model.
``holdFile`` makes the model stop after ``holdAfter`` pieces (default 0) until that file
exists, so that whoever runs it (a test, a tour) decides when the rest comes:

    {"text": "Counting: one two three", "holdAfter": 2, "holdFile": "/tmp/t/go"}

Token figures are word counts, standing in for a tokenizer.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ..records import ToolCall
from .base import (
    Message,
    ModelRequest,
    ProviderError,
    ProviderEvent,
    Reasoning,
    ReasoningDone,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    Usage,
)

_PIECES = re.compile(r"\S+\s*|\s+")
HOLD_POLL_SECONDS = 0.02


def load_script(path: str) -> list[dict[str, Any]]:
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ProviderError(f"cannot read the script TRELLISD_SCRIPT={path}: {exc}") from exc
    script = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as exc:
            raise ProviderError(f"line {number} of the script {path} is not JSON") from exc
        if not isinstance(entry, dict) or not ({"text", "tool", "error"} & entry.keys()):
            raise ProviderError(
                f"line {number} of the script {path} needs a text, tool or error member"
            )
        if not isinstance(entry.get("holdFile", ""), str) or not _count(entry.get("holdAfter", 0)):
            raise ProviderError(
                f"line {number} of the script {path}: holdFile must be a path and holdAfter"
                " a number of pieces"
            )
        script.append(entry)
    if not script:
        raise ProviderError(f"the script {path} has no lines")
    return script


class ScriptedProvider:
    name = "scripted"

    def __init__(self, script_path: str | None, model: str = "scripted") -> None:
        self.model = model
        self._script = load_script(script_path) if script_path else None
        self._played = 0

    async def stream(self, request: ModelRequest) -> AsyncIterator[ProviderEvent]:
        entry = self._next_entry(request)
        if "error" in entry:
            raise ProviderError(str(entry["error"]))
        delay = float(entry.get("delayMs", 0)) / 1000
        text = str(entry.get("text", ""))
        pieces = _PIECES.findall(text)
        thought = str(entry.get("thought", ""))
        for piece in _PIECES.findall(thought):
            yield ThoughtDelta(piece)
        if thought:
            items = entry.get("reasoningItems", [])
            kept = tuple(i for i in items if isinstance(i, dict)) if isinstance(items, list) else ()
            yield ReasoningDone(Reasoning(self.name, thought, kept))
        hold = Path(entry["holdFile"]) if "holdFile" in entry else None
        hold_after = min(entry.get("holdAfter", 0), len(pieces))
        for number, piece in enumerate([*pieces, None]):
            if hold is not None and number == hold_after:
                await _until_exists(hold)
            if piece is None:
                break
            if delay:
                await asyncio.sleep(delay)
            yield TextDelta(piece)
        if "tool" in entry:
            arguments = entry.get("arguments", {})
            yield ToolCallRequested(
                ToolCall(
                    id=f"call-{uuid.uuid4().hex[:12]}",
                    name=str(entry["tool"]),
                    arguments=arguments if isinstance(arguments, dict) else {},
                )
            )
        reasoned = len(thought.split())
        yield Usage(
            input=sum(_words(m) for m in request.messages),
            output=len(text.split()) + reasoned,
            reasoning=reasoned if thought else None,
        )
        yield Stop("tool_calls" if "tool" in entry else "stop")

    def _next_entry(self, request: ModelRequest) -> dict[str, Any]:
        if self._script is None:
            return {"text": _echo(request.messages)}
        entry = self._script[self._played % len(self._script)]
        self._played += 1
        return entry


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


async def _until_exists(path: Path) -> None:
    while not path.exists():
        await asyncio.sleep(HOLD_POLL_SECONDS)


def _words(message: Message) -> int:
    return len(message.content.split())


def _echo(messages: list[Message]) -> str:
    """The built-in reply: what the user said, and which earlier prompts it can see."""
    prompts = [m.content for m in messages if m.role == "user"]
    *earlier, last = prompts or [""]
    if not earlier:
        return f"You said \u201c{last}\u201d. This is the first turn I can see."
    seen = "; ".join(f"\u201c{p}\u201d" for p in earlier)
    return f"You said \u201c{last}\u201d. I can see {len(earlier)} earlier turn(s): {seen}."
