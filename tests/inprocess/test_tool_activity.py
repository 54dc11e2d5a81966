"""Live tool activity: each tool call's status as it changes, and a running command's output
while it runs, to the editor."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fixtures.driver import TOOL_POLICY as POLICY
from tests.fixtures.driver import Daemon, Watch, open_session, release, turn, waiting_command
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually


async def test_a_commands_output_reaches_the_editor_before_the_command_ends(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    watch = Watch(daemon)
    session = await open_session(daemon, workspace, policy=POLICY)
    call, fifo = waiting_command(workspace)
    model.reply("Let me run it.", tool_calls=[call])
    model.reply("It printed its lines.")
    running = asyncio.ensure_future(turn(daemon, session, "run the slow thing"))

    await eventually(lambda: "halfway there" in watch.printed("call_wait"), "the live output")
    # The command still waits for the FIFO: nothing of its step is committed yet.
    assert watch.statuses("call_wait") == ["proposed", "running"]
    assert not daemon.steps and not running.done()
    proposed = watch.calls[0]
    assert proposed["tool"] == "run_command" and proposed["arguments"] == call["arguments"]
    assert proposed["step"] == 1 and proposed["sessionId"] == session["sessionId"]

    await asyncio.to_thread(release, fifo)
    result = await running
    assert result["outcome"] == "finished"
    assert watch.statuses("call_wait") == ["proposed", "running", "done"]
    assert "all done" in watch.printed("call_wait")
    step = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"][0]
    assert step["toolCall"]["id"] == "call_wait"
    assert "halfway there" in step["result"] and "all done" in step["result"]
    # Every piece of output came before the call's "done", and that before its step.
    kinds = [
        m["method"]
        for m in daemon.protocol.received
        if m.get("method") in ("session/toolOutput", "session/toolCall", "session/step")
    ]
    assert kinds.index("session/step") > max(
        i for i, k in enumerate(kinds) if k == "session/toolOutput"
    )


async def test_a_refused_and_a_failed_call_say_so(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    watch = Watch(daemon)
    session = await open_session(daemon, workspace, policy=POLICY)
    model.reply(
        "",
        tool_calls=[
            {"id": "call_touch", "name": "run_command", "arguments": {"argv": ["touch", "x"]}},
            {"id": "call_read", "name": "read_file", "arguments": {"path": "missing.txt"}},
            {"id": "call_list", "name": "list_dir", "arguments": {}},
        ],
    )
    model.reply("ok")
    result = await turn(daemon, session, "try things")

    assert result["outcome"] == "finished"
    assert watch.statuses("call_touch") == ["proposed", "refused"]
    assert watch.statuses("call_read") == ["proposed", "running", "failed"]
    assert watch.statuses("call_list") == ["proposed", "running", "done"]
    # All three were proposed before the first ran, each with its own step.
    assert [c["status"] for c in watch.calls[:3]] == ["proposed"] * 3
    assert [c["step"] for c in watch.calls[:3]] == [1, 2, 3]
    assert not (workspace / "x").exists()
    assert watch.output == []


async def test_a_cancelled_turn_cancels_its_running_call(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    watch = Watch(daemon)
    session = await open_session(daemon, workspace, policy=POLICY)
    call, _ = waiting_command(workspace)
    later = {"id": "call_later", "name": "list_dir", "arguments": {}}
    model.reply("", tool_calls=[call, later])
    running = asyncio.ensure_future(turn(daemon, session, "run and be stopped"))
    await eventually(lambda: "halfway there" in watch.printed("call_wait"), "the live output")

    await daemon.call("session/cancel", {"sessionId": session["sessionId"]})
    result = await running
    assert result["outcome"] == "cancelled"
    assert watch.statuses("call_wait") == ["proposed", "running", "cancelled"]
    assert watch.statuses("call_later") == ["proposed", "cancelled"]
