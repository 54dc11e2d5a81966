"""Pausing over real pipes: session/pause stops a turn at its next step boundary (the step in
flight completes), stepMode pauses after every step, session/resume continues a paused turn
under the same run (in another daemon too), and a steer sent while paused is delivered at the
resumed step."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from tests.fixtures.driver import Daemon, DaemonFactory
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import until
from trellisd.agent.steering import STEER_NOTE

READ = [{"name": "read_file", "arguments": {"path": "README.md"}}]


async def test_pause_lets_the_step_in_flight_commit_then_stops(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    first = await spawn()
    session = await first.call("session/open", {"root": str(workspace)})
    sid = session["sessionId"]
    held = model.reply("Let me look.", tool_calls=READ, hold=threading.Event(), hold_at=1)
    running = asyncio.ensure_future(first.call("session/turn", {"sessionId": sid, "prompt": "go"}))
    await until(held.served, "the model call is in flight")

    pausing = await first.call("session/pause", {"sessionId": sid})
    assert pausing["pausing"] is True and pausing["sessionId"] == sid
    assert not running.done()
    held.release()
    paused = await running

    assert paused["outcome"] == "paused" and paused["steps"] == 1
    assert len(model.requests) == 1  # no model call after the step that was in flight
    assert [s["decision"] for s in first.steps] == ["tool"]
    receipt = await first.call(
        "session/steer", {"sessionId": sid, "text": "mention the license", "clientMsgId": "m1"}
    )
    assert receipt["turnId"] == paused["turnId"] and receipt["queued"] is True
    again = await first.call(
        "session/steer", {"sessionId": sid, "text": "mention the license", "clientMsgId": "m1"}
    )
    assert again.get("duplicate") is True
    reopened = await first.call("session/reopen", {"sessionId": sid})
    assert reopened["history"][-1]["outcome"] == "paused"
    assert "running" not in reopened  # a paused turn is not running: no live snapshot
    await first.client.shutdown_session()  # the steer is kept in the store, not in memory

    second = await spawn(db=first.db)
    model.reply("A demo project; no license.")
    resumed = await second.call("session/resume", {"sessionId": sid, "turnId": paused["turnId"]})

    assert resumed["outcome"] == "finished"
    assert resumed["runId"] == paused["runId"] and resumed["steps"] == 2
    assert model.user_messages()[-1] == STEER_NOTE + "mention the license"
    steps = await second.call("run/steps", {"runId": paused["runId"]})
    assert steps["steps"][1]["prompt"] == "mention the license"
    verdict = await second.call("session/verify", {"sessionId": sid})
    assert verdict["ok"] is True


async def test_step_mode_pauses_after_every_step(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await daemon.call("session/open", {"root": str(workspace)})
    sid = session["sessionId"]
    model.reply("First.", tool_calls=READ)
    model.reply("Second.", tool_calls=[{"name": "list_dir", "arguments": {"path": "."}}])
    model.reply("Done.")

    one = await daemon.call("session/turn", {"sessionId": sid, "prompt": "go", "stepMode": True})
    assert (one["outcome"], one["steps"], len(model.requests)) == ("paused", 1, 1)
    two = await daemon.call(
        "session/resume", {"sessionId": sid, "turnId": one["turnId"], "stepMode": True}
    )
    assert (two["outcome"], two["steps"], len(model.requests)) == ("paused", 2, 2)
    three = await daemon.call(
        "session/resume", {"sessionId": sid, "turnId": one["turnId"], "stepMode": True}
    )
    assert (three["outcome"], three["steps"], three["reply"]) == (
        "finished",
        3,
        "Done.",
    )
    assert three["runId"] == one["runId"]
    events = await daemon.call("run/events", {"runId": one["runId"]})
    assert [e["kind"] for e in events["events"]].count("resumed") == 2


async def test_pause_with_nothing_running_says_so(daemon: Daemon, workspace: Path) -> None:
    session = await daemon.call("session/open", {"root": str(workspace)})
    assert await daemon.call("session/pause", {"sessionId": session["sessionId"]}) == {
        "pausing": False
    }
    error = await daemon.error("session/pause", {"sessionId": "s-nope"})
    assert error.code == -32010


async def test_a_finished_turn_cannot_be_resumed(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await daemon.call("session/open", {"root": str(workspace)})
    done = await daemon.call("session/turn", {"sessionId": session["sessionId"], "prompt": "hello"})
    error = await daemon.error(
        "session/resume", {"sessionId": session["sessionId"], "turnId": done["turnId"]}
    )
    assert error.code == -32020 and error.data["outcome"] == "finished"
