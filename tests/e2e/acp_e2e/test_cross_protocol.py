"""One store, two protocols: a session made over ACP reopens over the native protocol with
the same turns, and a native session loads over ACP with its history replayed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp import RequestError, text_block

from tests.e2e.acp_e2e.conftest import AgentFactory
from tests.e2e.conftest import DaemonFactory
from tests.fixtures.driver import OPEN, killed_turn
from tests.fixtures.model_server import ModelServer


async def test_an_acp_session_reopens_natively_with_its_turns(
    spawn_acp: AgentFactory,
    spawn: DaemonFactory,
    model: ModelServer,
    workspace: Path,
    acp_mode: dict[str, str],
    tmp_path: Path,
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    model.reply("the answer over ACP")
    await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("asked over ACP")])
    model.reply("read it", tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}])
    model.reply("it is a demo")
    await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("what is README.md?")])
    await agent.conn.set_session_mode(session_id=new.session_id, mode_id="read-only")
    await agent.stop()

    native = await spawn(db=agent.db, env=acp_mode)  # the shared daemon's window, when shared
    reopened = await native.call("session/reopen", {"sessionId": new.session_id})
    turns = reopened["history"]
    assert [(t["prompt"], t["reply"], t["outcome"]) for t in turns] == [
        ("asked over ACP", "the answer over ACP", "finished"),
        ("what is README.md?", "it is a demo", "finished"),
    ]
    steps = await native.call("run/steps", {"runId": turns[1]["runId"]})
    assert [s["decision"] for s in steps["steps"]] == ["tool", "reply"]
    model.reply("the answer natively")
    result = await native.call(
        "session/turn", {"sessionId": new.session_id, "prompt": "and natively?"}
    )
    assert result["outcome"] == "finished"

    path = tmp_path / "moved.trellisd"
    await native.call("session/export", {"sessionId": new.session_id, "path": str(path)})
    records = [json.loads(line) for line in path.read_bytes().splitlines()]
    assert records[0]["version"] == 3
    assert [r for r in records if r["type"] == "acpChoice"] == [
        {"type": "acpChoice", "mode": "read-only", "model": None}
    ]
    moved = await native.call("session/import", {"path": str(path), "asNew": True})
    assert moved["sessionId"] != new.session_id
    again = await spawn_acp(db=agent.db)
    loaded = await again.conn.load_session(
        cwd=str(workspace), session_id=moved["sessionId"], mcp_servers=[]
    )
    assert loaded.modes is not None and loaded.modes.current_mode_id == "read-only"


async def test_a_native_session_loads_over_acp_with_its_history(
    spawn_acp: AgentFactory,
    spawn: DaemonFactory,
    model: ModelServer,
    workspace: Path,
    acp_mode: dict[str, str],
) -> None:
    native = await spawn(env=acp_mode)
    session = await native.call("session/open", {"root": str(workspace)})
    model.reply("listing", tool_calls=[{"name": "list_dir", "arguments": {"path": "."}}])
    model.reply("one file")
    await native.call(
        "session/turn", {"sessionId": session["sessionId"], "prompt": "what is here?"}
    )

    agent = await spawn_acp(db=native.db)
    listed = await agent.conn.list_sessions(cwd=str(workspace))
    assert [s.session_id for s in listed.sessions] == [session["sessionId"]]
    await agent.conn.load_session(
        cwd=str(workspace), session_id=session["sessionId"], mcp_servers=[]
    )
    sid = session["sessionId"]
    assert agent.editor.text(sid, "user_message_chunk") == "what is here?"
    assert agent.editor.text(sid) == "listingone file"
    [call] = agent.editor.of_kind("tool_call", sid)
    assert call.kind == "read" and call.status == "completed"
    assert "README.md" in call.content[0].content.text
    kinds = [u.session_update for s, u in agent.editor.updates if s == sid]
    assert kinds == [
        "user_message_chunk",
        "agent_message_chunk",
        "tool_call",
        "agent_message_chunk",
        "session_info_update",
        "usage_update",
    ]


async def test_a_session_waiting_for_a_decision_refuses_an_acp_prompt_saying_what_to_do(
    spawn_acp: AgentFactory,
    spawn: DaemonFactory,
    model: ModelServer,
    workspace: Path,
    acp_mode: dict[str, str],
) -> None:
    native = await spawn(env=acp_mode)
    session = await native.call("session/open", {"root": str(workspace), "policy": OPEN})
    killed = await killed_turn(native, model, session)
    assert killed["recovery"]["required"] is True

    agent = await spawn_acp(db=native.db)
    sid = session["sessionId"]
    await agent.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
    with pytest.raises(RequestError) as refused:
        await agent.conn.prompt(session_id=sid, prompt=[text_block("carry on")])
    assert refused.value.code == -32020
    assert "killed mid-run" in str(refused.value) and "session/recover" in str(refused.value)
    assert "trellisd editor" in str(refused.value)
    assert refused.value.data["recovery"]["turnId"] == killed["turnId"]

    await native.call("session/recover", {"sessionId": sid, "decision": "keep"})
    await native.client.shutdown_session()  # the session's writer goes: ACP may write it
    model.reply("carrying on")
    answered = await agent.conn.prompt(session_id=sid, prompt=[text_block("carry on")])
    assert answered.stop_reason == "end_turn"
