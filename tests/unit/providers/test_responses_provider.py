"""The OpenAI Responses wire, against a server on 127.0.0.1 that streams the SDK's own event
models as SSE bytes and checks each request body against the SDK's request params."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.fixtures.provider_servers import Response, collect, collect_failure, opened
from tests.fixtures.responses_server import (
    Reply,
    ResponsesServer,
    encrypted,
    invalid_body,
    reply,
    usage,
)
from trellisd.config import ProviderSettings, provider_from_env
from trellisd.providers import make_provider
from trellisd.providers.base import (
    Image,
    Message,
    ModelRequest,
    Reasoning,
    ReasoningDone,
    Retrying,
    Stop,
    TextDelta,
    ThoughtDelta,
    ToolCallRequested,
    ToolSpec,
    Usage,
)
from trellisd.providers.http import HttpSettings
from trellisd.providers.responses import ResponsesProvider
from trellisd.records import ProviderChoice, ToolCall

KEY = "sk-test-responses-1234"
READ = ToolSpec(
    "read_file",
    "Read a file",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.fixture
def server() -> Iterator[ResponsesServer]:
    answering = ResponsesServer()
    with answering:
        yield answering
    assert answering.invalid == [], "the daemon sent a body the SDK's request params refuse"


def provider(server: ResponsesServer, **http: Any) -> ResponsesProvider:
    settings = HttpSettings(base_url=server.url + "/v1", model="gpt-5-mini", api_key=KEY, **http)
    return opened(ResponsesProvider(settings))


def ask(text: str = "hi", tools: list[ToolSpec] | None = None) -> ModelRequest:
    return ModelRequest([Message("system", "be brief"), Message("user", text)], tools or [])


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def thoughts_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, ThoughtDelta))


def calls_of(events: list[object]) -> list[ToolCall]:
    return [e.call for e in events if isinstance(e, ToolCallRequested)]


def reasoning_of(events: list[object]) -> list[Reasoning]:
    return [e.reasoning for e in events if isinstance(e, ReasoningDone)]


async def test_text_streams_piece_by_piece_then_usage_and_stop(server: ResponsesServer) -> None:
    server.queue(Response(chunks=reply(["Hel", "lo ", "there"], figures=usage(12, 3))))

    events = await collect(provider(server).stream(ask()))

    assert [e for e in events if isinstance(e, TextDelta)] == [
        TextDelta("Hel"),
        TextDelta("lo "),
        TextDelta("there"),
    ]
    assert events[-2:] == [Usage(12, 3, cached=0, reasoning=0), Stop("stop")]
    assert reasoning_of(events) == []
    sent = server.requests[0]
    assert sent.path == "/v1/responses"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body == {
        "model": "gpt-5-mini",
        "instructions": "be brief",
        "input": [{"type": "message", "role": "user", "content": [_text("hi")]}],
        "stream": True,
        "store": False,
    }


async def test_a_tool_call_round_trip_sends_the_call_and_its_output_with_one_call_id(
    server: ResponsesServer,
) -> None:
    arguments = {"path": "src/deeply/nested/module.py", "lines": [1, 200]}
    server.queue(
        Response(
            chunks=Reply()
            .text(["Looking."])
            .call("call_7", "read_file", arguments)
            .completed()
            .chunks()
        ),
        Response(chunks=reply(["It prints 1."])),
    )
    wire = provider(server)

    first = await collect(wire.stream(ask("read it", [READ])))

    assert text_of(first) == "Looking."
    assert calls_of(first) == [ToolCall("call_7", "read_file", arguments)]
    assert first[-1] == Stop("tool_calls")
    assert server.requests[0].body["tools"] == [
        {
            "type": "function",
            "name": "read_file",
            "description": "Read a file",
            "parameters": READ.parameters,
            "strict": False,
        }
    ]

    history = [
        *ask("read it").messages,
        Message("assistant", "Looking.", calls_of(first)),
        Message("tool", "print(1)", tool_call_id="call_7"),
    ]
    second = await collect(wire.stream(ModelRequest(history, [READ])))

    assert text_of(second) == "It prints 1."
    assert server.requests[1].body["input"][1:] == [
        {"type": "message", "role": "assistant", "content": "Looking."},
        {
            "type": "function_call",
            "call_id": "call_7",
            "name": "read_file",
            "arguments": json.dumps(arguments),
        },
        {"type": "function_call_output", "call_id": "call_7", "output": "print(1)"},
    ]


async def test_the_reasoning_summary_streams_and_its_item_goes_back_unchanged_next_call(
    server: ResponsesServer,
) -> None:
    answer = Reply().reasoning(["Check ", "the file."]).call("call_1", "read_file", {"path": "a"})
    server.queue(
        Response(chunks=answer.completed(usage(40, 30, reasoning=24)).chunks()),
        Response(chunks=reply(["Done."])),
    )
    wire = provider(server)
    request = ModelRequest(ask("think").messages, [READ], effort="high")

    first = await collect(wire.stream(request))

    assert thoughts_of(first) == "Check the file."
    (reasoning,) = reasoning_of(first)
    streamed = answer.streamed_item("rs_1")
    assert streamed["content"] is None and streamed["status"] is None  # a request takes no null
    assert reasoning == Reasoning(
        "openai-responses",
        "Check the file.",
        ({k: v for k, v in streamed.items() if v is not None},),
    )
    assert reasoning.items[0]["encrypted_content"] == encrypted("rs_1")
    assert first[-3:] == [ReasoningDone(reasoning), Usage(40, 30, 0, 24), Stop("tool_calls")]
    body = server.requests[0].body
    assert body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["store"] is False

    history = [
        *request.messages,
        Message("assistant", "", calls_of(first), reasoning=reasoning),
        Message("tool", "x = 1", tool_call_id="call_1"),
    ]
    await collect(wire.stream(ModelRequest(history, [READ], effort="high")))

    assert server.requests[1].body["input"][1:] == [
        reasoning.items[0],
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "read_file",
            "arguments": json.dumps({"path": "a"}),
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "x = 1"},
    ]


def test_reasoning_made_by_another_wire_is_not_sent() -> None:
    http = HttpSettings(base_url="https://api.openai.com/v1", model="gpt-5", api_key=None)
    signed = {"type": "thinking", "thinking": "hmm", "signature": "sig"}
    history = [
        Message("user", "hi"),
        Message("assistant", "hello", reasoning=Reasoning("anthropic", "hmm", (signed,))),
        Message("user", "again"),
    ]

    body = ResponsesProvider(http).body(ModelRequest(history))

    assert [item.get("type") for item in body["input"]] == ["message"] * 3
    assert invalid_body(body) is None


async def test_a_reasoning_item_without_encrypted_content_is_summarized_but_not_kept(
    server: ResponsesServer,
) -> None:
    server.queue(
        Response(
            chunks=Reply().reasoning(["Brief."], sealed=False).text(["ok"]).completed().chunks()
        )
    )

    events = await collect(provider(server).stream(ask()))

    assert reasoning_of(events) == [Reasoning("openai-responses", "Brief.", ())]


async def test_two_reasoning_items_are_one_summary_in_paragraphs(server: ResponsesServer) -> None:
    answer = Reply().reasoning(["First ", "look."]).reasoning(["Then", " act."], item_id="rs_2")
    server.queue(Response(chunks=answer.text(["ok"]).completed().chunks()))

    events = await collect(provider(server).stream(ask()))

    assert thoughts_of(events) == "First look.\n\nThen act."
    (reasoning,) = reasoning_of(events)
    assert reasoning.text == "First look.\n\nThen act."
    assert [item["id"] for item in reasoning.items] == ["rs_1", "rs_2"]


async def test_a_summary_that_comes_only_with_its_item_is_still_shown(
    server: ResponsesServer,
) -> None:
    answer = Reply().reasoning(["Quietly ", "decided."], streamed=False).text(["ok"])
    server.queue(Response(chunks=answer.completed().chunks()))

    events = await collect(provider(server).stream(ask()))

    assert thoughts_of(events) == "Quietly decided."
    assert reasoning_of(events)[0].text == "Quietly decided."


def test_a_later_system_message_stays_in_its_place_and_the_first_are_instructions() -> None:
    http = HttpSettings(base_url="https://api.openai.com/v1", model="gpt-5", api_key=None)
    history = [
        Message("system", "be brief"),
        Message("system", "use tools"),
        Message("user", "hi"),
        Message("system", "the earlier turns, summarized"),
        Message("user", "again"),
    ]

    body = ResponsesProvider(http).body(ModelRequest(history, temperature=0.3))

    assert body["instructions"] == "be brief\n\nuse tools"
    assert body["input"][1] == {
        "type": "message",
        "role": "system",
        "content": "the earlier turns, summarized",
    }
    assert body["temperature"] == 0.3 and "reasoning" not in body and "include" not in body
    assert invalid_body(body) is None


async def test_images_go_as_input_image_data_urls_after_the_text(server: ResponsesServer) -> None:
    server.queue(Response(chunks=reply(["A red dot."])))
    shown = Message("user", "what is this?", images=(Image("image/png", PIXEL),))

    await collect(provider(server).stream(ModelRequest([shown])))

    (message,) = server.requests[0].body["input"]
    assert message["content"] == [
        _text("what is this?"),
        {
            "type": "input_image",
            "image_url": "data:image/png;base64," + base64.b64encode(PIXEL).decode(),
            "detail": "auto",
        },
    ]


async def test_usage_reports_cached_and_reasoning_tokens(server: ResponsesServer) -> None:
    server.queue(
        Response(chunks=reply(["ok"], figures=usage(2000, 300, cached=1536, reasoning=256)))
    )

    events = await collect(provider(server).stream(ask()))

    assert Usage(input=2000, output=300, cached=1536, reasoning=256) in events


async def test_the_output_token_limit_ends_the_call_with_length(server: ResponsesServer) -> None:
    answer = Reply().text(["Once upon"]).incomplete("max_output_tokens", usage(10, 64))
    server.queue(Response(chunks=answer.chunks()))

    events = await collect(provider(server).stream(ModelRequest(ask().messages, max_tokens=64)))

    assert text_of(events) == "Once upon"
    assert events[-1] == Stop("length")
    assert server.requests[0].body["max_output_tokens"] == 64


@pytest.mark.parametrize(
    ("why", "stop"), [("max_output_tokens", "length"), ("content_filter", "content_filter")]
)
async def test_an_incomplete_response_says_why_it_stopped(
    server: ResponsesServer, why: str, stop: str
) -> None:
    server.queue(Response(chunks=Reply().text(["Once"]).incomplete(why).chunks()))

    events = await collect(provider(server).stream(ask()))

    assert events[-2:] == [Usage(None, None), Stop(stop)]


async def test_a_429_is_retried_after_the_wait_it_asks_for(server: ResponsesServer) -> None:
    limited = {"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}
    server.queue(
        Response(status=429, headers={"retry-after-ms": "5"}, body=json.dumps(limited).encode()),
        Response(chunks=reply(["made it"])),
    )

    events = await collect(provider(server).stream(ask()))

    assert isinstance(events[0], Retrying)
    assert (events[0].attempt, events[0].delay) == (2, 0.005)
    assert "429" in events[0].reason and "Rate limit reached" in events[0].reason
    assert text_of(events) == "made it"
    assert len(server.requests) == 2


async def test_a_refused_key_is_a_clear_error_that_is_not_retried(
    server: ResponsesServer,
) -> None:
    refused = {"error": {"message": "Incorrect API key provided", "code": "invalid_api_key"}}
    server.queue(Response(status=401, body=json.dumps(refused).encode()))
    settings = provider_from_env(
        {
            "TRELLISD_PROVIDER": "openai-responses",
            "OPENAI_API_KEY": KEY,
            "TRELLISD_BASE_URL": server.url,
        }
    )

    events, error = await collect_failure(opened(make_provider(settings)).stream(ask()))

    assert events == [] and len(server.requests) == 1
    assert error.status == 401
    assert str(error) == (
        f"the provider at {server.url} refused the API key (HTTP 401); the key came from"
        " OPENAI_API_KEY: Incorrect API key provided"
    )


async def test_a_failed_response_is_a_clear_error(server: ResponsesServer) -> None:
    answer = Reply().text(["Part"]).failed("server_error", "The model crashed.")
    server.queue(Response(chunks=answer.chunks()))

    events, error = await collect_failure(provider(server).stream(ask()))

    assert text_of(events) == "Part"
    assert str(error) == (
        f"the provider at {server.url}/v1 reported an error mid-stream: server_error:"
        " The model crashed."
    )
    assert not error.too_long


async def test_a_context_too_long_for_the_model_is_too_long(server: ResponsesServer) -> None:
    refused = {
        "error": {
            "message": "Your input exceeds the context window of this model.",
            "type": "invalid_request_error",
            "param": "input",
            "code": "context_length_exceeded",
        }
    }
    server.queue(Response(status=400, body=json.dumps(refused).encode()))
    server.queue(
        Response(chunks=Reply().error("context_length_exceeded", "Too many tokens.").chunks())
    )
    wire = provider(server)

    _, status = await collect_failure(wire.stream(ask()))
    _, streamed = await collect_failure(wire.stream(ask()))

    assert status.too_long and status.status == 400 and not status.retryable
    assert streamed.too_long
    assert "Too many tokens." in str(streamed)


def test_the_environment_and_the_config_name_the_wire_with_openais_key_and_url() -> None:
    settings = provider_from_env({"TRELLISD_PROVIDER": "openai-responses", "OPENAI_API_KEY": KEY})

    wire = make_provider(settings)

    assert isinstance(wire, ResponsesProvider) and wire.name == "openai-responses"
    assert wire.http.base_url == "https://api.openai.com/v1"
    assert (wire.http.api_key, wire.http.key_source) == (KEY, "OPENAI_API_KEY")
    assert settings.keys == (("OPENAI_API_KEY", KEY),)
    chosen = ProviderSettings(name="openai", keys=settings.keys)
    assert chosen.merged(ProviderChoice(name="openai-responses"), "provider").api_key == KEY


def _text(text: str) -> dict[str, str]:
    return {"type": "input_text", "text": text}


async def test_tool_calls_past_the_step_limit_end_the_call(server: ResponsesServer) -> None:
    huge = {"path": "x" * 4000}
    server.queue(Response(chunks=reply(calls=[("call_1", "read_file", huge)])))

    events, error = await collect_failure(provider(server, step_limit=1024).stream(ask()))

    assert calls_of(events) == []
    assert "tool calls in one step went past 1 KiB" in str(error)
