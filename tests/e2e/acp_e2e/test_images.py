"""Images over ACP, through the Python ACP SDK against ``trellisd acp``: the agent says it
takes them, a prompt's image blocks become the turn's images, and loading the session replays
them as image blocks of its user message."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from acp import RequestError, image_block, text_block

from tests.e2e.acp_e2e.conftest import AgentFactory
from tests.fixtures.model_server import ModelServer

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


async def test_an_image_block_is_the_turns_image_and_a_load_replays_it(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp(initialize=False)
    caps = (await agent.initialize()).agent_capabilities
    assert caps is not None and caps.prompt_capabilities is not None
    assert caps.prompt_capabilities.image
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    data = base64.b64encode(PNG).decode()
    model.reply("a picture of bytes")

    answer = await agent.conn.prompt(
        session_id=new.session_id,
        prompt=[text_block("what is this?"), image_block(data, "image/png")],
    )

    assert answer.stop_reason == "end_turn"
    await agent.stop()
    again = await spawn_acp(db=agent.db)
    await again.conn.load_session(cwd=str(workspace), session_id=new.session_id, mcp_servers=[])
    shown = [u.content for u in again.editor.of_kind("user_message_chunk", new.session_id)]
    assert [c.type for c in shown] == ["text", "image"]
    assert shown[0].text == "what is this?"
    assert (base64.b64decode(shown[1].data), shown[1].mime_type) == (PNG, "image/png")


async def test_an_image_block_that_is_no_image_is_refused_naming_it(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    words = base64.b64encode(b"plain words, not a picture").decode()

    with pytest.raises(RequestError) as refused:
        await agent.conn.prompt(
            session_id=new.session_id,
            prompt=[text_block("look"), image_block(words, "image/png")],
        )

    assert "images[0]: the bytes are not a PNG, JPEG, GIF or WebP image" in str(refused.value)
    assert model.requests == []
