"""A cancel that has to kill a command mid-run leaves the session waiting for a person's
decision: the turn and the session say so, new turns are refused until ``session/recover``
keeps what the command left or reverts the turn, in this daemon and the next one; a command
that stops when asked needs no decision."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.fixtures.driver import (
    OPEN,
    STUBBORN,
    Daemon,
    DaemonFactory,
    killed_turn,
    open_session,
    running_command,
    turn,
)
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually

CONFLICT = -32020


async def test_a_killed_command_waits_for_keep_or_revert(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    session = await open_session(daemon, workspace, policy=OPEN)
    sid = session["sessionId"]
    behind: list[Any] = []
    result = await killed_turn(daemon, model, session, behind)

    needed = {"required": True, "tool": "run_command", "argv": STUBBORN}
    assert result["outcome"] == "cancelled" and result["recovery"] == needed
    ended = [
        m["params"] for m in daemon.protocol.received if m.get("method") == "session/turnEnded"
    ]
    assert [e.get("recovery") for e in ended] == [needed]
    pending = {
        "turnId": result["turnId"],
        "runId": result["runId"],
        "tool": "run_command",
        "argv": STUBBORN,
    }
    reopened = await daemon.call("session/reopen", {"sessionId": sid})
    assert reopened["recovery"] == pending
    assert reopened["history"][-1]["recovery"] == needed

    refused = await daemon.error("session/turn", {"sessionId": sid, "prompt": "carry on"})
    assert refused.code == CONFLICT
    assert refused.data == {"sessionId": sid, "recovery": pending}
    assert "needs a decision" in refused.message and "session/recover" in refused.message
    assert "(sh -c" in refused.message
    started_late = await behind[0]  # the prompt queued behind the killed turn, at its start
    assert started_late.code == CONFLICT and started_late.data["recovery"] == pending
    queued = await daemon.error(
        "session/turn", {"sessionId": sid, "prompt": "later", "queue": True}
    )
    assert queued.code == CONFLICT and queued.data["recovery"] == pending
    resumed = await daemon.error("session/resume", {"sessionId": sid, "turnId": result["turnId"]})
    assert resumed.code == CONFLICT and resumed.data["recovery"] == pending

    # A new daemon on the store sees the same pending decision.
    await daemon.client.shutdown_session()
    daemon = await spawn()
    again = await daemon.call("session/reopen", {"sessionId": sid})
    assert again["recovery"] == pending
    listed = (await daemon.call("session/list", {}))["sessions"]
    assert [s.get("recovery") for s in listed] == [pending]

    kept = await daemon.call("session/recover", {"sessionId": sid, "decision": "keep"})
    assert "recovery" not in kept and "files" not in kept
    assert (workspace / "README.md").read_text() == "# rewritten\n"
    nothing = await daemon.error("session/recover", {"sessionId": sid, "decision": "keep"})
    assert nothing.code == CONFLICT and "nothing to recover" in nothing.message
    model.reply("Carrying on.")
    assert (await turn(daemon, again, "carry on"))["outcome"] == "finished"

    # Killed again, then reverted: the file the turn wrote is put back.
    (workspace / "README.md").write_text("# demo project\n")
    second = await killed_turn(daemon, model, again)
    assert second["recovery"] == needed
    assert (workspace / "README.md").read_text() == "# rewritten\n"
    reverted = await daemon.call("session/recover", {"sessionId": sid, "decision": "revert"})
    assert "recovery" not in reverted
    assert reverted["files"] == {"restored": ["README.md"], "skipped": []}
    assert (workspace / "README.md").read_text() == "# demo project\n"

    # Each decision is in the session's log, which still checks.
    decisions = [
        e["event"]["detail"]["decision"]
        for e in (await daemon.call("session/events", {"sessionId": sid}))["events"]
        if e["kind"] == "event" and e["event"]["kind"] == "recovered"
    ]
    assert decisions == ["keep", "revert"]
    assert (await daemon.call("session/verify", {"sessionId": sid}))["ok"] is True


async def test_a_command_that_stops_when_asked_needs_no_decision(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=OPEN)
    model.reply(
        "Waiting.",
        tool_calls=[
            {"name": "run_command", "arguments": {"argv": ["sh", "-c", "echo waiting; sleep 300"]}}
        ],
    )
    running = asyncio.ensure_future(turn(daemon, session, "wait"))
    await eventually(lambda: running_command(daemon, "waiting"), "the command runs")
    await daemon.call("session/cancel", {"sessionId": session["sessionId"]})
    result = await running
    assert result["outcome"] == "cancelled" and "recovery" not in result
    model.reply("Next.")
    assert (await turn(daemon, session, "next"))["outcome"] == "finished"
