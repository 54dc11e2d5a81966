"""What every HTTP provider shares: endpoint settings, one pooled connection to the endpoint,
one streamed call with its retries, and turning HTTP failures into messages a person can act
on.

A wire module (``openai``, ``anthropic``) builds the request and a ``StreamDecoder`` that
turns server-sent events into ``ProviderEvent``s; ``Endpoint.stream`` does the rest. Every
failure leaves it as a ``ProviderError``:

    ProviderError
     ├─ from a status (HTTP 4xx/5xx, or a 200 that is not an event stream): explain_status
     ├─ from the transport (refused, unresolved, dropped, stalled): transport_error
     ├─ from the stream's bounds (a line too long, only keep-alives): see ``sse``
     └─ from the wire (an error event, a stream that ended early): raised by a decoder

An ``Endpoint`` keeps one ``httpx.AsyncClient`` for all the calls of its provider, so a warm
call reuses a kept-alive connection instead of building a client (and its TLS context) and
connecting again; ``aclose`` releases it. The certificates are loaded once for every
``https://`` endpoint, and an ``http://`` endpoint gets a TLS context that trusts nothing, as
it never speaks TLS (redirects are not followed).

Foreign errors are translated here, once. Each message passes through ``HttpSettings.redact``
on its way out, so the API key never appears in an error, a log line or a traceback.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import ssl
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Protocol

import httpx

from ..config import DEFAULT_MAX_RETRIES, DEFAULT_READ_TIMEOUT, DEFAULT_RETRY_BUDGET
from .base import STEP_LIMIT, ProviderError, ProviderEvent, Retrying, says_too_long
from .retry import Backoff, retry_after, retryable_status
from .sse import (
    MAX_EVENT_BYTES,
    ServerSentEvent,
    StreamBounds,
    StreamSilent,
    StreamTooLarge,
    read_events,
)

log = logging.getLogger(__name__)

REDACTED = "[redacted]"
MALFORMED_LOGGED = 3  # malformed events of one response logged; the others are skipped quietly
KEEP_ALIVE = 60.0  # seconds an idle pooled connection is kept for the next call
FINISH_WAIT = 0.5  # seconds to wait for the end of a body after its last event


@dataclass(frozen=True)
class HttpSettings:
    """Where a provider lives and how patiently to talk to it.

    ``key_source`` names where the key came from (a variable, or a client's override);
    ``key_hint`` names where one could be set, for the message when none was.
    ``connect_retries`` caps retries of a refused connection, below ``max_retries``.
    ``max_event_bytes`` caps a line and an event of the stream (see ``sse``);
    ``step_limit`` what the tool calls of one response may take (see ``calls``).
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    key_source: str | None = None
    key_hint: str = "TRELLISD_API_KEY"
    connect_timeout: float = 10.0
    read_timeout: float = DEFAULT_READ_TIMEOUT
    max_retries: int = DEFAULT_MAX_RETRIES
    retry_budget: float = DEFAULT_RETRY_BUDGET
    connect_retries: int = 1
    backoff: Backoff = Backoff()
    max_event_bytes: int = MAX_EVENT_BYTES
    step_limit: int = STEP_LIMIT

    def timeout(self) -> httpx.Timeout:
        return httpx.Timeout(self.read_timeout, connect=self.connect_timeout)

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    def redact(self, text: str) -> str:
        """``text`` with every occurrence of the API key replaced."""
        if self.api_key and len(self.api_key) >= 8:
            return text.replace(self.api_key, REDACTED)
        return text


class StreamDecoder(Protocol):
    """Turns the server-sent events of one response into provider events.

    ``done`` says the stream's last event was seen (stop reading); ``complete`` says the reply
    is whole, so a stream that ends here ended properly. ``close`` gives the events held back
    until the end: the tool calls, the ``Usage`` and the ``Stop``.
    """

    @property
    def done(self) -> bool: ...

    @property
    def complete(self) -> bool: ...

    def feed(self, sse: ServerSentEvent) -> list[ProviderEvent]: ...

    def close(self) -> list[ProviderEvent]: ...


class EventObjects:
    """Reads the events of one response as JSON objects. An event that is not one is
    skipped: the first few are logged, a stream of them costs no log line each."""

    def __init__(self, http: HttpSettings) -> None:
        self.http = http
        self.skipped = 0

    def read(self, sse: ServerSentEvent) -> dict[str, Any] | None:
        """The event's data as an object; None for an empty or unreadable event."""
        if not sse.data.strip():
            return None
        try:
            data = json.loads(sse.data)
        except ValueError:
            self._skip("a malformed event", sse.data)
            return None
        if not isinstance(data, dict):
            self._skip("an event that is not an object", sse.data)
            return None
        return data

    def _skip(self, what: str, data: str) -> None:
        self.skipped += 1
        if self.skipped <= MALFORMED_LOGGED:
            log.warning(
                "skipping %s from %s: %s", what, self.http.base_url, self.http.redact(data[:200])
            )


class Endpoint:
    """A provider's endpoint: its settings and one pooled client, made at the first call.

    The client belongs to the event loop of that call; ``aclose`` closes it and its
    connections (a later call makes a new one)."""

    def __init__(self, http: HttpSettings) -> None:
        self.http = http
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        if self._client is None or self._client.is_closed:
            secure = self.http.base_url.lower().startswith("https:")
            self._client = httpx.AsyncClient(
                timeout=self.http.timeout(),
                verify=_verifying() if secure else _trusts_nothing(),
                limits=httpx.Limits(keepalive_expiry=KEEP_ALIVE),
            )
        return self._client

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def stream(
        self,
        path: str,
        headers: Mapping[str, str],
        body: dict[str, Any],
        decoder: Callable[[], StreamDecoder],
    ) -> AsyncIterator[ProviderEvent]:
        """POST ``body`` to ``path`` under the base URL and stream the decoded events,
        retrying (see ``retry``) only while no event has reached the caller."""
        http = self.http
        started = time.monotonic()
        attempt = connect_failures = 0
        client = self.client()
        while True:
            attempt += 1
            sent = False
            try:
                exchange = _exchange(client, http, path, headers, body, decoder())
                async with aclosing(exchange):
                    async for events in exchange:
                        sent = True
                        for event in events:
                            yield event
                return
            except ProviderError as exc:
                error = exc
            if isinstance(error.__cause__, httpx.ConnectError):
                connect_failures += 1
            if sent or not error.retryable or connect_failures > http.connect_retries:
                raise _outgoing(error, http, attempt)
            if attempt > http.max_retries:
                raise _outgoing(error, http, attempt)
            elapsed = time.monotonic() - started
            delay = error.retry_after
            if delay is None:
                delay = http.backoff.delay(attempt)
            if elapsed + delay > http.retry_budget:
                raise _outgoing(error, http, attempt, over_budget=delay)
            reason = http.redact(str(error))
            log.warning(
                "retrying %s in %.2f s (attempt %d): %s", http.base_url, delay, attempt + 1, reason
            )
            yield Retrying(attempt + 1, delay, reason)
            await asyncio.sleep(delay)


@cache
def _verifying() -> ssl.SSLContext:
    """httpx's default TLS context, built once: loading the certificates is the slow part."""
    return httpx.create_ssl_context()


def _trusts_nothing() -> ssl.SSLContext:
    """A verifying TLS context with no certificates: any TLS connection made with it fails."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


async def _exchange(
    client: httpx.AsyncClient,
    http: HttpSettings,
    path: str,
    headers: Mapping[str, str],
    body: dict[str, Any],
    decoder: StreamDecoder,
) -> AsyncGenerator[list[ProviderEvent], None]:
    """One attempt: the decoded events, a list for each piece of the body read."""
    answered = False
    send = {**headers, "Accept": "text/event-stream"}
    try:
        async with client.stream("POST", http.url(path), json=body, headers=send) as response:
            answered = True
            if not response.is_success:
                await response.aread()
                raise status_error(response, http)
            if "text/event-stream" not in response.headers.get("content-type", ""):
                await response.aread()
                raise ProviderError(not_a_stream(response, http), response.status_code)
            bounds = StreamBounds(http.read_timeout, http.max_event_bytes)
            events = read_events(response.aiter_bytes(), bounds)
            async with aclosing(events):
                async for batch in events:
                    decoded: list[ProviderEvent] = []
                    for sse in batch:
                        try:
                            decoded += decoder.feed(sse)
                        except ProviderError:
                            if decoded:  # what came before the error event is kept
                                yield decoded
                            raise
                        if decoder.done:
                            break
                    if decoded:
                        yield decoded
                    if decoder.done:
                        await _finish_body(events)
                        break
            if not decoder.complete:
                raise ProviderError(
                    f"the stream from the provider at {http.base_url} ended before the model"
                    " finished its reply",
                    retryable=True,
                )
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise transport_error(exc, http, answered) from exc
    except StreamSilent as exc:
        raise ProviderError(silence(http)) from exc
    except StreamTooLarge as exc:
        raise ProviderError(
            f"the provider at {http.base_url} sent {exc}; the call was ended to bound the"
            " memory it may take"
        ) from exc
    yield decoder.close()


async def _finish_body(events: AsyncIterator[list[ServerSentEvent]]) -> None:
    """Read the rest of a body whose last event was seen (usually just the end of the chunked
    body), so that its connection can be kept for the next call. A body that goes on, or
    does not end within ``FINISH_WAIT`` seconds, is left: the connection is closed instead."""
    try:
        async with asyncio.timeout(FINISH_WAIT):
            async for _ in events:
                return
    except (TimeoutError, httpx.HTTPError, StreamSilent, StreamTooLarge):
        pass


def silence(http: HttpSettings) -> str:
    return (
        f"the model at {http.base_url} sent nothing for {http.read_timeout:g} s; the stream was"
        " abandoned (TRELLISD_READ_TIMEOUT sets how long to wait)"
    )


def _outgoing(
    error: ProviderError, http: HttpSettings, attempt: int, over_budget: float | None = None
) -> ProviderError:
    """The error as the caller sees it: how many attempts it took, and never the key."""
    message = str(error)
    if over_budget is not None:
        message += (
            f"; the next attempt would start {over_budget:.1f} s from now, past the retry"
            f" budget of {http.retry_budget:g} s (TRELLISD_RETRY_BUDGET)"
        )
    if attempt > 1:
        message += f" (gave up after {attempt} attempts)"
    outgoing = ProviderError(
        http.redact(message),
        error.status,
        retryable=error.retryable,
        retry_after=error.retry_after,
        too_long=error.too_long,
    )
    # Chain to the transport's exception (never to ``error``, whose text was not redacted).
    outgoing.__cause__ = error.__cause__
    outgoing.__suppress_context__ = True
    return outgoing


def status_error(response: httpx.Response, http: HttpSettings) -> ProviderError:
    status = response.status_code
    return ProviderError(
        explain_status(response, http),
        status,
        retryable=retryable_status(status),
        retry_after=retry_after(response.headers),
        too_long=status in (400, 413) and says_too_long(response.text),
    )


def explain_status(response: httpx.Response, http: HttpSettings) -> str:
    status = response.status_code
    detail = _detail(response)
    where = f"{http.base_url} (model {http.model})"
    if status == 401:
        if not http.api_key:
            return (
                f"the provider at {http.base_url} wants an API key (HTTP 401) and none was"
                f" set: set {http.key_hint}{detail}"
            )
        return (
            f"the provider at {http.base_url} refused the API key (HTTP 401); the key came"
            f" from {http.key_source or 'an unnamed setting'}{detail}"
        )
    if status == 402:
        return f"the provider at {where} wants payment (HTTP 402): check the account{detail}"
    if status == 403:
        return (
            f"the provider at {where} denied access (HTTP 403): the key may not be allowed"
            f" this model{detail}"
        )
    if status == 404:
        return (
            f"the provider at {where} answered 404: check the base URL and the model name{detail}"
        )
    if status == 400:
        return f"the provider at {where} rejected the request (HTTP 400){detail}"
    if status == 429:
        return f"the provider at {where} is rate-limiting (HTTP 429){detail}"
    if 300 <= status < 400:
        location = response.headers.get("location", "another address")
        return (
            f"the provider at {http.base_url} redirects to {location} (HTTP {status}): set the"
            " base URL to that address"
        )
    if status >= 500:
        return f"the provider at {where} is failing (HTTP {status}){detail}"
    return f"the provider at {where} failed with HTTP {status}{detail}"


def not_a_stream(response: httpx.Response, http: HttpSettings) -> str:
    detail = _detail(response)
    kind = response.headers.get("content-type", "no content type").split(";")[0]
    if detail:
        return f"the provider at {http.base_url} answered with an error{detail}"
    return (
        f"the provider at {http.base_url} answered with {kind} instead of an event stream:"
        " check that the base URL points at the API this provider speaks"
    )


def _detail(response: httpx.Response) -> str:
    """The provider's own words about the failure, in the shapes the common servers use."""
    try:
        body = response.json()
    except ValueError:
        text = " ".join(response.text.split())[:300]
        return f": {text}" if text else ""
    if not isinstance(body, dict):
        return ""
    error = body.get("error")
    if isinstance(error, dict) and error.get("message"):
        return f": {str(error['message'])[:300]}"
    if isinstance(error, str) and error:
        return f": {error[:300]}"
    for key in ("message", "detail"):
        if isinstance(body.get(key), str) and body[key]:
            return f": {body[key][:300]}"
    return ""


def transport_error(
    exc: httpx.HTTPError | httpx.InvalidURL, http: HttpSettings, answered: bool = False
) -> ProviderError:
    where = f"the provider at {http.base_url}"
    if isinstance(exc, httpx.InvalidURL | httpx.UnsupportedProtocol):
        return ProviderError(f"the base URL {http.base_url!r} is not a usable http(s) URL: {exc}")
    if isinstance(exc, httpx.ConnectError):
        return _connect_error(exc, http)
    if isinstance(exc, httpx.ConnectTimeout):
        return ProviderError(f"connecting to {where} timed out after {http.connect_timeout:g} s")
    if isinstance(exc, httpx.ReadTimeout):
        if answered:
            return ProviderError(silence(http))
        return ProviderError(
            f"{where} did not answer within {http.read_timeout:g} s"
            " (TRELLISD_READ_TIMEOUT sets how long to wait)"
        )
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError):
        if answered:
            return ProviderError(f"the connection to {where} dropped mid-stream", retryable=True)
        return ProviderError(f"{where} closed the connection before answering", retryable=True)
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError(f"the request to {where} timed out")
    return ProviderError(f"the request to {where} failed: {exc}")


def _connect_error(exc: httpx.ConnectError, http: HttpSettings) -> ProviderError:
    where = f"the provider at {http.base_url}"
    for cause in _causes(exc):
        if isinstance(cause, socket.gaierror):
            host = httpx.URL(http.base_url).host or http.base_url
            return ProviderError(
                f"cannot find the host {host} of {where}: check the base URL and the network"
            )
        if isinstance(cause, ssl.SSLError):
            return ProviderError(f"the TLS handshake with {where} failed: {cause}")
        if isinstance(cause, ConnectionRefusedError):
            return ProviderError(
                f"{where} refused the connection: is it running, and is the base URL right?",
                retryable=True,
            )
    return ProviderError(f"cannot connect to {where}: {exc}", retryable=True)


def _causes(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
