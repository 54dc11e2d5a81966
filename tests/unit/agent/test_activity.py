"""A running command's output on its way to the editor: coalesced, capped, whole characters."""

from __future__ import annotations

import asyncio

from trellisd.agent.activity import OUTPUT_CUT_NOTE, OutputFeed
from trellisd.agent.attached import Attached, LineRange, frame


class Sent:
    def __init__(self) -> None:
        self.pieces: list[str] = []
        self.arrived = asyncio.Event()

    def __call__(self, text: str) -> None:
        self.pieces.append(text)
        self.arrived.set()


async def test_output_that_comes_in_many_small_chunks_goes_out_as_one_piece() -> None:
    sent = Sent()
    feed = OutputFeed(sent)
    for n in range(100):
        feed.add(f"line {n}\n".encode())
    assert sent.pieces == []  # waiting for the interval, not one notification per chunk
    await sent.arrived.wait()  # the interval's timer sends it
    assert sent.pieces == ["".join(f"line {n}\n" for n in range(100))]
    feed.close()
    assert len(sent.pieces) == 1


async def test_a_full_piece_goes_out_at_once_and_close_sends_the_rest() -> None:
    sent = Sent()
    feed = OutputFeed(sent, piece=10)
    feed.add(b"0123456789ab")
    assert sent.pieces == ["0123456789ab"]
    feed.add(b"tail")
    feed.close()
    assert sent.pieces == ["0123456789ab", "tail"]
    feed.add(b"after the end")
    assert sent.pieces == ["0123456789ab", "tail"]


async def test_a_character_split_between_chunks_arrives_whole() -> None:
    sent = Sent()
    feed = OutputFeed(sent, piece=1)
    data = "é€".encode()
    feed.add(data[:1])
    feed.add(data[1:4])
    feed.add(data[4:])
    feed.close()
    assert "".join(sent.pieces) == "é€"


async def test_output_past_the_cap_is_not_sent_and_the_editor_is_told() -> None:
    sent = Sent()
    feed = OutputFeed(sent, limit=16, piece=1000)
    for _ in range(10):
        feed.add(b"0123456789")
    feed.close()
    assert "".join(sent.pieces) == "0123456789012345" + OUTPUT_CUT_NOTE.format(limit=16)


def test_the_context_comes_before_the_prompt_in_its_framing() -> None:
    attached = [
        Attached("selection", 'a "b".py', LineRange(2, 3), "x\ny", "daemon"),
        Attached("diagnostics", "a.py", None, "a.py:1: bad\n", "editor"),
    ]
    assert frame("why?", attached) == (
        "<editor-context>\n"
        '<selection path="a &quot;b&quot;.py" lines="2-3">\nx\ny\n</selection>\n'
        '<diagnostics path="a.py">\na.py:1: bad\n</diagnostics>\n'
        "</editor-context>\n\nwhy?"
    )
    assert frame("why?", []) == "why?"
