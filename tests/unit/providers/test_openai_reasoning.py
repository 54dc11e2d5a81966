"""Images, reasoning and effort on the Chat Completions wire, against a server on 127.0.0.1.

The request bodies are checked against the ``openai`` SDK's ``CompletionCreateParamsStreaming``
and the streamed chunks are the SDK's own ``ChatCompletionChunk``s, carrying the reasoning
fields the servers that show reasoning add to the delta (DeepSeek's and vLLM's
``reasoning_content``, OpenRouter's ``reasoning`` and ``reasoning_details``)."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta
from openai.types.chat.completion_create_params import CompletionCreateParamsStreaming
from openai.types.completion_usage import CompletionTokensDetails

from tests.fixtures.provider_servers import Response, ScriptServer, collect, opened, sse
from tests.fixtures.sdk_params import as_sent
from tests.fixtures.thoughts import reasoned
from trellisd.providers.base import (
    Image,
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
from trellisd.providers.http import HttpSettings
from trellisd.providers.openai import OpenAIProvider
from trellisd.records import ToolCall

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8
JPEG = b"\xff\xd8\xff\xe0" + b"\x00\x10JFIF" * 100


@pytest.fixture
def server() -> Iterator[ScriptServer]:
    with ScriptServer() as s:
        yield s


def provider(
    server: ScriptServer, name: str = "openai", step_limit: int | None = None
) -> OpenAIProvider:
    http = HttpSettings(base_url=server.url + "/v1", model="deepseek-reasoner", api_key="sk-1")
    if step_limit is not None:
        http = replace(http, step_limit=step_limit)
    return opened(OpenAIProvider(http, name=name))


def chunk(
    delta: ChoiceDelta | None = None,
    finish: str | None = None,
    usage: CompletionUsage | None = None,
) -> bytes:
    """One streamed chunk, as the SDK defines it (and its extra fields as the servers add)."""
    choices = [] if delta is None else [Choice(index=0, delta=delta, finish_reason=finish)]  # type: ignore[arg-type]
    made = ChatCompletionChunk(
        id="chatcmpl-1",
        object="chat.completion.chunk",
        created=1_760_000_000,
        model="deepseek-reasoner",
        choices=choices,
        usage=usage,
    )
    return sse(made.model_dump_json())


def usage(reasoning: int | None) -> CompletionUsage:
    details = None if reasoning is None else CompletionTokensDetails(reasoning_tokens=reasoning)
    return CompletionUsage(
        prompt_tokens=30, completion_tokens=120, total_tokens=150, completion_tokens_details=details
    )


def reply(*deltas: ChoiceDelta, finish: str = "stop", reasoning: int | None = 90) -> Response:
    chunks = [chunk(ChoiceDelta(role="assistant", content=""))]
    chunks += [chunk(d) for d in deltas]
    chunks += [chunk(ChoiceDelta(), finish), chunk(usage=usage(reasoning)), b"data: [DONE]\n\n"]
    return Response(chunks=chunks)


async def test_reasoning_content_streams_as_thoughts_and_ends_whole_before_the_stop(
    server: ScriptServer,
) -> None:
    server.queue(
        reply(
            ChoiceDelta(reasoning_content="The user greets; "),  # type: ignore[call-arg]
            ChoiceDelta(reasoning_content="greet back."),  # type: ignore[call-arg]
            ChoiceDelta(content="Hello!"),
        )
    )

    events = await collect(provider(server).stream(ModelRequest([Message("user", "hi")])))

    assert [e for e in events if isinstance(e, ThoughtDelta)] == [
        ThoughtDelta("The user greets; "),
        ThoughtDelta("greet back."),
    ]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Hello!"
    assert events[-3:] == [
        ReasoningDone(Reasoning("openai", "The user greets; greet back.", ())),
        Usage(input=30, output=120, cached=None, reasoning=90),
        Stop("stop"),
    ]


async def test_openrouter_reasoning_sent_in_two_fields_is_shown_once(
    server: ScriptServer,
) -> None:
    def piece(text: str) -> ChoiceDelta:
        details = [{"type": "reasoning.text", "text": text, "format": "unknown", "index": 0}]
        return ChoiceDelta(content="", reasoning=text, reasoning_details=details)  # type: ignore[call-arg]

    encrypted = [{"type": "reasoning.encrypted", "data": "gAAAAB", "format": "unknown"}]
    server.queue(
        reply(
            piece("Plan: "),
            piece("answer."),
            ChoiceDelta(reasoning_details=encrypted),  # type: ignore[call-arg]
            ChoiceDelta(reasoning_details=[{"type": "reasoning.summary", "summary": " Done."}]),  # type: ignore[call-arg]
            ChoiceDelta(content="42"),
        )
    )

    events = await collect(
        provider(server, "openrouter").stream(ModelRequest([Message("user", "q")]))
    )

    assert reasoned(events) == (
        "Plan: answer. Done.",
        [Reasoning("openrouter", "Plan: answer. Done.", ())],
    )


async def test_a_thinking_turn_with_a_tool_call_sends_no_reasoning_back(
    server: ScriptServer,
) -> None:
    call = {"index": 0, "id": "call_1", "type": "function"}
    server.queue(
        reply(
            ChoiceDelta(reasoning_content="I should read it."),  # type: ignore[call-arg]
            ChoiceDelta.model_validate(
                {"tool_calls": [{**call, "function": {"name": "read_file", "arguments": ""}}]}
            ),
            ChoiceDelta.model_validate(
                {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "a.py"}'}}]}
            ),
            finish="tool_calls",
        ),
        reply(ChoiceDelta(content="It prints 1.")),
    )
    first = [Message("user", "what does a.py do?")]

    events = await collect(provider(server).stream(ModelRequest(first, effort="high")))
    (reasoning,) = reasoned(events)[1]
    (requested,) = [e.call for e in events if isinstance(e, ToolCallRequested)]
    history = [
        *first,
        Message("assistant", "", (requested,), reasoning=reasoning),
        Message("tool", "print(1)", tool_call_id="call_1"),
    ]
    await collect(provider(server).stream(ModelRequest(history, effort="high")))

    assert requested == ToolCall("call_1", "read_file", {"path": "a.py"})
    sent = as_sent(CompletionCreateParamsStreaming, server.requests[1].body)
    assert sent["reasoning_effort"] == "high"
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "read_file", "arguments": '{"path": "a.py"}'},
            }
        ],
    }


async def test_images_follow_the_text_as_data_urls_and_are_not_logged(
    server: ScriptServer, caplog: pytest.LogCaptureFixture
) -> None:
    server.queue(reply(ChoiceDelta(content="A chart."), reasoning=None))
    images = (Image("image/png", PNG), Image("image/jpeg", JPEG))
    request = ModelRequest(
        [Message("system", "be brief"), Message("user", "what is this?", images=images)]
    )

    with caplog.at_level(logging.DEBUG):
        events = await collect(provider(server).stream(request))

    assert events[-2:] == [Usage(30, 120, None, None), Stop("stop")]
    sent = as_sent(CompletionCreateParamsStreaming, server.requests[0].body)
    png = base64.b64encode(PNG).decode()
    assert sent["messages"][1] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "what is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
            {
                "type": "image_url",
                "image_url": {"url": f"data:image/jpeg;base64,{base64.b64encode(JPEG).decode()}"},
            },
        ],
    }
    assert png[:40] not in caplog.text


@pytest.mark.parametrize("effort", ["low", "medium", "high"])
def test_effort_is_sent_as_reasoning_effort(effort: Any) -> None:
    http = HttpSettings(base_url="https://api.openai.com/v1", model="o4-mini", api_key=None)

    body = OpenAIProvider(http).body(ModelRequest([Message("user", "x")], effort=effort))

    assert as_sent(CompletionCreateParamsStreaming, body)["reasoning_effort"] == effort


async def test_without_images_reasoning_or_effort_the_request_is_as_before(
    server: ScriptServer,
) -> None:
    server.queue(reply(ChoiceDelta(content="ok"), reasoning=None))
    history = [
        Message("system", "be brief"),
        Message("user", "hi"),
        # Another wire's reasoning, carried by the history: nothing of it goes out.
        Message("assistant", "hello", reasoning=Reasoning("anthropic", "hm", ({"type": "x"},))),
        Message("user", "again"),
    ]

    events = await collect(provider(server).stream(ModelRequest(history, temperature=0.3)))

    assert reasoned(events) == ("", [])
    assert Usage(30, 120, None, None) in events
    assert as_sent(CompletionCreateParamsStreaming, server.requests[0].body) == {
        "model": "deepseek-reasoner",
        "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"},
            {"role": "user", "content": "again"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.3,
    }


async def test_reasoning_without_end_is_stopped_at_the_step_limit(server: ScriptServer) -> None:
    server.queue(reply(*[ChoiceDelta(reasoning_content="x" * 100) for _ in range(20)]))  # type: ignore[call-arg]

    events: list[object] = []
    with pytest.raises(ProviderError, match="reasoning in one step went past"):
        async for event in provider(server, step_limit=1024).stream(
            ModelRequest([Message("user", "q")])
        ):
            events.append(event)

    assert len(reasoned(events)[0]) <= 1024
