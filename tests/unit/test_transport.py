"""Frames in and out over real pipes: what editors send is read, what is bad is answered and
skipped, and writing never blocks the event loop or raises on a closed stdout."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator

import pytest

from trellisd.transport import (
    INVALID_REQUEST,
    PARSE_ERROR,
    BadFrame,
    Frame,
    FrameReader,
    FrameWriter,
    loads,
)


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


def body(message: dict[str, object]) -> bytes:
    return json.dumps(message).encode()


async def read_all(data: bytes, max_frame: int = 1 << 20) -> list[Frame | BadFrame]:
    r, w = os.pipe()
    writer = threading.Thread(target=lambda: (os.write(w, data), os.close(w)))
    writer.start()
    reader = FrameReader(r, max_frame=max_frame)
    out: list[Frame | BadFrame] = []
    try:
        while (frame := await reader.read()) is not None:
            out.append(frame)
    finally:
        writer.join()
        reader.close()
        os.close(r)
    return out


PING = body({"jsonrpc": "2.0", "id": 1, "method": "ping"})
PONG = body({"jsonrpc": "2.0", "id": 2, "method": "pong"})


def framed(b: bytes, header: bytes = b"Content-Length: %d\r\n\r\n") -> bytes:
    return header % len(b) + b


@pytest.mark.parametrize(
    "header",
    [
        b"Content-Length: %d\r\n\r\n",
        b"content-length: %d\r\n\r\n",
        b"CONTENT-LENGTH:%d\r\n\r\n",
        b"Content-Length: %d\n\n",
        b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n",
        b"Content-Length: %d\r\n",  # no blank line before the body
    ],
    ids=["standard", "lower-case", "no-space", "lf-only", "content-type", "no-blank-line"],
)
async def test_the_header_forms_editors_send_are_read(header: bytes) -> None:
    frames = await read_all(framed(PING, header) + framed(PONG))
    assert frames == [Frame(PING.decode()), Frame(PONG.decode())]


async def test_a_frame_split_across_many_writes_is_read_whole() -> None:
    data = framed(PING) + framed(PONG)
    r, w = os.pipe()
    step = threading.Event()

    def trickle() -> None:
        for i in range(len(data)):
            os.write(w, data[i : i + 1])
        os.close(w)
        step.set()

    threading.Thread(target=trickle).start()
    reader = FrameReader(r)
    frames = [await reader.read(), await reader.read(), await reader.read()]
    reader.close()
    os.close(r)
    assert frames == [Frame(PING.decode()), Frame(PONG.decode()), None]


@pytest.mark.parametrize(
    "length", [b"1000000000000", b"9223372036854775808", b"99999999999999999999999999"]
)
async def test_an_oversized_frame_is_answered_and_the_next_one_is_read(length: bytes) -> None:
    frames = await read_all(b"Content-Length: " + length + b"\r\n\r\n" + PING + framed(PONG))
    assert isinstance(frames[0], BadFrame) and frames[0].code == INVALID_REQUEST
    assert "over the limit" in frames[0].message
    assert frames[1:] == [Frame(PONG.decode())]


async def test_a_real_oversized_body_is_skipped_without_keeping_it() -> None:
    big = body({"jsonrpc": "2.0", "id": 3, "method": "x", "params": {"pad": "a" * 300_000}})
    frames = await read_all(framed(big) + framed(PONG), max_frame=100_000)
    assert [type(f) for f in frames] == [BadFrame, Frame]
    assert frames[1] == Frame(PONG.decode())


@pytest.mark.parametrize(
    "bad, message",
    [
        (b"Content-Type: x\r\n\r\n" + PING, "no Content-Length"),
        (PING + b"\r\n", "no Content-Length"),
        (b"Content-Length: many\r\n\r\n" + PING, "not a number"),
        (b"Content-Length: -4\r\n\r\n" + PING, "not a number"),
        (b"garbage line\r\n\r\n", "not 'Name: value'"),
    ],
)
async def test_a_frame_that_cannot_be_read_is_answered_and_reading_goes_on(
    bad: bytes, message: str
) -> None:
    frames = await read_all(bad + framed(PONG))
    assert isinstance(frames[0], BadFrame) and message in frames[0].message
    assert frames[-1] == Frame(PONG.decode())


async def test_a_body_that_is_not_utf8_is_a_parse_error() -> None:
    frames = await read_all(framed(b'{"a": "\xff\xfe"}') + framed(PONG))
    assert frames[0] == BadFrame(PARSE_ERROR, frames[0].message)  # type: ignore[union-attr]
    assert "UTF-8" in frames[0].message  # type: ignore[union-attr]
    assert frames[1] == Frame(PONG.decode())


async def test_input_that_ends_mid_frame_is_said_once() -> None:
    frames = await read_all(framed(PING) + b"Content-Length: 50\r\n\r\n{")
    assert frames[0] == Frame(PING.decode())
    assert isinstance(frames[1], BadFrame) and "ended in the middle" in frames[1].message
    assert len(frames) == 2


def test_nan_and_infinity_are_not_json() -> None:
    for text in ('{"limit": NaN}', '{"limit": Infinity}', '{"limit": -Infinity}'):
        with pytest.raises(json.JSONDecodeError):
            loads(text)
    assert loads('{"limit": 1.5}') == {"limit": 1.5}


def read_frames(fd: int, count: int) -> list[bytes]:
    """``count`` frames' bodies from ``fd`` (a plain blocking reader, like an editor)."""
    data, out = b"", []
    while len(out) < count:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = int(head.split(b":")[1])
            if len(rest) >= length:
                out.append(rest[:length])
                data = rest[length:]
                continue
        chunk = os.read(fd, 65536)
        assert chunk, "the writer's pipe closed early"
        data += chunk
    return out


def test_frames_are_written_in_the_order_they_were_sent(pipe: tuple[int, int]) -> None:
    r, w = pipe
    writer = FrameWriter(w)
    writer.send(PING)
    writer.write(framed(PONG))
    assert writer.drain(30)
    assert read_frames(r, 2) == [PING, PONG]
    writer.close()


def test_text_sent_while_a_frame_is_written_goes_out_as_one_frame(pipe: tuple[int, int]) -> None:
    r, w = pipe
    writer = FrameWriter(w)
    # Fill the pipe so the writer thread is stuck writing the first frame.
    filler = b'{"pad": "' + b"x" * (1 << 20) + b'"}'
    writer.send(filler)
    for i in range(1000):
        writer.stream(("run", 1), b'{"text": ', f"t{i} ", b"}")
    writer.send(PONG)
    writer.stream(("run", 1), b'{"text": ', "after", b"}")
    frames = read_frames(r, 4)
    assert frames[0] == filler
    merged = json.loads(frames[1])["text"]
    assert merged == "".join(f"t{i} " for i in range(1000))
    assert frames[2:] == [PONG, b'{"text": "after"}']
    writer.close()


def test_a_slow_stream_gets_each_piece_at_once(pipe: tuple[int, int]) -> None:
    r, w = pipe
    writer = FrameWriter(w)
    for i in range(3):
        writer.stream("s", b'{"text": ', f"piece {i}", b"}")
        assert read_frames(r, 1) == [f'{{"text": "piece {i}"}}'.encode()]
    writer.close()


def test_a_closed_stdout_stops_writing_without_raising(pipe: tuple[int, int]) -> None:
    r, w = pipe
    writer = FrameWriter(w)
    os.close(r)
    writer.send(PING)
    assert writer.drain(30)
    assert writer.broken
    writer.send(PONG)  # dropped, no exception
    writer.stream("s", b"{", "x", b"}")
    writer.close()
