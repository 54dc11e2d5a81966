"""Images, thinking and effort on the Anthropic Messages wire, against a server on 127.0.0.1.

The request bodies are checked against the ``anthropic`` SDK's
``MessageCreateParamsStreaming`` and the server streams the SDK's own raw stream events,
thinking and signature deltas included."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from anthropic.types import (
    InputJSONDelta,
    MessageDeltaUsage,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RedactedThinkingBlock,
    SignatureDelta,
    TextBlock,
    ThinkingBlock,
    ThinkingDelta,
    ToolUseBlock,
)
from anthropic.types import Message as SentMessage
from anthropic.types import TextDelta as SentText
from anthropic.types import Usage as SentUsage
from anthropic.types.message_create_params import MessageCreateParamsStreaming
from anthropic.types.raw_message_delta_event import Delta

from tests.fixtures.provider_servers import Response, ScriptServer, collect, opened, sse
from tests.fixtures.sdk_params import as_sent
from tests.fixtures.thoughts import reasoned
from trellisd.providers.anthropic import THINKING_BUDGETS, AnthropicProvider
from trellisd.providers.base import (
    Image,
    Message,
    ModelRequest,
    Reasoning,
    ReasoningDone,
    Stop,
    ThoughtDelta,
    ToolCallRequested,
    ToolSpec,
    Usage,
)
from trellisd.providers.http import HttpSettings
from trellisd.records import ToolCall

PATH = {"type": "object", "properties": {"path": {"type": "string"}}}
READ = ToolSpec("read_file", "Read a file", PATH)
SIGNATURE = "EqQBCkYIBRgCIkDg1" + "x" * 300 + "=="
REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
EPHEMERAL = {"type": "ephemeral"}
Event = (
    RawMessageStartEvent
    | RawContentBlockStartEvent
    | RawContentBlockDeltaEvent
    | RawContentBlockStopEvent
    | RawMessageDeltaEvent
    | RawMessageStopEvent
)


@pytest.fixture
def server() -> Iterator[ScriptServer]:
    with ScriptServer() as s:
        yield s


def provider(server: ScriptServer) -> AnthropicProvider:
    http = HttpSettings(base_url=server.url, model="claude-sonnet-4-5", api_key="sk-ant-1")
    return opened(AnthropicProvider(http))


def stream(*blocks: list[Event], stop: str = "end_turn") -> Response:
    """The message's events as the SDK defines them, framed as Anthropic frames them."""
    message = SentMessage(
        id="msg_1",
        type="message",
        role="assistant",
        model="claude-sonnet-4-5",
        content=[],
        stop_reason=None,
        stop_sequence=None,
        usage=SentUsage(input_tokens=40, output_tokens=1),
    )
    events: list[Event] = [RawMessageStartEvent(type="message_start", message=message)]
    for block in blocks:
        events += block
    events.append(
        RawMessageDeltaEvent(
            type="message_delta",
            delta=Delta(stop_reason=stop, stop_sequence=None),  # type: ignore[arg-type]
            usage=MessageDeltaUsage(output_tokens=180),
        )
    )
    events.append(RawMessageStopEvent(type="message_stop"))
    return Response(chunks=[sse(e.model_dump_json(), e.type) for e in events])


def block(index: int, start: Any, *deltas: Any) -> list[Event]:
    return [
        RawContentBlockStartEvent(type="content_block_start", index=index, content_block=start),
        *(
            RawContentBlockDeltaEvent(type="content_block_delta", index=index, delta=d)
            for d in deltas
        ),
        RawContentBlockStopEvent(type="content_block_stop", index=index),
    ]


def thinking(index: int, *pieces: str, signature: str | None = SIGNATURE) -> list[Event]:
    deltas: list[Any] = [ThinkingDelta(type="thinking_delta", thinking=p) for p in pieces]
    if signature is not None:
        deltas.append(SignatureDelta(type="signature_delta", signature=signature))
    return block(index, ThinkingBlock(type="thinking", thinking="", signature=""), *deltas)


def text(index: int, words: str) -> list[Event]:
    return block(index, TextBlock(type="text", text=""), SentText(type="text_delta", text=words))


