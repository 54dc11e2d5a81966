"""Server-sent events read from a response body, with bounds.

``read_events`` turns the bytes of an event stream into ``ServerSentEvent``s, a list of them for
each piece of the body read (a step of an async generator costs more than a small event). Two
things end the stream with an exception (which ``http`` turns into a ``ProviderError``) instead
of letting a provider run the daemon out of memory or out of patience:

- a line, or an event's data, longer than ``max_event_bytes`` (a stream that never sends a
  newline would otherwise be buffered whole);
- no event with data for ``read_timeout`` seconds while the stream sends only keep-alive
  comments (``: ping``), which reset a read timeout that counts bytes.

After every ``YIELD_BYTES`` of the body, the reader yields to the event loop, so a stream that
arrives faster than it is read (a model flooding a loopback connection) cannot hold the loop:
the editor's requests (``session/cancel``, ``session/list``) are served in between.

Lines end with ``\\r\\n``, ``\\n`` or ``\\r``; a comment is a line starting with ``:``; an event
ends at a blank line and is dispatched only when it has data (the WHATWG rules).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, AsyncIterable, Callable
from dataclasses import dataclass
from typing import NamedTuple

MAX_EVENT_BYTES = 16 * 1024 * 1024
YIELD_BYTES = 64 * 1024  # the reader yields to the event loop after this much of the body


class ServerSentEvent(NamedTuple):
    event: str = "message"
    data: str = ""
    id: str = ""


@dataclass(frozen=True)
class StreamBounds:
    """``read_timeout``: seconds the stream may go without an event that carries data.
    ``max_event_bytes``: the longest line, and the most data one event may carry."""

    read_timeout: float
    max_event_bytes: int = MAX_EVENT_BYTES


class StreamTooLarge(Exception):
    """A line or an event went past ``StreamBounds.max_event_bytes``; ``str`` says which."""


class StreamSilent(Exception):
    """Only keep-alive comments came for ``StreamBounds.read_timeout`` seconds."""


async def read_events(
    chunks: AsyncIterable[bytes],
    bounds: StreamBounds,
    *,
    clock: Callable[[], float] = time.monotonic,
) -> AsyncGenerator[list[ServerSentEvent], None]:
    """The events of an SSE body given as byte chunks of any size, those that each chunk
    completes together (never an empty list)."""
    cap = bounds.max_event_bytes
    # The start of a line whose end has not arrived, in the pieces it came in: joined once,
    # when the line ends (joining at each piece would copy a long line again and again).
    waiting: list[bytes] = []
    waited = 0
    unyielded = 0  # bytes read since the reader last yielded to the loop
    kind, size, last_id = "", 0, ""
    data: list[str] = []
    last_data = clock()
    async for chunk in chunks:
        batch: list[ServerSentEvent] = []
        if waiting and b"\n" not in chunk and b"\r" not in chunk:
            waiting.append(chunk)
            waited += len(chunk)
            if waited > cap:
                raise StreamTooLarge(f"a line of the stream is longer than {_size(cap)}")
            silent = waiting[0][:1] == b":"
        else:
            if waiting:
                chunk = b"".join(waiting) + chunk
            if b"\r" in chunk:
                # A lone \r ends a line too; one at the very end may be the first half of \r\n.
                held = chunk.endswith(b"\r")
                chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
                if held:
                    chunk = chunk[:-1]
            else:
                held = False
            lines = chunk.split(b"\n")
            rest = lines.pop() + (b"\r" if held else b"")
            if len(rest) > cap:
                raise StreamTooLarge(f"a line of the stream is longer than {_size(cap)}")
            waiting, waited = ([rest], len(rest)) if rest else ([], 0)
            silent = not rest or rest[0] == 58  # 58 is b":", a comment
            for line in lines:
                if not line:
                    if data:
                        batch.append(ServerSentEvent(kind or "message", "\n".join(data), last_id))
                        kind, data, size = "", [], 0
                    continue
                if len(line) > cap:
                    raise StreamTooLarge(f"a line of the stream is longer than {_size(cap)}")
                if line[0] == 58:
                    continue
                silent = False
                if line.startswith(b"data: "):  # the common case, without the general parse
                    name, value = b"data", line[6:]
                else:
                    name, sep, value = line.partition(b":")
                    if sep and value[:1] == b" ":
                        value = value[1:]
                if name == b"data":
                    size += len(value)
                    if size > cap:
                        raise StreamTooLarge(f"an event of the stream is larger than {_size(cap)}")
                    data.append(value.decode("utf-8", "replace"))
                elif name == b"event":
                    kind = value.decode("utf-8", "replace")
                elif name == b"id" and b"\0" not in value:
                    last_id = value.decode("utf-8", "replace")
        if batch:
            yield batch
        now = clock()
        if not silent:
            last_data = now
        elif now - last_data > bounds.read_timeout:
            raise StreamSilent(f"only keep-alive comments for {now - last_data:.1f} s")
        unyielded += len(chunk)
        if unyielded >= YIELD_BYTES:  # the other tasks' turn, however fast the body comes
            unyielded = 0
            await asyncio.sleep(0)


def _size(count: int) -> str:
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count >= scale and count % scale == 0:
            return f"{count // scale} {unit}"
    return f"{count:,} bytes"
