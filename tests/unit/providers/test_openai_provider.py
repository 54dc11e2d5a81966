"""The OpenAI Chat Completions wire, against a server on 127.0.0.1 streaming real SSE bytes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.fixtures.model_server import ModelServer
from tests.fixtures.provider_servers import (
    Response,
    ScriptServer,
    collect,
    openai_reply,
    opened,
    sse,
)
from trellisd.config import ProviderSettings
from trellisd.providers import OPENROUTER_HEADERS, make_provider
from trellisd.providers.base import (
    Message,
    ModelRequest,
    Stop,
    TextDelta,
    ToolCallRequested,
    ToolSpec,
    Usage,
)
from trellisd.providers.http import HttpSettings
from trellisd.providers.openai import OpenAIProvider
from trellisd.records import ToolCall

READ = ToolSpec(
    "read_file",
    "Read a file",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)


@pytest.fixture
def server() -> Iterator[ScriptServer]:
    with ScriptServer() as s:
        yield s


def provider(server: ScriptServer, **kw: object) -> OpenAIProvider:
    http = HttpSettings(base_url=server.url + "/v1", model="gpt-4o-mini", api_key="sk-test-1234")
    return opened(OpenAIProvider(http, **kw))  # type: ignore[arg-type]


def ask(text: str = "hi", tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest([Message("system", "be brief"), Message("user", text)], tools or [])


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls_of(events: list[object]) -> list[ToolCall]:
    return [e.call for e in events if isinstance(e, ToolCallRequested)]


async def test_text_streams_piece_by_piece_then_usage_and_stop(server: ScriptServer) -> None:
    usage = {"prompt_tokens": 12, "completion_tokens": 3}
    server.queue(Response(chunks=openai_reply(["Hel", "lo ", "there"], usage=usage)))

    events = await collect(provider(server).stream(ask()))

    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta("Hel"),
        TextDelta("lo "),
        TextDelta("there"),
    ]
    assert events[-2:] == [Usage(12, 3, None), Stop("stop")]
    sent = server.requests[0]
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test-1234"
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.body["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
    ]


async def test_tool_call_arguments_split_over_many_chunks_are_joined(
    server: ScriptServer,
) -> None:
    arguments = {"path": "src/deeply/nested/module.py", "lines": [1, 200]}
    call = {"id": "call_abc", "name": "read_file", "arguments": arguments, "pieces": 9}
    server.queue(Response(chunks=openai_reply(tool_calls=[call])))

    events = await collect(provider(server).stream(ask(tools=[READ])))

    assert calls_of(events) == [ToolCall("call_abc", "read_file", arguments)]
    assert events[-1] == Stop("tool_calls")
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "read_file",
                "description": "Read a file",
                "parameters": READ.parameters,
            },
        }
    ]


async def test_two_tool_calls_in_one_response_are_kept_apart_by_index(
    server: ScriptServer,
) -> None:
    first = {"id": "call_1", "name": "read_file", "arguments": {"path": "a.py"}}
    second = {"id": "call_2", "name": "list_dir", "arguments": {"path": "."}}
    chunks = openai_reply(["Looking."], tool_calls=[first, second])
    # Interleave the two calls' pieces, as a server streaming them in parallel may.
    head, calls, tail = chunks[:2], chunks[2:-2], chunks[-2:]
    one, two = calls[: len(calls) // 2], calls[len(calls) // 2 :]
    mixed = [c for pair in zip(one, two, strict=True) for c in pair]
    server.queue(Response(chunks=head + mixed + tail))

    events = await collect(provider(server).stream(ask()))

    assert text_of(events) == "Looking."
    assert calls_of(events) == [
        ToolCall("call_1", "read_file", {"path": "a.py"}),
        ToolCall("call_2", "list_dir", {"path": "."}),
    ]


async def test_cached_tokens_are_reported_as_part_of_the_input(server: ScriptServer) -> None:
    usage = {
        "prompt_tokens": 2000,
        "completion_tokens": 50,
        "prompt_tokens_details": {"cached_tokens": 1536},
    }
    server.queue(Response(chunks=openai_reply(["ok"], usage=usage)))

    events = await collect(provider(server).stream(ask()))

    assert Usage(input=2000, output=50, cached=1536) in events


async def test_a_server_that_reports_no_usage_gives_unknown_not_zero(
    server: ScriptServer,
) -> None:
    server.queue(Response(chunks=openai_reply(["ok"])))

    events = await collect(provider(server).stream(ask()))

    assert Usage(None, None, None) in events


async def test_tool_calls_without_index_or_id_are_still_told_apart(server: ScriptServer) -> None:
    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    whole = [
        {"function": {"name": "read_file", "arguments": {"path": "a"}}},
        {"id": "x2", "function": {"name": "read_file", "arguments": '{"path": "b"}'}},
    ]
    chunks = [chunk({"tool_calls": [whole[0]]}), chunk({"tool_calls": [whole[1]]})]
    server.queue(Response(chunks=[*chunks, chunk({}, "stop"), b"data: [DONE]\n\n"]))

    events = await collect(provider(server).stream(ask()))

    calls = calls_of(events)
    assert [(c.name, c.arguments) for c in calls] == [
        ("read_file", {"path": "a"}),
        ("read_file", {"path": "b"}),
    ]
    assert calls[0].id and calls[0].id != calls[1].id
    assert events[-1] == Stop("tool_calls")


async def test_arguments_that_are_not_json_reach_the_loop_marked_unparsed(
    server: ScriptServer,
) -> None:
    piece = {"index": 0, "id": "c1", "function": {"name": "read_file", "arguments": '{"pa'}}
    server.queue(
        Response(
            chunks=[
                sse({"choices": [{"index": 0, "delta": {"tool_calls": [piece]}}]}),
                sse({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
                b"data: [DONE]\n\n",
            ]
        )
    )

    events = await collect(provider(server).stream(ask()))

    assert calls_of(events) == [ToolCall("c1", "read_file", {"_unparsed": '{"pa'})]


async def test_malformed_tool_call_chunks_surface_as_nameless_calls_not_a_crash(
    server: ScriptServer,
) -> None:
    def chunk(delta: object, finish: str | None = None) -> bytes:
        return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    nameless = {"index": 0, "id": "c1", "type": "function", "function": {"arguments": "{}"}}
    garbled = {"index": 1, "id": "c2", "function": "read_file"}
    server.queue(
        Response(
            chunks=[
                chunk({"content": "calling "}),
                chunk({"tool_calls": [nameless]}),
                chunk({"tool_calls": [garbled]}),
                chunk({"tool_calls": "not a list"}),
                chunk(["not", "an", "object"]),
                chunk({}, "tool_calls"),
                b"data: [DONE]\n\n",
            ]
        )
    )

    events = await collect(provider(server).stream(ask()))

    assert text_of(events) == "calling "
    assert calls_of(events) == [ToolCall("c1", "", {}), ToolCall("c2", "", {})]
    assert events[-1] == Stop("tool_calls")


async def test_history_with_tool_calls_and_results_goes_out_in_openai_shape(
    server: ScriptServer,
) -> None:
    server.queue(Response(chunks=openai_reply(["done"])))
    call = ToolCall("call_9", "read_file", {"path": "a.py"})
    history = [
        Message("user", "read a.py"),
        Message("assistant", "", (call,)),
        Message("tool", "print(1)", tool_call_id="call_9"),
    ]

    await collect(provider(server).stream(ModelRequest(history, [READ], 0.2, 300)))

    body = server.requests[0].body
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": "a.py"})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "print(1)"},
    ]
    assert body["temperature"] == 0.2
    assert body["max_tokens"] == 300  # not api.openai.com: the widely understood name


async def test_the_model_server_fixture_used_by_the_daemon_tests_is_understood() -> None:
    with ModelServer() as model:
        usage = {"prompt_tokens": 7, "completion_tokens": 2}
        model.reply(
            "two words",
            tool_calls=[{"name": "read_file", "arguments": {"path": "x"}}],
            usage=usage,
        )
        http = HttpSettings(base_url=model.url, model="m", api_key=None)
        events = await collect(opened(OpenAIProvider(http)).stream(ask()))

    assert text_of(events) == "two words"
    assert calls_of(events) == [ToolCall("call_0", "read_file", {"path": "x"})]
    assert events[-2:] == [Usage(7, 2, None), Stop("tool_calls")]


async def test_openrouter_sends_its_attribution_headers_to_the_configured_url(
    server: ScriptServer,
) -> None:
    server.queue(Response(chunks=openai_reply(["hi"])))
    settings = ProviderSettings(
        name="openrouter",
        model="anthropic/claude-sonnet-4.5",
        base_url=server.url + "/api/v1",
        api_key="sk-or-test-5678",
        key_source="OPENROUTER_API_KEY",
    )

    events = await collect(opened(make_provider(settings)).stream(ask()))

    assert text_of(events) == "hi"
    sent = server.requests[0]
    assert sent.path == "/api/v1/chat/completions"
    assert sent.body["model"] == "anthropic/claude-sonnet-4.5"
    assert sent.headers["http-referer"] == OPENROUTER_HEADERS["HTTP-Referer"]
    assert sent.headers["x-title"] == OPENROUTER_HEADERS["X-Title"]
    assert sent.headers["authorization"] == "Bearer sk-or-test-5678"


def test_api_openai_com_gets_max_completion_tokens_which_its_reasoning_models_need() -> None:
    http = HttpSettings(base_url="https://api.openai.com/v1", model="o4-mini", api_key=None)

    body = OpenAIProvider(http).body(ModelRequest([Message("user", "x")], [], None, 64))

    assert body["max_completion_tokens"] == 64
    assert "max_tokens" not in body
