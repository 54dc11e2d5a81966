"""How both wires fail: statuses, retries, dropped and stalled streams, unreachable hosts, and
the API key kept out of every message and log line. Real servers on 127.0.0.1 throughout."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import traceback
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from tests.fixtures.provider_servers import (
    Response,
    ScriptServer,
    anthropic_reply,
    collect,
    collect_failure,
    openai_reply,
    opened,
    sse,
)
from tests.fixtures.waits import SAFETY_NET
from trellisd.config import ProviderSettings
from trellisd.providers import make_provider
from trellisd.providers.anthropic import AnthropicProvider
from trellisd.providers.base import (
    Message,
    ModelRequest,
    Provider,
    Retrying,
    Stop,
    TextDelta,
)
from trellisd.providers.http import HttpSettings
from trellisd.providers.openai import OpenAIProvider
from trellisd.providers.retry import Backoff, retry_after

KEY = "sk-trellisd-FAKE-7c1e5b2d9a-must-never-be-shown"
REQUEST = ModelRequest([Message("user", "hi")])
FAST = Backoff(0.01, 0.02)


@dataclass(frozen=True)
class Wire:
    name: str
    build: Callable[[HttpSettings], Provider]
    reply: Callable[[list[str]], list[bytes]]
    base: str  # what the base URL adds to the server's address


WIRES = [
    Wire("openai", OpenAIProvider, lambda text: openai_reply(text), "/v1"),
    Wire("anthropic", AnthropicProvider, lambda text: anthropic_reply(text), ""),
]


@pytest.fixture(params=WIRES, ids=lambda w: w.name)
def wire(request: pytest.FixtureRequest) -> Wire:
    return request.param  # type: ignore[no-any-return]


@pytest.fixture
def server() -> Iterator[ScriptServer]:
    with ScriptServer() as s:
        yield s


def connect(wire: Wire, server: ScriptServer, **settings: Any) -> Provider:
    options: dict[str, Any] = {"api_key": KEY, "key_source": "OPENAI_API_KEY", "backoff": FAST}
    options.update(settings)
    return opened(wire.build(HttpSettings(base_url=server.url + wire.base, model="m-1", **options)))


def error_body(message: str) -> bytes:
    return json.dumps({"error": {"type": "error", "message": message}}).encode()


def text_of(events: list[object]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_401_is_not_retried_and_names_where_the_key_came_from(
    wire: Wire, server: ScriptServer
) -> None:
    server.queue(Response(status=401, body=error_body(f"Incorrect API key provided: {KEY}")))

    events, exc = await collect_failure(connect(wire, server, max_retries=3).stream(REQUEST))

    assert events == []
    assert len(server.requests) == 1
    assert exc.status == 401
    assert "refused the API key" in str(exc)
    assert "OPENAI_API_KEY" in str(exc)


async def test_the_key_appears_in_no_message_log_line_or_traceback(
    wire: Wire, server: ScriptServer, caplog: pytest.LogCaptureFixture
) -> None:
    echo = error_body(f"bad key {KEY}")
    server.queue(
        Response(status=503, body=echo),
        Response(chunks=[b"data: {broken " + KEY.encode() + b"\n\n"] + wire.reply(["x"])),
    )
    server.queue(Response(status=401, body=echo))

    with caplog.at_level(logging.DEBUG):
        events = await collect(connect(wire, server).stream(REQUEST))
        more, exc = await collect_failure(connect(wire, server).stream(REQUEST))

    sent = server.requests[0].headers
    assert KEY in (sent.get("authorization", "") + sent.get("x-api-key", ""))  # it was sent
    retries = [e for e in events if isinstance(e, Retrying)]
    assert retries and text_of(events) == "x"
    shown = [
        str(exc),
        repr(exc),
        "".join(traceback.format_exception(exc)),
        caplog.text,
        *(e.reason for e in retries),
        *(r.getMessage() for r in caplog.records),
    ]
    assert "bad key" in str(exc)  # the provider's words are kept...
    for text in shown:
        assert KEY not in text  # ...but never the key


async def test_401_without_a_key_says_which_variable_to_set(server: ScriptServer) -> None:
    server.queue(Response(status=401, body=error_body("missing key")))
    settings = ProviderSettings(name="anthropic", base_url=server.url)

    _, exc = await collect_failure(opened(make_provider(settings)).stream(REQUEST))

    assert "ANTHROPIC_API_KEY" in str(exc)
    assert "none was set" in str(exc)


async def test_404_says_to_check_the_base_url_and_model(wire: Wire, server: ScriptServer) -> None:
    server.queue(Response(status=404, body=error_body("model m-1 does not exist")))

    _, exc = await collect_failure(connect(wire, server).stream(REQUEST))

    assert len(server.requests) == 1
    assert exc.status == 404
    assert "check the base URL and the model name" in str(exc)
    assert "model m-1 does not exist" in str(exc)


async def test_400_is_not_retried_and_carries_the_providers_reason(
    wire: Wire, server: ScriptServer
) -> None:
    server.queue(Response(status=400, body=error_body("messages: field required")))

    _, exc = await collect_failure(connect(wire, server).stream(REQUEST))

    assert len(server.requests) == 1
    assert "rejected the request (HTTP 400): messages: field required" in str(exc)


async def test_429_waits_as_long_as_retry_after_says_then_succeeds(
    wire: Wire, server: ScriptServer
) -> None:
    server.queue(
        Response(status=429, headers={"Retry-After": "1"}, body=error_body("slow down")),
        Response(chunks=wire.reply(["made ", "it"])),
    )

    events = await collect(connect(wire, server).stream(REQUEST))

    assert text_of(events) == "made it"
    retry = events[0]
    assert isinstance(retry, Retrying)
    assert (retry.attempt, retry.delay) == (2, 1.0)
    assert "429" in retry.reason
    gap = server.requests[1].at - server.requests[0].at
    assert gap >= 0.95, f"the retry came {gap:.2f} s after the 429, not the 1 s asked for"


async def test_a_retry_after_beyond_the_budget_fails_without_waiting(
    wire: Wire, server: ScriptServer
) -> None:
    server.queue(Response(status=429, headers={"Retry-After": "3600"}, body=error_body("quota")))

    # The safety net is far below the hour the server asked for.
    events, exc = await asyncio.wait_for(
        collect_failure(connect(wire, server, retry_budget=30).stream(REQUEST)), SAFETY_NET
    )

    assert events == [] and len(server.requests) == 1
    assert "retry budget of 30 s" in str(exc)


async def test_503_is_retried_up_to_the_limit_then_reported(
    wire: Wire, server: ScriptServer
) -> None:
    for _ in range(3):
        server.queue(Response(status=503, body=error_body("overloaded")))
    server.queue(Response(chunks=wire.reply(["too late"])))

    events, exc = await collect_failure(connect(wire, server, max_retries=2).stream(REQUEST))

    assert len(server.requests) == 3
    assert [(e.attempt, "503" in e.reason) for e in events] == [(2, True), (3, True)]
    assert exc.status == 503
    assert "gave up after 3 attempts" in str(exc)


async def test_a_connection_reset_before_the_answer_is_retried(
    wire: Wire, server: ScriptServer
) -> None:
    server.queue(Response(reset=True), Response(chunks=wire.reply(["again"])))

    events = await collect(connect(wire, server).stream(REQUEST))

    assert text_of(events) == "again"
    assert isinstance(events[0], Retrying)
    assert "closed the connection before answering" in events[0].reason


async def test_a_stream_cut_mid_way_keeps_what_came_and_is_not_retried(
    wire: Wire, server: ScriptServer
) -> None:
    chunks = wire.reply(["first ", "second ", "third"])
    cut = next(i for i, c in enumerate(chunks) if b"second" in c) + 1
    server.queue(Response(chunks=chunks, cut_after=cut), Response(chunks=wire.reply(["no"])))

    events, exc = await collect_failure(connect(wire, server).stream(REQUEST))

    assert text_of(events) == "first second "
    assert "dropped mid-stream" in str(exc)
    assert len(server.requests) == 1


async def test_a_stream_that_ends_without_finishing_is_an_error(
    wire: Wire, server: ScriptServer
) -> None:
    chunks = wire.reply(["half"])
    end = next(i for i, c in enumerate(chunks) if b"half" in c) + 1
    server.queue(Response(chunks=chunks[:end]))

    events, exc = await collect_failure(connect(wire, server).stream(REQUEST))

    assert text_of(events) == "half"
    assert "ended before the model finished" in str(exc)


async def test_a_stall_past_the_read_timeout_is_abandoned(wire: Wire, server: ScriptServer) -> None:
    chunks = wire.reply(["before ", "after"])
    stall = next(i for i, c in enumerate(chunks) if b"after" in c)
    server.queue(Response(chunks=chunks, stall_after=stall))

    # The server stalls until the client leaves: only the read timeout ends this.
    events, exc = await collect_failure(connect(wire, server, read_timeout=1.0).stream(REQUEST))

    assert text_of(events) == "before "
    assert "sent nothing for 1 s" in str(exc)
    assert "TRELLISD_READ_TIMEOUT" in str(exc)


async def test_a_refused_connection_is_reported(wire: Wire) -> None:
    port = free_port()
    http = HttpSettings(base_url=f"http://127.0.0.1:{port}{wire.base}", model="m", api_key=KEY)

    events, exc = await collect_failure(opened(wire.build(http)).stream(REQUEST))

    assert "refused the connection" in str(exc)
    assert len(events) <= 1  # one quick retry at most


async def test_a_host_that_does_not_resolve_is_reported_without_retrying(wire: Wire) -> None:
    http = HttpSettings(base_url="http://no-such-host.invalid/v1", model="m", api_key=KEY)

    events, exc = await collect_failure(opened(wire.build(http)).stream(REQUEST))

    assert events == []
    assert "cannot find the host no-such-host.invalid" in str(exc)


async def test_an_answer_that_is_not_a_stream_is_explained(
    wire: Wire, server: ScriptServer
) -> None:
    server.queue(Response(body=b'{"error": "stream is not supported here"}'))

    _, exc = await collect_failure(connect(wire, server).stream(REQUEST))

    assert "stream is not supported here" in str(exc)


async def test_a_malformed_openai_line_is_skipped_and_logged(
    server: ScriptServer, caplog: pytest.LogCaptureFixture
) -> None:
    chunks = openai_reply(["one ", "two"])
    server.queue(Response(chunks=chunks[:2] + [b'data: {"choices": [\n\n'] + chunks[2:]))

    with caplog.at_level(logging.WARNING):
        events = await collect(connect(WIRES[0], server).stream(REQUEST))

    assert text_of(events) == "one two"
    assert events[-1] == Stop("stop")
    assert "malformed" in caplog.text


def test_retry_after_reads_seconds_milliseconds_and_http_dates() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=7), usegmt=True)

    assert retry_after(httpx.Headers({"Retry-After": "3"})) == 3.0
    assert retry_after(httpx.Headers({"retry-after-ms": "250", "Retry-After": "3"})) == 0.25
    assert retry_after(httpx.Headers({"Retry-After": later}), now=now.timestamp()) == 7.0
    assert retry_after(httpx.Headers({"Retry-After": "soon"})) is None
    assert retry_after(httpx.Headers({})) is None


def test_backoff_grows_is_capped_and_jittered() -> None:
    backoff = Backoff(base=1.0, cap=4.0)

    waits = {n: [backoff.delay(n) for _ in range(50)] for n in (1, 2, 3, 6)}

    assert all(0.5 <= w <= 1.0 for w in waits[1])
    assert all(1.0 <= w <= 2.0 for w in waits[2])
    assert all(2.0 <= w <= 4.0 for w in waits[6])
    assert len(set(waits[3])) > 1


async def test_a_line_past_the_cap_ends_the_call_without_waiting_for_its_end(
    wire: Wire, server: ScriptServer
) -> None:
    chunks = wire.reply(["before ", "after"])
    at = next(i for i, c in enumerate(chunks) if b"after" in c)
    endless = [b"data: " + b"x" * 16 * 1024] + [b"x" * 16 * 1024] * 8  # 144 KiB, no newline
    # After the long line the server waits for the client to leave: the cap must end the call.
    server.queue(Response(chunks=chunks[:at] + endless, stall_after=at + len(endless)))

    events, exc = await collect_failure(
        connect(wire, server, max_event_bytes=64 * 1024).stream(REQUEST)
    )

    assert text_of(events) == "before "
    assert "a line of the stream is longer than 64 KiB" in str(exc)
    assert len(server.requests) == 1


async def test_an_event_of_many_data_lines_past_the_cap_ends_the_call(
    wire: Wire, server: ScriptServer
) -> None:
    line = b"data: " + b"y" * 1000 + b"\n"
    server.queue(Response(chunks=[line] * 100, stall_after=100))  # 100 kB, no blank line

    _, exc = await collect_failure(connect(wire, server, max_event_bytes=64 * 1024).stream(REQUEST))

    assert "an event of the stream is larger than 64 KiB" in str(exc)


async def test_keep_alive_comments_do_not_hold_a_silent_stream_open(
    wire: Wire, server: ScriptServer
) -> None:
    chunks = wire.reply(["so far ", "never"])
    at = next(i for i, c in enumerate(chunks) if b"never" in c)
    server.queue(Response(chunks=chunks, comments_after=at))

    events, exc = await collect_failure(connect(wire, server, read_timeout=0.3).stream(REQUEST))

    assert text_of(events) == "so far "
    assert "sent nothing for 0.3 s" in str(exc)
    assert "TRELLISD_READ_TIMEOUT" in str(exc)
    assert len(server.requests) == 1


async def test_text_in_the_same_chunk_as_an_error_event_is_kept(
    wire: Wire, server: ScriptServer
) -> None:
    chunks = wire.reply(["kept ", "lost"])
    at = next(i for i, c in enumerate(chunks) if b"lost" in c)
    error = {"type": "error", "error": {"type": "invalid_request_error", "message": "boom"}}
    # Everything up to the error in one piece of the body, as a fast server sends it.
    server.queue(Response(chunks=[b"".join(chunks[:at]) + sse(error, "error")]))

    events, exc = await collect_failure(connect(wire, server).stream(REQUEST))

    assert text_of(events) == "kept "
    assert "boom" in str(exc)
