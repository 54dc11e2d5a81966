"""A session's life over real pipes: fork, rename, instructions, close, delete, and the
session's feed of commits, with their error cases."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from tests.e2e.conftest import Daemon, DaemonFactory
from tests.e2e.test_sessions import open_session, turn
from tests.fixtures.model_server import ModelServer

CONFLICT, NOT_FOUND, INVALID, LEASE_HELD = -32020, -32010, -32602, -32030


async def prompts(daemon: Daemon, session_id: str) -> list[str]:
    history = await daemon.call("session/history", {"sessionId": session_id})
    return [t["prompt"] for t in history["turns"]]


async def test_a_fork_goes_on_from_a_turn_and_leaves_its_origin_alone(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    origin = await open_session(daemon, workspace, title="the first line")
    one = await turn(daemon, origin, "one")
    two = await turn(daemon, origin, "two")
    await turn(daemon, origin, "three")

    fork = await daemon.call(
        "session/fork", {"sessionId": origin["sessionId"], "turnId": two["turnId"]}
    )

    assert fork["sessionId"] != origin["sessionId"]
    assert fork["forkedFrom"] == {"sessionId": origin["sessionId"], "turnId": two["turnId"]}
    assert fork["title"] == "the first line" and fork["root"] == origin["root"]
    assert await prompts(daemon, fork["sessionId"]) == ["one", "two"]
    model.reply("forked reply")
    await turn(daemon, fork, "two and a half")
    assert model.user_messages() == ["one", "two", "two and a half"]
    sent = [m["content"] for m in model.requests[-1]["messages"] if m["role"] == "assistant"]
    assert sent == ["echo: one", "echo: two"]
    assert await prompts(daemon, origin["sessionId"]) == ["one", "two", "three"]

    empty = await daemon.call("session/fork", {"sessionId": origin["sessionId"], "turnId": None})
    assert empty["head"] is None and empty["forkedFrom"]["turnId"] is None
    await turn(daemon, empty, "afresh")
    assert model.user_messages() == ["afresh"]

    # The lineage is shown by session/list and by a reopen in another process.
    listed = (await daemon.call("session/list", {}))["sessions"]
    lineage = {s["sessionId"]: s["forkedFrom"] for s in listed}
    assert lineage[fork["sessionId"]] == fork["forkedFrom"]
    assert lineage[origin["sessionId"]] is None
    reopened = await daemon.call("session/reopen", {"sessionId": fork["sessionId"]})
    assert reopened["forkedFrom"] == fork["forkedFrom"]
    assert one["turnId"] not in {t["turnId"] for t in reopened["history"]}


async def test_a_fork_stays_whole_when_its_origin_is_deleted(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    origin = await open_session(daemon, workspace)
    await turn(daemon, origin, "one")
    two = await turn(daemon, origin, "two")
    fork = await daemon.call(
        "session/fork", {"sessionId": origin["sessionId"], "turnId": two["turnId"]}
    )

    await daemon.call("session/delete", {"sessionId": origin["sessionId"]})
    await daemon.client.shutdown_session()

    other = await spawn()
    reopened = await other.call("session/reopen", {"sessionId": fork["sessionId"]})
    assert [t["prompt"] for t in reopened["history"]] == ["one", "two"]
    assert [t["reply"] for t in reopened["history"]] == ["echo: one", "echo: two"]
    assert reopened["forkedFrom"]["sessionId"] == origin["sessionId"]
    await turn(other, reopened, "three")
    assert model.user_messages() == ["one", "two", "three"]


async def test_fork_errors(daemon: Daemon, model: ModelServer, workspace: Path) -> None:
    a = await open_session(daemon, workspace)
    b = await open_session(daemon, workspace)
    in_b = await turn(daemon, b, "b's turn")

    unknown = await daemon.error("session/fork", {"sessionId": "s-nope", "turnId": None})
    assert unknown.code == NOT_FOUND and unknown.data["sessionId"] == "s-nope"
    other = await daemon.error(
        "session/fork", {"sessionId": a["sessionId"], "turnId": in_b["turnId"]}
    )
    assert other.code == INVALID and other.data["turnId"] == in_b["turnId"]
    missing = await daemon.error("session/fork", {"sessionId": a["sessionId"]})
    assert missing.code == INVALID and missing.data["field"] == "turnId"

    held = model.reply("slow", hold=threading.Event())
    running = asyncio.ensure_future(turn(daemon, a, "a long one"))
    await asyncio.to_thread(held.served.wait, 60)
    head = (await daemon.call("session/reopen", {"sessionId": a["sessionId"]}))["head"]
    busy = await daemon.error("session/fork", {"sessionId": a["sessionId"], "turnId": head})
    assert busy.code == CONFLICT and busy.data["turnId"] == head
    # A fork from a finished turn works while the origin runs another.
    earlier = await daemon.call("session/fork", {"sessionId": a["sessionId"], "turnId": None})
    assert earlier["forkedFrom"]["sessionId"] == a["sessionId"]
    held.release()
    assert (await running)["outcome"] == "finished"
