"""A command killed as the daemon exits leaves the session waiting for a person's decision
in the next daemon."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.driver import OPEN, STUBBORN, open_session, running_command, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually

CONFLICT = -32020


async def test_a_command_killed_as_the_daemon_exits_waits_for_the_next_daemon(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    session = await open_session(daemon, workspace, policy=OPEN)
    model.reply("Migrating.", tool_calls=[{"name": "run_command", "arguments": {"argv": STUBBORN}}])
    running = asyncio.ensure_future(turn(daemon, session, "migrate"))
    await eventually(lambda: running_command(daemon, "migrating"), "the command runs")
    await daemon.client.shutdown_session()  # exit while the command runs
    running.cancel()

    after = await spawn()
    reopened = await after.call("session/reopen", {"sessionId": session["sessionId"]})
    assert reopened["history"][-1]["outcome"] == "cancelled"
    assert reopened["recovery"]["argv"] == STUBBORN
    refused = await after.error("session/turn", {"sessionId": session["sessionId"], "prompt": "go"})
    assert refused.code == CONFLICT and refused.data["recovery"] == reopened["recovery"]
