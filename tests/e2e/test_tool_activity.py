"""Live tool activity: each tool call's status as it changes, and a running command's output
while it runs, to the editor (and every window following the session)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

from tests.e2e.conftest import Daemon
from tests.e2e.test_sessions import open_session, turn
from tests.e2e.test_shared import Windows, runtime, windows  # noqa: F401, F811 (fixtures)
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually

POLICY = {
    "layers": [{"name": "editor", "allowRead": ["**"], "allowExec": [f"{sys.executable} *"]}],
    "approval": "all",
}
# Prints, then waits until the test opens the FIFO for writing: it cannot end on its own.
WAITS = (
    "import sys; print('halfway there', flush=True);"
    " f = open(sys.argv[1]); f.read(); print('all done')"
)


class Watch:
    """What the editor is told about tool calls."""

    def __init__(self, daemon: Daemon) -> None:
        self.calls: list[dict[str, Any]] = []
        self.output: list[dict[str, Any]] = []
        daemon.client.feature("session/toolCall")(lambda ls, p: self.calls.append(p))
        daemon.client.feature("session/toolOutput")(lambda ls, p: self.output.append(p))

    def statuses(self, call_id: str) -> list[str]:
        return [c["status"] for c in self.calls if c["callId"] == call_id]

    def printed(self, call_id: str) -> str:
        return "".join(o["text"] for o in self.output if o["callId"] == call_id)


def waiting_command(workspace: Path) -> tuple[dict[str, Any], Path]:
    fifo = workspace / "go"
    os.mkfifo(fifo)
    argv = [sys.executable, "-c", WAITS, str(fifo)]
    return {"id": "call_wait", "name": "run_command", "arguments": {"argv": argv}}, fifo


def release(fifo: Path) -> None:
    with open(fifo, "w") as f:
        f.write("go")


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


async def test_every_window_following_the_session_sees_calls_and_output_live(
    windows: Windows,  # noqa: F811 (the fixture)
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
    windows: Windows,  # noqa: F811 (the fixture)
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
