"""An ACP client and native windows on the store's shared daemon: ``trellisd acp`` attaches to
it as ``trellisd`` does, so a session open in a native window is prompted over ACP while that
window draws the turn live, a native turn reaches the ACP client as ``session/update``s, and
an approval is asked in both, the first answer deciding and the other question withdrawn; a
prompt over ACP while a native window's turn runs steers it."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from acp import text_block
from lsprotocol import types

from tests.e2e.acp_e2e.conftest import NATIVE_WINDOWS, AgentFactory
from tests.e2e.conftest import Windows
from tests.fixtures.driver import LONG, followed, held_after, open_session, streamed, tokens, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import SAFETY_NET, eventually

pytestmark = pytest.mark.parametrize("acp_mode", [NATIVE_WINDOWS], indirect=True)

WRITE = [{"name": "write_file", "arguments": {"path": "both.txt", "content": "x"}}]


async def test_a_native_windows_session_is_prompted_over_acp_and_drawn_live_natively(
    spawn_acp: AgentFactory,
    windows: Windows,
    model: ModelServer,
    workspace: Path,
) -> None:
    a, facts = await windows.open()
    session = await open_session(a, workspace)
    sid = session["sessionId"]
    agent = await spawn_acp(db=windows.db)
    await agent.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
    held = model.reply("Zed and VS Code read the same words.", hold=threading.Event(), hold_at=2)

    prompt = asyncio.ensure_future(
        agent.conn.prompt(session_id=sid, prompt=[text_block("say it to both")])
    )
    await agent.wait_for(lambda: agent.editor.text(sid), "the ACP client draws the first words")
    await eventually(lambda: a.tokens, "the native window draws them too, mid-turn")
    [run_id] = {t["runId"] for t in a.tokens}
    held.release()
    answer = await prompt

    assert answer.stop_reason == "end_turn"
    assert agent.editor.text(sid) == "Zed and VS Code read the same words."
    assert streamed(a, run_id) == "Zed and VS Code read the same words."
    [reply] = [s for s in followed(a, "session/step") if s["decision"] == "reply"]
    assert reply["runId"] == run_id
    history = (await a.call("session/history", {"sessionId": sid}))["turns"]
    assert [(t["prompt"], t["outcome"]) for t in history] == [("say it to both", "finished")]
    assert agent.db == windows.db and facts["daemon"]["shared"] is True


async def test_a_native_turn_reaches_the_acp_client_as_session_updates(
    spawn_acp: AgentFactory,
    windows: Windows,
    model: ModelServer,
    workspace: Path,
) -> None:
    agent = await spawn_acp(db=windows.db)
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    sid = new.session_id
    a, _ = await windows.open()
    await a.call("session/reopen", {"sessionId": sid})
    model.reply("listing", tool_calls=[{"name": "list_dir", "arguments": {"path": "."}}])
    model.reply("one file here")

    result = await turn(a, {"sessionId": sid}, "what is here?")

    assert result["outcome"] == "finished"
    await agent.wait_for(
        lambda: agent.editor.text(sid) == "listingone file here", "the native turn's text"
    )
    [call] = agent.editor.of_kind("tool_call", sid)
    assert call.kind == "read"
    await agent.wait_for(
        lambda: (
            [u.status for u in agent.editor.of_kind("tool_call_update", sid)][-1:] == ["completed"]
        ),
        "the native turn's call completes over ACP",
    )
    await agent.wait_for(lambda: agent.editor.of_kind("usage_update", sid), "its usage")


async def test_an_approval_answered_over_acp_closes_the_native_question(
    spawn_acp: AgentFactory,
    windows: Windows,
    model: ModelServer,
    workspace: Path,
) -> None:
    a, _ = await windows.open()
    asked_a: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def a_never_answers(ls: Any, params: dict[str, Any]) -> dict[str, str]:
        asked_a.set_result(params)
        await asyncio.Event().wait()
        return {"decision": "deny"}

    a.client.feature("session/requestApproval")(a_never_answers)
    session = await open_session(a, workspace, policy={"approval": "ask"})
    sid = session["sessionId"]
    agent = await spawn_acp(db=windows.db)
    await agent.conn.resume_session(cwd=str(workspace), session_id=sid)
    model.reply("", tool_calls=WRITE)
    model.reply("Written.")

    running = asyncio.ensure_future(turn(a, session, "write it"))
    await agent.wait_for(lambda: agent.editor.asked, "the ACP client is asked")
    await asyncio.wait_for(asked_a, SAFETY_NET)  # and so is the native window
    agent.editor.answers.put_nowait("allow")
    result = await running

    assert result["outcome"] == "finished"
    assert (workspace / "both.txt").read_text() == "x"
    withdrawn = [m for m in a.protocol.received if m.get("method") == types.CANCEL_REQUEST]
    assert len(withdrawn) == 1
    [asked] = agent.editor.asked
    assert asked.session_id == sid and asked.tool_call.kind == "edit"


async def test_an_approval_answered_natively_is_withdrawn_over_acp(
    spawn_acp: AgentFactory,
    windows: Windows,
    model: ModelServer,
    workspace: Path,
) -> None:
    agent = await spawn_acp(db=windows.db)
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    sid = new.session_id
    a, _ = await windows.open()
    asked_acp = asyncio.Event()

    async def a_allows(ls: Any, params: dict[str, Any]) -> dict[str, str]:
        await agent.wait_for(lambda: agent.editor.asked, "the ACP client is asked first")
        asked_acp.set()
        return {"decision": "allow"}

    a.client.feature("session/requestApproval")(a_allows)
    await a.call("session/reopen", {"sessionId": sid})
    model.reply("", tool_calls=WRITE)
    model.reply("Written.")

    answer = await agent.conn.prompt(session_id=sid, prompt=[text_block("write it")])

    assert answer.stop_reason == "end_turn" and asked_acp.is_set()
    assert (workspace / "both.txt").read_text() == "x"
    [request] = [m for m in agent.sent if m.get("method") == "session/request_permission"]
    await agent.wait_for(
        lambda: [m for m in agent.sent if m.get("method") == "$/cancel_request"],
        "the ACP question is withdrawn",
    )
    [withdrawn] = [m for m in agent.sent if m.get("method") == "$/cancel_request"]
    assert withdrawn["params"] == {"requestId": request["id"]}


async def test_a_prompt_over_acp_steers_a_turn_a_native_window_started(
    spawn_acp: AgentFactory,
    windows: Windows,
    model: ModelServer,
    workspace: Path,
) -> None:
    a, _ = await windows.open(TRELLISD_LOG="info")  # the daemon it starts logs the steer
    session = await open_session(a, workspace)
    sid = session["sessionId"]
    agent = await spawn_acp(db=windows.db)
    await agent.conn.resume_session(cwd=str(workspace), session_id=sid)
    held = held_after(model, 5)
    model.reply("Steered onto the new course.")
    running = asyncio.ensure_future(turn(a, session, "a long story"))
    await tokens(a, 5)

    prompt = asyncio.ensure_future(
        agent.conn.prompt(session_id=sid, prompt=[text_block("change course")])
    )
    await agent.wait_for(lambda: any("as a steer" in line for line in agent.log), "steer queued")
    held.release()
    result = await running
    answer = await prompt

    assert answer.stop_reason == "end_turn"
    assert result["outcome"] == "finished"
    assert result["reply"] == "Steered onto the new course."
    assert [s["text"] for s in followed(a, "session/steered")] == ["change course"]
    await agent.wait_for(
        lambda: agent.editor.text(sid) == LONG + "Steered onto the new course.",
        "the ACP client drew the whole turn",
    )


async def test_a_mode_changed_anywhere_reaches_every_window_following_the_session(
    spawn_acp: AgentFactory,
    windows: Windows,
    workspace: Path,
) -> None:
    a, _ = await windows.open()
    b, _ = await windows.open()
    session = await open_session(a, workspace)
    sid = session["sessionId"]
    await b.call("session/reopen", {"sessionId": sid})
    agent = await spawn_acp(db=windows.db)
    await agent.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])

    await a.call("session/mode", {"sessionId": sid, "approval": "plan"})
    told = {"sessionId": sid, "approval": "plan"}
    await eventually(lambda: followed(b, "session/modeChanged"), "B hears the mode change")
    assert followed(b, "session/modeChanged") == followed(a, "session/modeChanged") == [told]

    def modes() -> list[str]:
        return [u.current_mode_id for u in agent.editor.of_kind("current_mode_update")]

    await agent.wait_for(lambda: modes() == ["plan"], "the ACP client hears it too")

    await agent.conn.set_session_mode(session_id=sid, mode_id="read-only")
    await eventually(lambda: len(followed(b, "session/modeChanged")) == 2, "B hears it")
    assert followed(b, "session/modeChanged")[-1] == {"sessionId": sid, "approval": "never"}
    await b.call("session/mode", {"sessionId": sid, "approval": "ask"})
    await agent.wait_for(lambda: modes()[-1:] == ["ask"], "the ACP client hears B's change")
    assert modes() == ["plan", "read-only", "ask"]  # its own change told once, in order
    a.check_sent()
    b.check_sent()
