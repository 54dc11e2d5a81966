"""The transport: LSP base-protocol frames over the daemon's stdin and stdout, knowing nothing
of JSON-RPC.

    FrameReader   reads frames from a file descriptor, tolerant of the header forms editors
                  send (any case, no space after the colon, LF line ends, a missing blank
                  line), bounded in memory, and never silently out of step: a frame it cannot
                  take comes back as a ``BadFrame`` to answer, and reading goes on from the
                  next frame.
    FrameWriter   writes frames on a thread of its own, in the order they were sent, so an
                  editor that stops reading never blocks the event loop. Text sent with
                  ``stream`` while the frame before it is still being written is merged into
                  one frame: a fast model costs a few writes, a slow one gets each piece at
                  once. A closed stdout ends writing quietly; it never raises into the daemon.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import re
import threading
from collections import deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 64 * 1024 * 1024
MAX_HEADER_BYTES = 8 * 1024
READ_CHUNK = 256 * 1024
# A stream's pieces are joined into one frame up to this size, then a new frame starts.
STREAM_FRAME_BYTES = 64 * 1024

INVALID_REQUEST = -32600
PARSE_ERROR = -32700

# The next frame's header, looked for after a bad frame: frames follow each other with no
# separator, and a JSON body holds no raw line break, so a line break after the number is what
# tells a header from the same words inside a body.
_CONTENT_LENGTH_LINE = re.compile(rb"(?i)content-length[ \t]*:[ \t]*\d+[ \t]*\r?\n")
_WHITESPACE = b" \t\r\n"


@dataclass(frozen=True)
class Frame:
    """One frame's body, decoded from UTF-8."""

    text: str


@dataclass(frozen=True)
class BadFrame:
    """A frame that could not be taken: what to answer (with id null), and reading goes on."""

    code: int
    message: str


class FrameReader:
    """Frames from ``fd``, one ``read()`` at a time; ``None`` at the end of input."""

    def __init__(self, fd: int, max_frame: int = MAX_FRAME_BYTES, initial: bytes = b"") -> None:
        self.fd = fd
        self.max_frame = max_frame
        self._buf = bytearray(initial)
        self._eof = False
        self._resync = False
        self._executor = concurrent.futures.ThreadPoolExecutor(1, "trellisd-stdin")

    async def read(self) -> Frame | BadFrame | None:
        while True:
            frame = self._take()
            if frame is not None:
                return frame
            if self._eof:
                if self._buf.strip(_WHITESPACE) and not self._resync:
                    self._buf.clear()
                    return BadFrame(INVALID_REQUEST, "the input ended in the middle of a frame")
                return None
            await self._fill()

    async def _fill(self) -> None:
        loop = asyncio.get_running_loop()
        chunk = await loop.run_in_executor(self._executor, os.read, self.fd, READ_CHUNK)
        if chunk:
            self._buf += chunk
        else:
            self._eof = True

    def _take(self) -> Frame | BadFrame | None:
        """A frame from the buffer, or None when more input is needed."""
        buf = self._buf
        if self._resync and not self._find_next_frame():
            return None
        start = len(buf) - len(buf.lstrip(_WHITESPACE))
        if start:
            del buf[:start]
        if not buf:
            return None
        headers, body_start = self._headers()
        if body_start < 0:
            if len(buf) > MAX_HEADER_BYTES:
                return self._bad(len(buf), "a frame's headers were over 8 KiB")
            return None
        if isinstance(headers, BadFrame):
            return self._bad(body_start, headers.message)
        raw = headers.get("content-length")
        if raw is None:
            return self._bad(body_start, "a frame had no Content-Length header")
        if not raw.isdigit():
            return self._bad(body_start, f"a frame's Content-Length {raw!r} is not a number")
        length = int(raw)
        if length > self.max_frame:
            return self._bad(
                body_start,
                f"a frame of {length} bytes is over the limit of {self.max_frame} bytes;"
                " it was skipped",
            )
        if len(buf) - body_start < length:
            return None
        body = bytes(buf[body_start : body_start + length])
        del buf[: body_start + length]
        try:
            return Frame(body.decode("utf-8"))
        except UnicodeDecodeError as exc:
            return BadFrame(PARSE_ERROR, f"a frame's body was not UTF-8: {exc.reason}")

    def _headers(self) -> tuple[dict[str, str] | BadFrame, int]:
        """The header block at the buffer's start and where the body starts, or -1 there
        while the block is incomplete."""
        buf = self._buf
        headers: dict[str, str] = {}
        pos = 0
        while True:
            if bytes(buf[pos : pos + 1]) in (b"{", b"["):
                return headers, pos  # no blank line: the body starts here
            end = buf.find(b"\n", pos, pos + MAX_HEADER_BYTES)
            if end < 0:
                return headers, -1
            line = bytes(buf[pos:end]).rstrip(b"\r")
            if not line.strip():
                return headers, end + 1
            name, colon, value = line.partition(b":")
            if not colon or not name.strip():
                return BadFrame(INVALID_REQUEST, "a header line was not 'Name: value'"), end + 1
            headers[name.strip().decode("latin-1").lower()] = value.strip().decode("latin-1")
            pos = end + 1

    def _bad(self, consumed: int, message: str) -> BadFrame:
        """Drop what was read of a bad frame and look for the next frame's header."""
        del self._buf[:consumed]
        self._resync = True
        return BadFrame(INVALID_REQUEST, message)

    def _find_next_frame(self) -> bool:
        """Skip to the next ``Content-Length`` line; False while none has arrived."""
        match = _CONTENT_LENGTH_LINE.search(self._buf)
        if match is None:
            keep = MAX_HEADER_BYTES
            del self._buf[: max(0, len(self._buf) - keep)]
            return False
        del self._buf[: match.start()]
        self._resync = False
        return True

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def loads(text: str, object_hook: Callable[[dict[str, Any]], Any] | None = None) -> Any:
    """JSON as RFC 8259 has it: ``NaN`` and ``Infinity`` are refused, not read as floats."""
    return json.loads(text, object_hook=object_hook, parse_constant=_refuse_constant)


