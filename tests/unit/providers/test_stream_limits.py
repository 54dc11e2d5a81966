"""What one response may make the daemon hold: its tool calls are capped on both wires (the
agent loop caps the text), against a server on 127.0.0.1 streaming real SSE bytes; and a line
of the stream that comes in many pieces."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from tests.fixtures.provider_servers import (
    Response,
    ScriptServer,
    anthropic_reply,
    collect,
    collect_failure,
    openai_reply,
    opened,
)
from trellisd.providers.anthropic import AnthropicProvider
from trellisd.providers.base import Message, ModelRequest, ToolCallRequested
from trellisd.providers.http import HttpSettings
from trellisd.providers.openai import OpenAIProvider
from trellisd.providers.sse import (
    MAX_EVENT_BYTES,
    ServerSentEvent,
    StreamBounds,
    StreamTooLarge,
    read_events,
)

LIMIT = 4096
CAPPED = (
    "the model's tool calls in one step went past 4 KiB; the call was ended to bound the memory"
    " it may take"
)


@pytest.fixture
def server() -> Iterator[ScriptServer]:
    with ScriptServer() as s:
        yield s


def settings(server: ScriptServer, base: str) -> HttpSettings:
    return HttpSettings(
        base_url=server.url + base, model="m", api_key="sk-test-1234", step_limit=LIMIT
    )


def openai(server: ScriptServer) -> OpenAIProvider:
    return opened(OpenAIProvider(settings(server, "/v1")))


def anthropic(server: ScriptServer) -> AnthropicProvider:
    return opened(AnthropicProvider(settings(server, "")))


ASK = ModelRequest([Message("user", "write it")])


def big_call(size: int) -> dict[str, object]:
    return {"id": "call_1", "name": "write_file", "arguments": {"text": "x" * size}, "pieces": 64}


async def test_openai_arguments_past_the_limit_end_the_call(server: ScriptServer) -> None:
    server.queue(Response(chunks=openai_reply(tool_calls=[big_call(LIMIT)])))

    events, error = await collect_failure(openai(server).stream(ASK))

    assert str(error) == CAPPED
    assert not [e for e in events if isinstance(e, ToolCallRequested)]


async def test_anthropic_arguments_past_the_limit_end_the_call(server: ScriptServer) -> None:
    server.queue(Response(chunks=anthropic_reply(tool_calls=[big_call(LIMIT)])))

    events, error = await collect_failure(anthropic(server).stream(ASK))

    assert str(error) == CAPPED
    assert not [e for e in events if isinstance(e, ToolCallRequested)]


async def test_many_small_calls_count_against_the_limit_too(server: ScriptServer) -> None:
    calls = [{"id": f"call_{i}", "name": "list_dir", "arguments": {}} for i in range(20)]
    server.queue(Response(chunks=openai_reply(tool_calls=calls)))
    server.queue(Response(chunks=anthropic_reply(tool_calls=calls)))

    _, error = await collect_failure(openai(server).stream(ASK))
    assert str(error) == CAPPED
    _, error = await collect_failure(anthropic(server).stream(ASK))
    assert str(error) == CAPPED


async def test_calls_within_the_limit_come_whole(server: ScriptServer) -> None:
    server.queue(Response(chunks=openai_reply(tool_calls=[big_call(LIMIT // 2)])))

    events = await collect(openai(server).stream(ASK))

    [call] = [e.call for e in events if isinstance(e, ToolCallRequested)]
    assert call.arguments == {"text": "x" * (LIMIT // 2)}


async def chunked(*chunks: bytes) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk


async def events_of(*chunks: bytes, cap: int = MAX_EVENT_BYTES) -> list[ServerSentEvent]:
    bounds = StreamBounds(read_timeout=60.0, max_event_bytes=cap)
    return [e async for batch in read_events(chunked(*chunks), bounds) for e in batch]


async def test_a_line_that_comes_in_many_pieces_is_read_whole() -> None:
    line = b"data: " + b"x" * 10_000
    pieces = [line[i : i + 7] for i in range(0, len(line), 7)]

    events = await events_of(*pieces, b"\r", b"\n\r", b"\n", b"data: next\r\r\n")

    assert events == [ServerSentEvent(data="x" * 10_000), ServerSentEvent(data="next")]


async def test_a_line_past_the_cap_in_many_pieces_ends_the_stream() -> None:
    pieces = [b"data: "] + [b"y" * 100] * 50

    with pytest.raises(StreamTooLarge, match="a line of the stream is longer than 4 KiB"):
        await events_of(*pieces, cap=4096)
