"""A session's life between daemon processes on one store: who may fork, rename, close and
delete a session another daemon writes, and what a reader in another process sees."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.driver import open_session, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually

CONFLICT, NOT_FOUND, INVALID, LEASE_HELD = -32020, -32010, -32602, -32030


async def test_another_daemon_may_fork_but_not_rename_a_session_it_does_not_write(
    spawn: DaemonFactory, workspace: Path
) -> None:
    first, second = await spawn(), await spawn()
    session = await open_session(first, workspace, title="mine")

    refused = await second.error(
        "session/rename", {"sessionId": session["sessionId"], "title": "x"}
    )

    assert refused.code == LEASE_HELD and refused.data["ownerPid"] == first.process.pid
    # Forking only reads the origin: the other daemon forks it, and writes the fork.
    fork = await second.call("session/fork", {"sessionId": session["sessionId"], "turnId": None})
    renamed = await second.call("session/rename", {"sessionId": fork["sessionId"], "title": "x"})
    assert renamed["title"] == "x" and renamed["forkedFrom"]["sessionId"] == session["sessionId"]


async def test_close_lets_another_daemon_write_and_reopen_works_after(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    first, second = await spawn(), await spawn()
    session = await open_session(first, workspace)
    await turn(first, session, "one")
    held = await second.error("session/turn", {"sessionId": session["sessionId"], "prompt": "x"})
    assert held.code == LEASE_HELD

    closed = await first.call("session/close", {"sessionId": session["sessionId"]})

    assert closed == {"sessionId": session["sessionId"], "closed": True}
    await turn(second, session, "two")
    assert model.user_messages() == ["one", "two"]
    await second.call("session/close", {"sessionId": session["sessionId"]})
    reopened = await first.call("session/reopen", {"sessionId": session["sessionId"]})
    assert [t["prompt"] for t in reopened["history"]] == ["one", "two"]
    await turn(first, session, "three")
    unknown = await first.error("session/close", {"sessionId": "s-nope"})
    assert unknown.code == NOT_FOUND


async def test_a_deleted_session_never_comes_back_in_any_daemon(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    first, second = await spawn(), await spawn()
    doomed = await open_session(first, workspace, title="doomed")
    kept = await open_session(first, workspace, title="kept")
    await turn(first, doomed, "one")
    await turn(first, kept, "kept one")

    refused = await second.error("session/delete", {"sessionId": doomed["sessionId"]})
    assert refused.code == LEASE_HELD and refused.data["ownerPid"] == first.process.pid
    assert f"pid {first.process.pid}" in refused.message

    deleted = await first.call("session/delete", {"sessionId": doomed["sessionId"]})

    assert deleted == {"sessionId": doomed["sessionId"], "deleted": True}
    third = await spawn()
    for daemon in (first, second, third):
        listed = (await daemon.call("session/list", {}))["sessions"]
        assert [s["title"] for s in listed] == ["kept"]
        gone = await daemon.error("session/reopen", {"sessionId": doomed["sessionId"]})
        assert gone.code == NOT_FOUND and gone.data["sessionId"] == doomed["sessionId"]
        again = await daemon.error("session/delete", {"sessionId": doomed["sessionId"]})
        assert again.code == NOT_FOUND
    await turn(first, kept, "kept two")
    assert model.user_messages() == ["kept one", "kept two"]


async def test_a_reader_in_another_process_sees_only_the_committed_prefix(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    writer, reader = await spawn(), await spawn()
    session = await open_session(writer, workspace)
    sid = session["sessionId"]
    first_turn = (await turn(writer, session, "first"))["turnId"]
    model.reply("Looking. ", tool_calls=[{"name": "list_dir", "arguments": {"path": "."}}])
    held = model.reply("It holds a README.", hold=threading.Event(), hold_at=1)
    running = asyncio.ensure_future(turn(writer, session, "what is here?"))

    async def feed(after: int = 0) -> list[dict]:
        page = await reader.call("session/events", {"sessionId": sid, "after": after})
        assert page["next"] is None
        return page["events"]

    async def running_step_committed() -> list[dict] | None:
        got = await feed()
        return got if any(e["kind"] == "step" and e["turnId"] != first_turn for e in got) else None

    # The reader polls until the running turn's first step is committed; the model holds
    # the second step, so that is all there is to see.
    seen = await eventually(running_step_committed, "the reader sees the running turn's step")
    assert [e["kind"] for e in seen] == [
        "turnStarted",
        "event",
        "step",
        "turnEnded",  # the first turn
        "turnStarted",
        "event",
        "step",  # the running one, so far
    ]
    assert [e["seq"] for e in seen] == list(range(1, 8))
    assert seen[4]["prompt"] == "what is here?" and seen[6]["step"]["decision"] == "tool"
    assert await feed(7) == []

    held.release()
    result = await running
    rest = await eventually(lambda: feed(7), "the reader sees the turn end")
    final = await feed()
    assert final[:7] == seen and final[7:] == rest
    assert [e["kind"] for e in rest] == ["step", "turnEnded"]
    assert rest[-1]["outcome"] == "finished" and rest[-1]["runId"] == result["runId"]

    # A page at a time.
    first = await reader.call("session/events", {"sessionId": sid, "limit": 4})
    second = await reader.call("session/events", {"sessionId": sid, "after": first["next"]})
    assert first["next"] == 4 and second["next"] is None
    assert first["events"] + second["events"] == final
    unknown = await reader.error("session/events", {"sessionId": "s-nope"})
    assert unknown.code == NOT_FOUND
    bad = await reader.error("session/events", {"sessionId": sid, "limit": 0})
    assert bad.code == INVALID and bad.data["field"] == "limit"