def _refuse_constant(name: str) -> Any:
    raise json.JSONDecodeError(f"{name} is not a JSON value", name, 0)


@dataclass
class _Stream:
    """Pieces of text for one stream, sent as one frame: ``prefix + json(text) + suffix``."""

    key: Hashable
    prefix: bytes
    suffix: bytes
    parts: list[str] = field(default_factory=list)
    size: int = 0

    def body(self) -> bytes:
        return self.prefix + json.dumps("".join(self.parts)).encode() + self.suffix


class FrameWriter:
    """Frames to ``fd``, written in order on the writer's own thread.

    ``wrap`` turns each frame into the bytes written (the shared daemon's records); with
    ``limit``, a reader that lets more than ``limit`` bytes wait behind the next frame is
    given up on: ``overflow`` is called once and nothing more is queued.
    """

    def __init__(
        self,
        fd: int,
        wrap: Callable[[bytes], bytes] | None = None,
        limit: int | None = None,
        overflow: Callable[[], None] | None = None,
    ) -> None:
        self.fd = fd
        self._wrap = wrap
        self._limit = limit
        self._overflow = overflow
        self._queue: deque[bytes | _Stream] = deque()
        self._queued = 0
        self._final = b""
        self._cond = threading.Condition()
        self._busy = False
        self._closing = False
        self.broken = False
        self._thread = threading.Thread(target=self._run, name="trellisd-stdout", daemon=True)
        self._thread.start()

    def write(self, data: bytes) -> None:
        """A whole frame, headers included (the writer interface pygls calls)."""
        self._put(data)

    def send(self, body: bytes) -> None:
        """A frame around ``body`` (one JSON value, as bytes)."""
        self._put(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def stream(self, key: Hashable, prefix: bytes, text: str, suffix: bytes) -> None:
        """Text for the stream ``key``: merged into that stream's frame when it is the last
        one still waiting, else a new frame."""
        with self._cond:
            if self.broken or self._closing:
                return
            last = self._queue[-1] if self._queue else None
            if isinstance(last, _Stream) and last.key == key and last.size < STREAM_FRAME_BYTES:
                last.parts.append(text)
                last.size += len(text)
                grown = len(text)
            else:
                grown = len(prefix) + len(text) + len(suffix)
                self._queue.append(_Stream(key, prefix, suffix, [text], grown))
                self._cond.notify()
            self._grew(grown)

    def _put(self, item: bytes) -> None:
        with self._cond:
            if self.broken or self._closing:
                return
            self._queue.append(item)
            self._cond.notify()
            self._grew(len(item))

    def _grew(self, size: int) -> None:
        """Count ``size`` more bytes waiting; past the limit, give the reader up."""
        self._queued += size
        if self._limit is None or len(self._queue) < 2:
            return  # one frame, however large, is an answer being read
        first = self._queue[0]
        behind = self._queued - (len(first) if isinstance(first, bytes) else first.size)
        if behind > self._limit:
            self.broken = True
            self._queue.clear()
            self._queued = 0
            self._cond.notify_all()
            if self._overflow is not None:
                self._overflow()

    def drain(self, timeout: float) -> bool:
        """Wait until everything sent so far is written (or writing broke); False on timeout."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self.broken or (not self._queue and not self._busy), timeout
            )

    def close(self, timeout: float = 5.0, final: bytes = b"") -> None:
        """Write what is queued and then ``final`` (as it is), then stop the writer thread."""
        with self._cond:
            self._final = final
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
                self._cond.wait_for(lambda: self._queue or self._closing)
                if not self._queue:
                    final, self._final = self._final, b""
                    if final and not self.broken:
                        self._write_all(final)
                    return
                item = self._queue.popleft()
                self._queued -= len(item) if isinstance(item, bytes) else item.size
                self._busy = True
            frame = item if isinstance(item, bytes) else self._frame(item)
            if self._wrap is not None:
                frame = self._wrap(frame)
            if not self._write_all(frame):
                with self._cond:
                    self.broken = True
                    self._busy = False
                    self._queue.clear()
                    self._cond.notify_all()
                return

    @staticmethod
    def _frame(stream: _Stream) -> bytes:
        body = stream.body()
        return b"Content-Length: %d\r\n\r\n%s" % (len(body), body)

    def _write_all(self, data: bytes) -> bool:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.fd, view)
                view = view[written:]
        except OSError as exc:
            log.info("the editor closed the connection (%s); nothing more is written", exc)
            return False
        return True
