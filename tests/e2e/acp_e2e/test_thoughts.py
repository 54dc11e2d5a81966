"""The Python ACP SDK drives ``trellisd acp`` with a model that reasons (the scripted one):
what it reasons arrives as ``agent_thought_chunk`` updates ahead of its reply, live and when
the session is loaded after a restart; the ``effort`` config option is offered and set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from acp import RequestError, text_block

from tests.e2e.acp_e2e.conftest import AgentFactory

THOUGHT = "The user says hi. A short greeting will do."


def reasoning(tmp_path: Path) -> dict[str, str]:
    script = tmp_path / "script.jsonl"
    script.write_text(json.dumps({"thought": THOUGHT, "text": "Hi!"}) + "\n", encoding="utf-8")
    return {"TRELLISD_PROVIDER": "scripted", "TRELLISD_SCRIPT": str(script)}


async def test_thoughts_come_as_thought_chunks_live_and_on_load(
    spawn_acp: AgentFactory, workspace: Path, tmp_path: Path
) -> None:
    env = reasoning(tmp_path)
    agent = await spawn_acp(**env)
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])

    answer = await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("hi")])

    assert answer.stop_reason == "end_turn"
    assert agent.editor.text(new.session_id, "agent_thought_chunk") == THOUGHT
    assert agent.editor.text(new.session_id) == "Hi!"
    kinds = [u.session_update for _, u in agent.editor.updates]
    said = [k for k in kinds if k in ("agent_thought_chunk", "agent_message_chunk")]
    assert said[-1] == "agent_message_chunk" and "agent_message_chunk" not in said[:-1]
    await agent.stop()

    again = await spawn_acp(db=agent.db, **env)
    await again.conn.load_session(cwd=str(workspace), session_id=new.session_id, mcp_servers=[])
    replayed = [
        (u.session_update, u.content.text)
        for _, u in again.editor.updates
        if u.session_update in ("agent_thought_chunk", "agent_message_chunk")
    ]
    assert replayed == [("agent_thought_chunk", THOUGHT), ("agent_message_chunk", "Hi!")]


async def test_the_effort_option_is_offered_and_set(
    spawn_acp: AgentFactory, workspace: Path, tmp_path: Path
) -> None:
    agent = await spawn_acp(**reasoning(tmp_path))
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    effort = next(o for o in new.config_options or [] if o.id == "effort")
    assert effort.current_value == "default" and effort.category == "thought_level"

    changed = await agent.conn.set_config_option(
        config_id="effort", session_id=new.session_id, value="high"
    )
    answer = await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("think")])

    shown = {o.id: o.current_value for o in changed.config_options}
    assert shown["effort"] == "high" and answer.stop_reason == "end_turn"
    with pytest.raises(RequestError):
        await agent.conn.set_config_option(
            config_id="effort", session_id=new.session_id, value="extreme"
        )
