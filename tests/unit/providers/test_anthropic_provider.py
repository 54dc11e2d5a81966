"""The Anthropic Messages wire, against a server on 127.0.0.1 streaming real SSE bytes."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from tests.fixtures.provider_servers import (
    Response,
    ScriptServer,
    anthropic_reply,
    collect,
    collect_failure,
    opened,
    sse,
)
from trellisd.config import ProviderSettings
from trellisd.providers import make_provider
from trellisd.providers.anthropic import AnthropicProvider
from trellisd.providers.base import (
    Message,
    ModelRequest,
    Retrying,
    Stop,
    TextDelta,
    ToolCallRequested,
    ToolSpec,
    Usage,
)
from trellisd.providers.http import HttpSettings
from trellisd.providers.retry import Backoff
from trellisd.records import ToolCall

READ = ToolSpec(
    "read_file",
    "Read a file",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
KEY = "sk-ant-test-0000"


@pytest.fixture
def server() -> Iterator[ScriptServer]:
    with ScriptServer() as s:
        yield s


def provider(server: ScriptServer, base: str = "") -> AnthropicProvider:
    http = HttpSettings(
        base_url=server.url + base,
        model="claude-sonnet-4-5",
        api_key=KEY,
        backoff=Backoff(0.01, 0.02),
    )
    return opened(AnthropicProvider(http))


def ask(text: str = "hi", tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest([Message("system", "be brief"), Message("user", text)], tools or [])


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls_of(events: list[object]) -> list[ToolCall]:
    return [e.call for e in events if isinstance(e, ToolCallRequested)]


async def test_text_streams_with_the_anthropic_headers_and_request_shape(
    server: ScriptServer,
) -> None:
    usage = {"input_tokens": 20, "output_tokens": 1}
    server.queue(Response(chunks=anthropic_reply(["Hel", "lo"], usage=usage, output_tokens=4)))

    events = await collect(provider(server).stream(ask(tools=[READ])))

    assert [e for e in events if isinstance(e, TextDelta)] == [TextDelta("Hel"), TextDelta("lo")]
    assert events[-2:] == [Usage(20, 4, None), Stop("stop")]
    sent = server.requests[0]
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert sent.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "messages": [
            {
                "role": "user",
                "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
        "stream": True,
        "system": [{"type": "text", "text": "be brief", "cache_control": {"type": "ephemeral"}}],
        "tools": [
            {
                "name": "read_file",
                "description": "Read a file",
                "input_schema": READ.parameters,
                "cache_control": {"type": "ephemeral"},
            }
        ],
    }


async def test_tool_use_input_split_over_many_deltas_is_joined(server: ScriptServer) -> None:
    arguments = {"path": "src/deeply/nested/module.py", "lines": [1, 200]}
    call = {"id": "toolu_1", "name": "read_file", "arguments": arguments, "pieces": 11}
    server.queue(Response(chunks=anthropic_reply(["Let me look."], tool_calls=[call])))

    events = await collect(provider(server).stream(ask(tools=[READ])))

    assert text_of(events) == "Let me look."
    assert calls_of(events) == [ToolCall("toolu_1", "read_file", arguments)]
    assert events[-1] == Stop("tool_calls")


async def test_two_tool_uses_in_one_response_come_out_in_order(server: ScriptServer) -> None:
    calls = [
        {"id": "toolu_a", "name": "read_file", "arguments": {"path": "a.py"}},
        {"id": "toolu_b", "name": "list_dir", "arguments": {}},
    ]
    server.queue(Response(chunks=anthropic_reply(tool_calls=calls)))

    events = await collect(provider(server).stream(ask()))

    assert calls_of(events) == [
        ToolCall("toolu_a", "read_file", {"path": "a.py"}),
        ToolCall("toolu_b", "list_dir", {}),
    ]


async def test_input_tokens_include_cache_reads_and_writes_and_cached_is_the_reads(
    server: ScriptServer,
) -> None:
    usage = {
        "input_tokens": 30,
        "cache_read_input_tokens": 1800,
        "cache_creation_input_tokens": 200,
        "output_tokens": 1,
    }
    server.queue(Response(chunks=anthropic_reply(["ok"], usage=usage, output_tokens=25)))

    events = await collect(provider(server).stream(ask()))

    assert Usage(input=2030, output=25, cached=1800) in events


async def test_no_usage_reported_means_unknown_not_zero(server: ScriptServer) -> None:
    server.queue(Response(chunks=anthropic_reply(["ok"], usage={})))

    events = await collect(provider(server).stream(ask()))

    assert Usage(None, None, None) in events


async def test_max_tokens_stop_is_told_in_the_common_words(server: ScriptServer) -> None:
    server.queue(Response(chunks=anthropic_reply(["cut sh"], stop_reason="max_tokens")))

    events = await collect(
        provider(server).stream(ModelRequest([Message("user", "x")], [], None, 5))
    )

    assert events[-1] == Stop("length")
    assert server.requests[0].body["max_tokens"] == 5


async def test_tool_results_go_back_as_one_user_message_of_tool_result_blocks(
    server: ScriptServer,
) -> None:
    server.queue(Response(chunks=anthropic_reply(["both read"])))
    a = ToolCall("toolu_a", "read_file", {"path": "a.py"})
    b = ToolCall("toolu_b", "read_file", {"path": "b.py"})
    history = [
        Message("system", "you are careful"),
        Message("user", "read both"),
        Message("assistant", "Reading.", (a, b)),
        Message("tool", "A", tool_call_id="toolu_a"),
        Message("tool", "B", tool_call_id="toolu_b"),
        Message("user", "and now?"),
    ]

    await collect(provider(server).stream(ModelRequest(history, [READ])))

    body = server.requests[0].body
    assert body["system"] == [
        {"type": "text", "text": "you are careful", "cache_control": {"type": "ephemeral"}}
    ]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "read both"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading."},
                {
                    "type": "tool_use",
                    "id": "toolu_a",
                    "name": "read_file",
                    "input": {"path": "a.py"},
                },
                {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "read_file",
                    "input": {"path": "b.py"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "A"},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "B"},
                {"type": "text", "text": "and now?", "cache_control": {"type": "ephemeral"}},
            ],
        },
    ]


async def test_unknown_events_and_malformed_lines_are_skipped_and_logged(
    server: ScriptServer, caplog: pytest.LogCaptureFixture
) -> None:
    chunks = anthropic_reply(["fine"])
    noise = [
        sse({"type": "brand_new_event", "x": 1}, "brand_new_event"),
        b"event: content_block_delta\ndata: {not json\n\n",
        b"this line is not SSE at all\n\n",
    ]
    server.queue(Response(chunks=chunks[:3] + noise + chunks[3:]))

    with caplog.at_level(logging.WARNING):
        events = await collect(provider(server).stream(ask()))

    assert text_of(events) == "fine"
    assert events[-1] == Stop("stop")
    assert "brand_new_event" in caplog.text
    assert "malformed" in caplog.text


async def test_malformed_blocks_surface_as_nameless_calls_not_a_crash(
    server: ScriptServer,
) -> None:
    chunks = anthropic_reply(["calling"])
    start = {"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use"}}
    garbled = {"type": "content_block_delta", "index": 1, "delta": "not an object"}
    blocks = [
        sse(start, "content_block_start"),
        sse(garbled, "content_block_delta"),
        sse(
            {"type": "content_block_start", "index": 2, "content_block": []}, "content_block_start"
        ),
        sse({"type": "content_block_stop", "index": 1}, "content_block_stop"),
    ]
    server.queue(Response(chunks=chunks[:-2] + blocks + chunks[-2:]))

    events = await collect(provider(server).stream(ask()))

    assert text_of(events) == "calling"
    assert [(c.name, c.arguments) for c in calls_of(events)] == [("", {})]


async def test_an_error_event_mid_stream_is_a_provider_error(server: ScriptServer) -> None:
    chunks = anthropic_reply(["partial answer"])
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "too long"}}
    server.queue(Response(chunks=chunks[:5] + [sse(error, "error")]))

    events, exc = await collect_failure(provider(server).stream(ask()))

    assert text_of(events) == "partial answer"
    assert "too long" in str(exc)
    assert len(server.requests) == 1


async def test_overloaded_before_any_text_is_retried(server: ScriptServer) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.queue(
        Response(chunks=anthropic_reply()[:1] + [sse(overloaded, "error")]),
        Response(chunks=anthropic_reply(["second time lucky"])),
    )

    events = await collect(provider(server).stream(ask()))

    assert text_of(events) == "second time lucky"
    assert [type(e) for e in events][0] is Retrying
    assert len(server.requests) == 2


async def test_a_base_url_ending_in_v1_is_not_doubled(server: ScriptServer) -> None:
    server.queue(Response(chunks=anthropic_reply(["ok"])))

    await collect(provider(server, base="/v1").stream(ask()))

    assert server.requests[0].path == "/v1/messages"


async def test_make_provider_builds_the_anthropic_wire(server: ScriptServer) -> None:
    server.queue(Response(chunks=anthropic_reply(["hello"])))
    settings = ProviderSettings(name="anthropic", base_url=server.url, api_key=KEY)

    made = opened(make_provider(settings))
    events = await collect(made.stream(ask()))

    assert made.model == "claude-sonnet-4-5"
    assert text_of(events) == "hello"


async def test_the_stable_prefix_carries_cache_breakpoints_and_cache_reads_are_counted(
    server: ScriptServer,
) -> None:
    """The system, the tools and the whole conversation are marked for the prompt cache, so
    the next call, which starts with this one, reads it all; what the cache served comes
    back as ``Usage.cached``, inside ``input``."""
    figures = {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 1}
    server.queue(Response(chunks=anthropic_reply(["again"], usage=figures, output_tokens=1)))
    history = [
        Message("system", "you are careful"),
        Message("user", "first question"),
        Message("assistant", "first answer"),
        Message("user", "second question"),
    ]

    events = await collect(provider(server).stream(ModelRequest(history, [READ])))

    assert [e for e in events if isinstance(e, Usage)] == [Usage(100, 1, 90)]
    body = server.requests[0].body
    ephemeral = {"type": "ephemeral"}
    assert body["system"][-1]["cache_control"] == ephemeral
    assert body["tools"][-1]["cache_control"] == ephemeral
    assert body["messages"][2]["content"][-1] == {
        "type": "text",
        "text": "second question",
        "cache_control": ephemeral,
    }
    assert "cache_control" not in body["messages"][0]["content"][-1]
    assert "cache_control" not in body["messages"][1]["content"][-1]
