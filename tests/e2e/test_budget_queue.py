"""A session's queue of prompts, seen by every window of the shared daemon following it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Daemon, Windows
from tests.fixtures.driver import open_session, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually, until


def notes(daemon: Daemon, method: str) -> list[dict[str, Any]]:
    return [m["params"] for m in daemon.protocol.received if m.get("method") == method]


async def test_every_window_following_a_session_sees_its_queue(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    one, _ = await windows.open()
    two, _ = await windows.open()
    gate = threading.Event()
    first = model.reply("first reply", hold=gate)
    model.reply("from the other window")
    session = await open_session(one, workspace)
    sid = session["sessionId"]
    await two.call("session/reopen", {"sessionId": sid})
    running = asyncio.ensure_future(turn(one, session, "one"))
    await until(first.served, "the first model call arrives")

    queued = asyncio.ensure_future(turn(two, session, "two", queue=True))
    await eventually(lambda: notes(one, "session/queued"), "the first window sees it queued")
    await eventually(lambda: notes(two, "session/queued"), "the second window sees it queued")
    waiting = await one.call("session/queue", {"sessionId": sid})

    assert [q["prompt"] for q in waiting["queued"]] == ["two"]
    assert notes(one, "session/queued") == notes(two, "session/queued")
    gate.set()
    assert (await running)["reply"] == "first reply"
    assert (await queued)["reply"] == "from the other window"
    await eventually(lambda: notes(one, "session/dequeued"), "the first window sees it start")
