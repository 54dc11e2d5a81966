"""The ACP outbox of a shared daemon's window: a client that stops reading is given up on once
too many updates wait for it, instead of holding the daemon's memory."""

from __future__ import annotations

import asyncio
from typing import Any

from trellisd.acp import updates
from trellisd.acp.notifier import Outbox


class StuckPeer:
    """A client that reads the first update and then nothing more."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.reading = asyncio.Event()

    async def notify(self, method: str, params: Any) -> None:
        self.sent.append(params)
        self.reading.set()
        await asyncio.Event().wait()

    async def request(self, method: str, params: Any) -> Any:
        raise AssertionError("not asked")


async def test_a_client_that_stops_reading_is_dropped_once_past_the_limit() -> None:
    peer, dropped = StuckPeer(), []
    outbox = Outbox(peer, limit=3, overflow=lambda: dropped.append(True))
    outbox.put("s", updates.agent_text("first"))
    await peer.reading.wait()
    for n in range(3):
        outbox.put("s", updates.agent_text(f"waiting {n}"))
    assert not dropped
    outbox.put("s", updates.agent_text("one too many"))
    outbox.put("s", updates.agent_text("after the drop"))
    assert dropped == [True] and outbox.broken
    await outbox.close()
    assert len(peer.sent) == 1


async def test_without_a_limit_every_update_waits_its_turn() -> None:
    peer = StuckPeer()
    outbox = Outbox(peer)
    outbox.put("s", updates.agent_text("first"))
    await peer.reading.wait()
    for n in range(10):
        outbox.put("s", updates.agent_text(f"waiting {n}"))
    assert not outbox.broken
    await outbox.close()
