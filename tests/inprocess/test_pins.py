"""Pins over real pipes: ``session/pin`` and ``session/unpin`` answer the ``Session`` with its
``pinned`` turns, each is an entry of the session's log, and a turn the session does not
hold is refused as the protocol says."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.driver import Daemon
from tests.fixtures.model_server import ModelServer


async def test_a_turn_is_pinned_and_unpinned_over_the_wire(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await daemon.call("session/open", {"root": str(workspace)})
    sid = session["sessionId"]
    one = await daemon.call("session/turn", {"sessionId": sid, "prompt": "one"})
    two = await daemon.call("session/turn", {"sessionId": sid, "prompt": "two"})
    assert session["pinned"] == []
    before = await daemon.call("session/verify", {"sessionId": sid})

    await daemon.call("session/pin", {"sessionId": sid, "turnId": two["turnId"]})
    pinned = await daemon.call("session/pin", {"sessionId": sid, "turnId": one["turnId"]})
    reopened = await daemon.call("session/reopen", {"sessionId": sid})
    unpinned = await daemon.call("session/unpin", {"sessionId": sid, "turnId": two["turnId"]})
    after = await daemon.call("session/verify", {"sessionId": sid})

    assert pinned["pinned"] == reopened["pinned"] == [one["turnId"], two["turnId"]]
    assert unpinned["pinned"] == [one["turnId"]]
    assert after["ok"] is True and after["entries"] == before["entries"] + 3
    assert after["headHash"] == unpinned["headHash"] != pinned["headHash"]

    unknown = await daemon.error("session/pin", {"sessionId": sid, "turnId": "t-nope"})
    assert unknown.code == -32010 and "t-nope" in unknown.message
    missing = await daemon.error("session/unpin", {"sessionId": sid})
    assert missing.code == -32602 and missing.data["field"] == "turnId"
    other = await daemon.call("session/open", {"root": str(workspace)})
    foreign = await daemon.error(
        "session/pin", {"sessionId": other["sessionId"], "turnId": one["turnId"]}
    )
    assert foreign.code == -32602 and foreign.data["turnId"] == one["turnId"]
