"""An ACP client that loads a session while a turn another window started is reasoning on the
shared daemon: it gets the step's thought so far as an ``agent_thought_chunk``, then the rest
of the turn live, nothing missing and nothing twice."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.e2e.acp_e2e.conftest import NATIVE_WINDOWS, AgentFactory
from tests.e2e.conftest import Windows
from tests.fixtures.driver import open_session, turn
from tests.fixtures.waits import eventually

pytestmark = pytest.mark.parametrize("acp_mode", [NATIVE_WINDOWS], indirect=True)

THOUGHT = "Weigh the two options first."


async def test_a_client_that_loads_mid_thought_draws_the_thought_once(
    spawn_acp: AgentFactory, windows: Windows, workspace: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    script = tmp_path / "script.jsonl"
    line = {"thought": THOUGHT, "text": "Done now.", "holdAfter": 0, "holdFile": str(go)}
    script.write_text(json.dumps(line) + "\n", encoding="utf-8")
    a, _ = await windows.open(TRELLISD_PROVIDER="scripted", TRELLISD_SCRIPT=str(script))
    session = await open_session(a, workspace)
    sid = session["sessionId"]
    running = asyncio.ensure_future(turn(a, session, "choose"))
    await eventually(
        lambda: "".join(t["text"] for t in a.thoughts) == THOUGHT, "the whole thought is told"
    )

    loading = await spawn_acp(db=windows.db)
    await loading.conn.load_session(cwd=str(workspace), session_id=sid, mcp_servers=[])
    await loading.wait_for(
        lambda: loading.editor.text(sid, "agent_thought_chunk") == THOUGHT, "the thought so far"
    )
    go.touch()
    await running
    await loading.wait_for(lambda: loading.editor.text(sid) == "Done now.", "the reply, live")

    assert loading.editor.text(sid, "agent_thought_chunk") == THOUGHT
    assert loading.editor.text(sid, "user_message_chunk") == "choose"