def tool_use(index: int, call_id: str, arguments: dict[str, Any]) -> list[Event]:
    raw = json.dumps(arguments)
    pieces = [raw[: len(raw) // 2], raw[len(raw) // 2 :]]
    return block(
        index,
        ToolUseBlock(type="tool_use", id=call_id, name="read_file", input={}),
        *(InputJSONDelta(type="input_json_delta", partial_json=p) for p in pieces),
    )


def ask(*messages: Message, effort: Any = None, temperature: float | None = None) -> ModelRequest:
    return ModelRequest(list(messages), [READ], temperature, None, effort)


async def test_a_thinking_turn_with_a_tool_call_sends_its_signed_blocks_back_unchanged(
    server: ScriptServer,
) -> None:
    server.queue(
        stream(
            thinking(0, "The user wants a.py; ", "read it first."),
            block(1, RedactedThinkingBlock(type="redacted_thinking", data=REDACTED)),
            text(2, "Reading a.py."),
            tool_use(3, "toolu_1", {"path": "a.py"}),
            stop="tool_use",
        ),
        stream(text(0, "It prints 1.")),
    )
    question = Message("user", "what does a.py do?")

    events = await collect(provider(server).stream(ask(question, effort="medium")))

    assert [e for e in events if isinstance(e, ThoughtDelta)] == [
        ThoughtDelta("The user wants a.py; "),
        ThoughtDelta("read it first."),
    ]
    signed = {
        "type": "thinking",
        "thinking": "The user wants a.py; read it first.",
        "signature": SIGNATURE,
    }
    redacted = {"type": "redacted_thinking", "data": REDACTED}
    reasoning = Reasoning("anthropic", "The user wants a.py; read it first.", (signed, redacted))
    call = ToolCall("toolu_1", "read_file", {"path": "a.py"})
    assert events[-4:] == [
        ToolCallRequested(call),
        ReasoningDone(reasoning),
        Usage(input=40, output=180, cached=None),
        Stop("tool_calls"),
    ]

    history = [
        question,
        Message("assistant", "Reading a.py.", (call,), cache=True, reasoning=reasoning),
        Message("tool", "print(1)", tool_call_id="toolu_1"),
    ]
    await collect(provider(server).stream(ask(*history, effort="medium")))

    sent = as_sent(MessageCreateParamsStreaming, server.requests[1].body)
    assert sent["messages"][1] == {
        "role": "assistant",
        "content": [
            signed,
            redacted,
            {"type": "text", "text": "Reading a.py."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "read_file",
                "input": {"path": "a.py"},
                "cache_control": EPHEMERAL,
            },
        ],
    }
    assert sent["messages"][2]["content"][-1]["cache_control"] == EPHEMERAL
    assert reasoning.items == (signed, redacted)  # what was sent was a copy


async def test_thinking_blocks_each_start_a_paragraph_and_an_unsigned_one_is_not_sent_back(
    server: ScriptServer,
) -> None:
    server.queue(
        stream(thinking(0, "First."), thinking(1, "Second.", signature=None), text(2, "Done."))
    )

    events = await collect(provider(server).stream(ask(Message("user", "go"), effort="low")))

    first = {"type": "thinking", "thinking": "First.", "signature": SIGNATURE}
    assert reasoned(events) == (
        "First.\n\nSecond.",
        [Reasoning("anthropic", "First.\n\nSecond.", (first,))],
    )


async def test_another_providers_reasoning_is_dropped(server: ScriptServer) -> None:
    server.queue(stream(text(0, "ok")))
    call = ToolCall("call_1", "read_file", {"path": "a.py"})
    item = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA"}
    history = [
        Message("user", "read a.py"),
        Message("assistant", "", (call,), reasoning=Reasoning("openai-responses", "hm", (item,))),
        Message("tool", "print(1)", tool_call_id="call_1"),
    ]

    await collect(provider(server).stream(ask(*history)))

    sent = as_sent(MessageCreateParamsStreaming, server.requests[0].body)
    assert sent["messages"][1]["content"] == [
        {"type": "tool_use", "id": "call_1", "name": "read_file", "input": {"path": "a.py"}}
    ]


async def test_images_follow_the_text_as_base64_blocks_and_the_last_takes_the_breakpoint(
    server: ScriptServer,
) -> None:
    server.queue(stream(text(0, "A chart.")))
    data = base64.b64encode(PNG).decode()
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    history = [
        Message("user", "", images=(Image("image/png", PNG),)),
        Message("assistant", "An image."),
        Message("user", "and this?", images=(Image("image/png", PNG), Image("image/png", PNG))),
    ]

    await collect(provider(server).stream(ask(*history)))

    sent = as_sent(MessageCreateParamsStreaming, server.requests[0].body)
    assert sent["messages"][0] == {"role": "user", "content": [image]}
    assert sent["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "and this?"},
            image,
            {**image, "cache_control": EPHEMERAL},
        ],
    }


@pytest.mark.parametrize(
    ("effort", "max_tokens", "budget", "sent_max"),
    [
        ("low", None, 2048, 4096),  # the default already exceeds the budget
        ("low", 300, 2048, 2348),  # raised by the budget: the answer keeps its 300
        ("medium", None, 8192, 4096 + 8192),
        ("high", 30000, 24576, 30000),
        ("high", 24576, 24576, 2 * 24576),
    ],
)
def test_effort_turns_thinking_on_with_its_budget_and_leaves_out_the_temperature(
    effort: Any, max_tokens: int | None, budget: int, sent_max: int
) -> None:
    http = HttpSettings(base_url="https://api.anthropic.com", model="claude-sonnet-4-5")
    request = ModelRequest([Message("user", "x")], [], 0.2, max_tokens, effort)

    body = as_sent(MessageCreateParamsStreaming, AnthropicProvider(http).body(request))

    assert THINKING_BUDGETS[effort] == budget
    assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert body["max_tokens"] == sent_max > budget
    assert "temperature" not in body


async def test_without_images_reasoning_or_effort_the_request_is_as_before(
    server: ScriptServer,
) -> None:
    server.queue(stream(text(0, "ok")), stream(text(0, "ok")))
    history = [
        Message("system", "be brief"),
        Message("user", "hi"),
        Message("assistant", "hello"),
        Message("user", "again"),
    ]

    events = await collect(provider(server).stream(ask(*history)))
    await collect(provider(server).stream(ask(*history, temperature=0.2)))

    assert reasoned(events) == ("", [])
    sent = as_sent(MessageCreateParamsStreaming, server.requests[0].body)
    assert list(sent) == ["model", "max_tokens", "messages", "stream", "system", "tools"]
    assert sent["max_tokens"] == 4096
    assert [m["content"] for m in sent["messages"]] == [
        [{"type": "text", "text": "hi"}],
        [{"type": "text", "text": "hello"}],
        [{"type": "text", "text": "again", "cache_control": EPHEMERAL}],
    ]
    # A temperature still goes out as it did; the SDK's params no longer name it.
    assert server.requests[1].body == {**sent, "temperature": 0.2}
