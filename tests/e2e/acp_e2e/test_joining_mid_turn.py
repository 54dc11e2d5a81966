"""An ACP client that loads or resumes a session while a turn another window started runs on
the shared daemon: it gets the turn as far as it has gone (its prompt, its committed steps, the
text of the current step so far, the calls in flight with their output so far), then the rest
live, so the turn it draws is the whole turn, nothing missing and nothing twice."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.acp_e2e.conftest import NATIVE_WINDOWS, Agent, AgentFactory
from tests.e2e.conftest import Daemon, Windows
from tests.fixtures.driver import (
    LONG,
    Watch,
    held_after,
    open_session,
    release,
    turn,
    waiting_command,
)
from tests.fixtures.driver import TOOL_POLICY as POLICY
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually

pytestmark = pytest.mark.parametrize("acp_mode", [NATIVE_WINDOWS], indirect=True)

LIST = [{"name": "list_dir", "arguments": {"path": "."}}]


def calls(agent: Agent, sid: str) -> dict[str, list[Any]]:
    """Each tool call the client was sent, by id: its ``tool_call`` then its updates."""
    out: dict[str, list[Any]] = {}
    for s, u in agent.editor.updates:
        if s == sid and u.session_update in ("tool_call", "tool_call_update"):
            out.setdefault(u.tool_call_id, []).append(u)
    return out


def status(updates: list[Any]) -> str | None:
    return [u.status for u in updates if u.status is not None][-1]


def drawn(window: Daemon) -> str:
    return "".join(t["text"] for t in window.tokens)


def shown(update: Any) -> str:
    return "".join(c.content.text for c in update.content or [] if c.type == "content")


async def test_a_client_that_loads_or_resumes_mid_step_draws_the_whole_turn_once(
    spawn_acp: AgentFactory,
    windows: Windows,
    model: ModelServer,
    workspace: Path,
) -> None:
    a, _ = await windows.open()
    session = await open_session(a, workspace)
    sid = session["sessionId"]
    model.reply("Looking first. ", tool_calls=LIST)
    held = held_after(model, 5)
    running = asyncio.ensure_future(turn(a, session, "tell a long story"))
    so_far = "Looking first. " + "".join(f"{word} " for word in LONG.split(" ")[:5])
    await eventually(lambda: drawn(a) == so_far, "the first step and five words of the second")

    loading, resuming = await spawn_acp(db=windows.db), await spawn_acp(db=windows.db)
    await loading.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
    await resuming.conn.resume_session(cwd=str(workspace), session_id=sid)
    for agent in (loading, resuming):
        await agent.wait_for(
            lambda agent=agent: agent.editor.text(sid) == so_far, "the turn as far as it went"
        )
        assert agent.editor.text(sid, "user_message_chunk") == "tell a long story"
        [(ident, [call])] = calls(agent, sid).items()
        assert call.session_update == "tool_call" and call.status == "completed"
    held.release()
    result = await running

    assert result["outcome"] == "finished"
    for agent in (loading, resuming):
        await agent.wait_for(
            lambda agent=agent: agent.editor.text(sid).endswith(LONG), "the turn's end"
        )
        assert agent.editor.text(sid) == "Looking first. " + LONG
        assert agent.editor.text(sid, "user_message_chunk") == "tell a long story"
        assert [u.session_update for u in calls(agent, sid)[ident]] == ["tool_call"]


async def test_a_client_that_loads_mid_command_gets_the_calls_in_flight(
    spawn_acp: AgentFactory,
    windows: Windows,
    model: ModelServer,
    workspace: Path,
) -> None:
    a, _ = await windows.open()
    watch = Watch(a)
    session = await open_session(a, workspace, policy=POLICY)
    sid = session["sessionId"]
    first = await turn(a, session, "hello")  # an earlier turn, replayed as it was
    call, fifo = waiting_command(workspace)
    later = {"id": "call_later", "name": "list_dir", "arguments": {}}
    model.reply("", tool_calls=[call, later])
    model.reply("done")
    running = asyncio.ensure_future(turn(a, session, "run it"))
    await eventually(lambda: "halfway" in watch.printed("call_wait"), "the live output")

    agent = await spawn_acp(db=windows.db)
    await agent.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
    await agent.wait_for(lambda: len(calls(agent, sid)) == 2, "the calls in flight")
    waiting, listing = calls(agent, sid).values()
    assert [(u.session_update, u.status) for u in waiting] == [("tool_call", "in_progress")]
    assert waiting[0].kind == "execute" and shown(waiting[0]) == "halfway there\n"
    assert [(u.session_update, u.status) for u in listing] == [("tool_call", "pending")]
    await asyncio.to_thread(release, fifo)
    result = await running

    assert result["outcome"] == "finished"
    await agent.wait_for(
        lambda: all(status(u) == "completed" for u in calls(agent, sid).values()),
        "both calls complete",
    )
    await agent.wait_for(lambda: agent.editor.text(sid).endswith("done"), "the turn's text")
    assert agent.editor.text(sid) == first["reply"] + "done"
    assert agent.editor.text(sid, "user_message_chunk") == "hello" + "run it"
    waiting, listing = calls(agent, sid).values()
    assert [u.session_update for u in waiting + listing].count("tool_call") == 2
    *_, last = [shown(u) for u in waiting if u.content]
    assert last.endswith("exit code 0\nhalfway there\nall done\n")


async def test_a_client_that_loads_a_resumed_turn_mid_step_gets_its_earlier_steps_once(
    spawn_acp: AgentFactory,
    windows: Windows,
    model: ModelServer,
    workspace: Path,
) -> None:
    a, _ = await windows.open()
    session = await open_session(a, workspace)
    sid = session["sessionId"]
    model.reply("Looking first. ", tool_calls=LIST)
    paused = await turn(a, session, "tell it in steps", stepMode=True)
    assert paused["outcome"] == "paused"
    held = held_after(model, 3)
    resumed = asyncio.ensure_future(
        a.call("session/resume", {"sessionId": sid, "turnId": paused["turnId"]})
    )
    so_far = "Looking first. " + "".join(f"{word} " for word in LONG.split(" ")[:3])
    await eventually(lambda: drawn(a) == so_far, "three words of the resumed step")

    agent = await spawn_acp(db=windows.db)
    await agent.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
    await agent.wait_for(lambda: agent.editor.text(sid) == so_far, "the turn as far as it went")
    held.release()
    result = await resumed

    assert result["outcome"] == "finished"
    await agent.wait_for(lambda: agent.editor.text(sid).endswith(LONG), "the turn's end")
    assert agent.editor.text(sid) == "Looking first. " + LONG
    assert agent.editor.text(sid, "user_message_chunk") == "tell it in steps"
    [(_, [call])] = calls(agent, sid).items()
    assert call.session_update == "tool_call" and call.status == "completed"
