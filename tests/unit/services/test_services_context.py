"""What a turn sends the model of the earlier turns, against a real model server on 127.0.0.1
speaking each wire: the earlier turns as they happened (tool calls and results), the pinned
turns kept verbatim after a compaction, the prompt-cache breakpoints."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import apsw
import pytest

from tests.fixtures.fake_services import Editor, Model
from tests.fixtures.provider_servers import Response, ScriptServer, anthropic_reply, openai_reply
from trellisd import services
from trellisd.config import ProviderSettings
from trellisd.errors import InvalidParams, NotFound
from trellisd.services import Services
from trellisd.services.turns import TurnRequest

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


async def start(
    tmp_path: Path, server: ScriptServer, wire: str, editor: Editor, window: int = 100_000
) -> Services:
    settings = ProviderSettings(
        name=wire,
        model=MODELS[wire],
        base_url=server.url,
        api_key="test-key",
        context_window=window,
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
            first = await app.turns.turn(TurnRequest(sid, "what is notes.md?"))
            await app.turns.turn(TurnRequest(sid, "what exactly did the file say?"))
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


async def test_pins_are_listed_in_path_order_logged_and_checked(
    app: Services, model: Model, root: Path, tmp_path: Path
) -> None:
    sid = (await app.sessions.open(str(root), None, None, None)).session_id
    one = await app.turns.turn(TurnRequest(sid, "one"))
    two = await app.turns.turn(TurnRequest(sid, "two"))
    before = await app.sessions.verify(sid)

    assert (await app.store.sessions.get(sid)).pinned == ()
    await app.sessions.pin(sid, two.turn_id)
    pinned = await app.sessions.pin(sid, one.turn_id)
    again = await app.sessions.pin(sid, one.turn_id)  # already pinned: nothing changes
    assert pinned.pinned == again.pinned == (one.turn_id, two.turn_id)
    assert pinned.head_hash == again.head_hash
    unpinned = await app.sessions.unpin(sid, two.turn_id)
    assert unpinned.pinned == (one.turn_id,)
    assert (await app.store.sessions.get(sid)).pinned == (one.turn_id,)
    verdict = await app.sessions.verify(sid)
    assert verdict.ok and verdict.entries == before.entries + 3  # pin, pin, unpin
    assert verdict.head_hash == unpinned.head_hash

    other = (await app.sessions.open(str(root), None, None, None)).session_id
    with pytest.raises(InvalidParams, match="belongs to another session"):
        await app.sessions.pin(other, one.turn_id)
    with pytest.raises(NotFound, match="unknown turn"):
        await app.sessions.unpin(sid, "t-nope")
    assert (await app.store.sessions.get(other)).pinned == ()

    # A pin removed by hand no longer matches the log.
    con = apsw.Connection(str(tmp_path / "store.db"))
    con.execute("DELETE FROM pin WHERE turn_id = ?", (one.turn_id,))
    con.close()
    broken = await app.sessions.verify(sid)
    assert not broken.ok and broken.first_bad is not None
    assert (broken.first_bad.kind, broken.first_bad.id) == ("pin", one.turn_id)


async def test_a_pinned_turn_survives_a_compaction_verbatim_and_holds_the_cache_breakpoint(
    tmp_path: Path, root: Path, editor: Editor
) -> None:
    """Over the Anthropic wire: turn 1 reads notes.md and is pinned; turn 2 is long, so turn
    5 compacts turns 1 and 2. Turn 5's request sends the summary, then turn 1 as it happened
    (the tool call and the file's content), with a cache breakpoint after it, then turns 3
    and 4; what the model was asked to summarize holds turn 2, not turn 1."""
    (root / "notes.md").write_text(NOTES)
    long = " ".join(["filler"] * 1200)
    with ScriptServer() as server:
        queue(
            server,
            "anthropic",
            (["Let me look. "], [READ]),
            (["A notes file."], []),
            ([long], []),
            (["Three."], []),
            (["Four."], []),
            (["SUMMARY"], []),
            (["Still 4242."], []),
        )
        app = await start(tmp_path, server, "anthropic", editor, window=3000)
        try:
            sid = (await app.sessions.open(str(root), None, None, None)).session_id
            first = await app.turns.turn(TurnRequest(sid, "what is notes.md?"))
            await app.sessions.pin(sid, first.turn_id)
            for prompt in ("tell a long story", "three", "four"):
                await app.turns.turn(TurnRequest(sid, prompt))
            last = await app.turns.turn(TurnRequest(sid, "what was the code?"))
            steps = await app.runs.steps(last.run_id)
        finally:
            await app.close()

    [compaction] = [s for s in steps if s.decision == "compaction"]
    assert "tell a long story" in (compaction.prompt or "")
    assert "what is notes.md?" not in (compaction.prompt or "") and "4242" not in str(compaction)
    sent = server.requests[-1].body["messages"]
    opening = sent[0]["content"]
    assert opening[0]["text"].startswith("Summary of the earlier part")
    assert opening[0]["text"].endswith("SUMMARY")
    assert opening[1]["text"] == "what is notes.md?"  # the pinned turn, verbatim
    said, used = sent[1]["content"]
    assert said["text"] == "Let me look. "
    assert (used["id"], used["input"]) == ("call_notes", READ["arguments"])
    result = sent[2]["content"][0]
    assert result["tool_use_id"] == "call_notes" and NOTES.strip() in result["content"]
    assert sent[3]["content"] == [
        {"type": "text", "text": "A notes file.", "cache_control": EPHEMERAL}  # the last pin
    ]
    assert "tell a long story" not in str(sent)  # turn 2 is in the summary only
    assert [b["text"] for m in sent[4:] for b in m["content"]] == [
        "three",
        "Three.",
        "four",
        "Four.",
        "what was the code?",
    ]
