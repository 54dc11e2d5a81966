"""Live tool activity in every window of the shared daemon following the session, and in a
window that reopens it mid-command."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.conftest import Windows
from tests.fixtures.driver import TOOL_POLICY as POLICY
from tests.fixtures.driver import Watch, open_session, release, turn, waiting_command
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually


async def test_every_window_following_the_session_sees_calls_and_output_live(
    windows: Windows,
    model: ModelServer,
    workspace: Path,
) -> None:
    a, _ = await windows.open()
    b, _ = await windows.open()
    watched = {window: Watch(window) for window in (a, b)}
    session = await open_session(a, workspace, policy=POLICY)
    await b.call("session/reopen", {"sessionId": session["sessionId"]})
    call, fifo = waiting_command(workspace)
    model.reply("", tool_calls=[call])
    model.reply("done")
    running = asyncio.ensure_future(turn(a, session, "run it"))

    for watch in watched.values():
        await eventually(lambda w=watch: "halfway" in w.printed("call_wait"), "live output")
        assert watch.statuses("call_wait") == ["proposed", "running"]
    await asyncio.to_thread(release, fifo)
    await running
    for watch in watched.values():
        await eventually(lambda w=watch: "done" in w.statuses("call_wait"), "the call's end")
        assert watch.statuses("call_wait") == ["proposed", "running", "done"]
        assert "all done" in watch.printed("call_wait")


async def test_a_window_that_reopens_mid_command_gets_the_call_and_its_output_so_far(
    windows: Windows,
    model: ModelServer,
    workspace: Path,
) -> None:
    a, _ = await windows.open()
    b, _ = await windows.open()
    watch_a, watch_b = Watch(a), Watch(b)
    session = await open_session(a, workspace, policy=POLICY)
    call, fifo = waiting_command(workspace)
    later = {"id": "call_later", "name": "list_dir", "arguments": {}}
    model.reply("", tool_calls=[call, later])
    model.reply("done")
    running = asyncio.ensure_future(turn(a, session, "run it"))
    await eventually(lambda: "halfway" in watch_a.printed("call_wait"), "the live output")

    reopened = await b.call("session/reopen", {"sessionId": session["sessionId"]})
    calls = {c["callId"]: c for c in reopened["running"]["calls"]}
    assert calls["call_wait"]["status"] == "running" and calls["call_wait"]["step"] == 1
    assert calls["call_wait"]["tool"] == "run_command"
    assert calls["call_wait"]["arguments"] == call["arguments"]
    assert calls["call_wait"]["output"] == "halfway there\n"
    assert calls["call_later"]["status"] == "proposed" and calls["call_later"]["step"] == 2
    # What follows the answer completes it: the rest of the output, then the statuses.
    await asyncio.to_thread(release, fifo)
    await running
    await eventually(lambda: "done" in watch_b.statuses("call_later"), "the second call's end")
    assert calls["call_wait"]["output"] + watch_b.printed("call_wait") == watch_a.printed(
        "call_wait"
    )
    assert watch_b.statuses("call_wait") == ["done"]
    assert watch_b.statuses("call_later") == ["running", "done"]

    # Once the steps are committed, the calls are in run/steps, not in a reopen's answer.
    model.reply("", tool_calls=[{"id": "call_ls", "name": "list_dir", "arguments": {}}])
    model.reply("again")
    await turn(a, session, "list it")
    assert "running" not in await b.call("session/reopen", {"sessionId": session["sessionId"]})
