"""The scripted model holds its reply where the script says until a file appears, so that a
test or a tour decides when the rest of the reply comes, whatever the machine's speed."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from unittest.mock import ANY

import pytest

from trellisd.providers.base import (
    Message,
    ModelRequest,
    ProviderError,
    Reasoning,
    ReasoningDone,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    Usage,
)
from trellisd.providers.scripted import ScriptedProvider
from trellisd.records import ToolCall


def provider(tmp_path: Path, *lines: dict[str, object]) -> ScriptedProvider:
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return ScriptedProvider(str(script))


async def test_a_held_reply_goes_on_only_once_its_file_exists(tmp_path: Path) -> None:
    go = tmp_path / "go"
    model = provider(tmp_path, {"text": "one two three four", "holdAfter": 2, "holdFile": str(go)})
    stream = model.stream(ModelRequest([Message("user", "count")]))
    assert [await anext(stream), await anext(stream)] == [TextDelta("one "), TextDelta("two ")]
    third = asyncio.ensure_future(anext(stream))
    for _ in range(20):  # the loop turns many times: a stream that did not hold would be done
        await asyncio.sleep(0)
    assert not third.done()
    go.touch()
    assert await third == TextDelta("three ")
    rest = [event async for event in stream]
    assert rest[0] == TextDelta("four")


async def test_a_hold_after_the_text_holds_the_tool_call(tmp_path: Path) -> None:
    go = tmp_path / "go"
    model = provider(
        tmp_path,
        {
            "text": "Reading.",
            "tool": "read_file",
            "arguments": {"path": "a"},
            "holdAfter": 9,
            "holdFile": str(go),
        },
    )
    stream = model.stream(ModelRequest([Message("user", "read")]))
    assert await anext(stream) == TextDelta("Reading.")
    call = asyncio.ensure_future(anext(stream))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not call.done()
    go.touch()
    assert await call == ToolCallRequested(ToolCall(ANY, "read_file", {"path": "a"}))


def test_a_bad_hold_is_refused_when_the_script_is_read(tmp_path: Path) -> None:
    with pytest.raises(ProviderError, match="holdAfter"):
        provider(tmp_path, {"text": "x", "holdAfter": "soon", "holdFile": "/tmp/go"})


async def test_a_thought_streams_as_reasoning_before_the_text_and_counts_as_reasoning_tokens(
    tmp_path: Path,
) -> None:
    item = {"type": "reasoning", "id": "rs_1"}
    model = provider(
        tmp_path, {"thought": "Think first.", "reasoningItems": [item], "text": "Done."}
    )

    events = [e async for e in model.stream(ModelRequest([Message("user", "go")]))]

    assert events == [
        ThoughtDelta("Think "),
        ThoughtDelta("first."),
        ReasoningDone(Reasoning("scripted", "Think first.", (item,))),
        TextDelta("Done."),
        Usage(input=1, output=3, reasoning=2),
        Stop("stop"),
    ]
