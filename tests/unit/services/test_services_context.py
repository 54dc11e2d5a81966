"""What a turn sends the model of the earlier turns, against a real model server on 127.0.0.1
speaking each wire: the earlier turns as they happened (tool calls and results), the pinned
turns kept verbatim after a compaction, the prompt-cache breakpoints."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.fake_services import Editor
from tests.fixtures.provider_servers import Response, ScriptServer, anthropic_reply, openai_reply
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.records import ProviderChoice
from trellisd.services import Services

NOTES = "The launch code is 4242.\n"
READ = {"id": "call_notes", "name": "read_file", "arguments": {"path": "notes.md"}}
MODELS = {"openai": "gpt-4o-mini", "anthropic": "claude-sonnet-4-5"}
Reply = Callable[..., list[bytes]]
EPHEMERAL = {"type": "ephemeral"}


def replies(wire: str) -> Reply:
    return openai_reply if wire == "openai" else anthropic_reply


def uncached(value: Any) -> Any:
    """``value`` without its prompt-cache marks (which move as the conversation grows)."""
    if isinstance(value, dict):
        return {k: uncached(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [uncached(v) for v in value]
    return value


async def start(tmp_path: Path, server: ScriptServer, wire: str, editor: Editor) -> Services:
    settings = ProviderSettings(
        name=wire,
        model=MODELS[wire],
        base_url=server.url,
        api_key="test-key",
        context_window=100_000,
    )
    return await services.start(tmp_path / "store.db", settings, editor)


def queue(server: ScriptServer, wire: str, *answers: tuple[Iterable[str], list[Any]]) -> None:
    reply = replies(wire)
    server.queue(*(Response(chunks=reply(list(text), tool_calls=calls)) for text, calls in answers))


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_the_next_turn_carries_what_the_earlier_turn_read(
    tmp_path: Path, root: Path, editor: Editor, wire: str
) -> None:
    """Turn 1 reads notes.md; turn 2's request holds that tool call and the file's content
    as its result, in the wire's own form, and starts with what turn 1 last sent."""
    (root / "notes.md").write_text(NOTES)
    with ScriptServer() as server:
        queue(
            server,
            wire,
            (["Let me look. "], [READ]),
            (["It is a notes file."], []),
            (["It said the launch code is 4242."], []),
        )
        app = await start(tmp_path, server, wire, editor)
        try:
            sid = (await app.sessions.open(str(root), None, None, None)).session_id
            first = await app.turns.turn(sid, "what is notes.md?", ProviderChoice())
            await app.turns.turn(sid, "what exactly did the file say?", ProviderChoice())
        finally:
            await app.close()

    assert first.reply == "It is a notes file."
    assert len(server.requests) == 3
    last_of_first, second = server.requests[1].body, server.requests[2].body
    messages = second["messages"]
    if wire == "openai":
        assert [m["role"] for m in messages] == [
            "system",
            "user",
            "assistant",
            "tool",
            "assistant",
            "user",
        ]
        [call] = messages[2]["tool_calls"]
        assert (call["id"], call["function"]["name"]) == ("call_notes", "read_file")
        assert messages[2]["content"] == "Let me look. "
        assert messages[3]["tool_call_id"] == "call_notes"
        assert NOTES.strip() in messages[3]["content"]
        assert messages[4]["content"] == "It is a notes file."
    else:
        assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant", "user"]
        said, used = messages[1]["content"]
        assert said["text"] == "Let me look. "
        assert (used["type"], used["id"], used["name"]) == ("tool_use", "call_notes", "read_file")
        assert used["input"] == {"path": "notes.md"}
        [result] = messages[2]["content"]
        assert (result["type"], result["tool_use_id"]) == ("tool_result", "call_notes")
        assert NOTES.strip() in result["content"]
        assert messages[3]["content"][0]["text"] == "It is a notes file."
        # Turn 1's last call marked all it sent, the file's content last, for the cache.
        assert last_of_first["messages"][-1]["content"][-1]["cache_control"] == EPHEMERAL
    # What turn 1 last sent is the unchanged start of turn 2's request: the cache's prefix.
    sent_before = uncached(last_of_first["messages"])
    assert uncached(messages[: len(sent_before)]) == sent_before
