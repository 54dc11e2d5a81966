"""Turns survive a crash, and one daemon at a time writes a session."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

from tests.e2e.conftest import Daemon, DaemonFactory
from tests.fixtures.driver import held_after, open_session, tokens, turn
from tests.fixtures.model_server import ModelServer, split_words
from tests.fixtures.waits import eventually


async def test_a_daemon_killed_mid_stream_leaves_an_interrupted_turn_that_resumes(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    first = await spawn()
    session = await open_session(first, workspace)
    await turn(first, session, "hello")
    model.reply("Looking. ", tool_calls=[{"name": "list_dir", "arguments": {"path": "."}}])
    held_after(model, 3)
    running = asyncio.ensure_future(turn(first, session, "what files are here?"))
    await eventually(
        lambda: len(split_words("".join(t["text"] for t in first.tokens if t["step"] == 2))) >= 3,
        "step 2 is streaming",
    )
    os.kill(first.process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await running

    second = await spawn()
    history = (await second.call("session/history", {"sessionId": session["sessionId"]}))["turns"]
    interrupted = history[-1]
    assert interrupted["outcome"] == "interrupted"
    assert interrupted["prompt"] == "what files are here?"
    assert interrupted["reply"] == "Looking. "
    steps = (await second.call("run/steps", {"runId": interrupted["runId"]}))["steps"]
    assert [s["decision"] for s in steps] == ["tool"]
    assert "README.md" in steps[0]["result"]

    model.reply("There is a README.")
    resumed = await second.call(
        "session/resume", {"sessionId": session["sessionId"], "turnId": interrupted["turnId"]}
    )
    assert resumed["runId"] == interrupted["runId"]
    assert resumed["outcome"] == "finished"
    assert resumed["reply"] == "There is a README."  # what it said last
    continued = model.requests[-1]["messages"]
    assert any(m["role"] == "tool" and "README.md" in m["content"] for m in continued)
    assert [
        s["step"]
        for s in (await second.call("run/steps", {"runId": interrupted["runId"]}))["steps"]
    ] == [1, 2]

    # The session goes on, carrying the interrupted turn.
    await turn(second, session, "thanks")
    assert model.user_messages() == ["hello", "what files are here?", "thanks"]
    error = await second.error(
        "session/resume", {"sessionId": session["sessionId"], "turnId": interrupted["turnId"]}
    )
    assert error.code == -32020 and "not paused, interrupted or error" in error.message


async def test_the_next_turn_after_a_crash_carries_what_was_committed(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    first = await spawn()
    session = await open_session(first, workspace)
    held_after(model, 3)
    running = asyncio.ensure_future(turn(first, session, "count"))
    await tokens(first, 3)
    os.kill(first.process.pid, signal.SIGKILL)
    with contextlib.suppress(Exception):
        await running
    second = await spawn()
    turns = (await second.call("session/turns", {"sessionId": session["sessionId"]}))["turns"]
    assert [t["outcome"] for t in turns] == ["interrupted"]
    await turn(second, session, "go on")
    assert model.user_messages() == ["count", "go on"]


async def test_a_second_daemon_reads_but_cannot_write_while_the_first_lives(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    owner = await spawn()
    session = await open_session(owner, workspace)
    await turn(owner, session, "one")
    other = await spawn()
    reopened = await other.call("session/reopen", {"sessionId": session["sessionId"]})
    assert [t["prompt"] for t in reopened["history"]] == ["one"]
    owner_pid = str(owner.process.pid)
    for method, params in [
        ("session/turn", {"prompt": "two"}),
        ("session/branch", {"turnId": None}),
        ("session/steer", {"text": "hey"}),
        ("session/cancel", {}),
    ]:
        error = await other.error(method, {"sessionId": session["sessionId"], **params})
        assert error.code == -32030, (method, error.message)
        assert f"pid {owner_pid}" in error.message and error.data["ownerPid"] == int(owner_pid)
    # Reads go on meanwhile, and never meet a busy store.
    reads = [other.call("session/turns", {"sessionId": session["sessionId"]}) for _ in range(20)]

    async def writes() -> None:
        for i in range(3):
            await turn(owner, session, f"more {i}")

    await asyncio.gather(*reads, writes())

    await owner.client.shutdown_session()
    result = await turn(other, session, "two")
    assert result["outcome"] == "finished"
    assert model.user_messages()[-2:] == ["more 2", "two"]


async def test_takeover_moves_the_writer_and_the_old_one_fails_cleanly(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    old = await spawn()
    session = await open_session(old, workspace)
    new = await spawn()
    taken = await new.call("session/takeover", {"sessionId": session["sessionId"]})
    assert taken["sessionId"] == session["sessionId"]
    assert (await turn(new, session, "mine now"))["outcome"] == "finished"
    error = await old.error("session/turn", {"sessionId": session["sessionId"], "prompt": "x"})
    assert error.code == -32030 and f"pid {new.process.pid}" in error.message
    turns = (await new.call("session/turns", {"sessionId": session["sessionId"]}))["turns"]
    assert [t["prompt"] for t in turns] == ["mine now"]


async def test_a_dead_writer_gives_up_its_lease(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    owner = await spawn()
    session = await open_session(owner, workspace)
    other = await spawn()
    os.kill(owner.process.pid, signal.SIGKILL)
    await owner.process.wait()
    assert (await turn(other, session, "after the crash"))["outcome"] == "finished"


async def test_turns_of_a_session_in_use_elsewhere_are_not_marked_interrupted(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    owner: Daemon = await spawn()
    session = await open_session(owner, workspace)
    reply = held_after(model, 2, "slow " * 40)
    running = asyncio.ensure_future(turn(owner, session, "long"))
    await tokens(owner, 2)
    other = await spawn()
    turns = (await other.call("session/turns", {"sessionId": session["sessionId"]}))["turns"]
    assert turns[-1]["outcome"] == "running"
    reply.release()
    finished = await running
    assert (finished["outcome"], finished["reply"]) == ("finished", "slow " * 40)
