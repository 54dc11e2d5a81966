"""The session log over real pipes: a turn's result and the session name the same head hash,
``session/verify`` checks the whole log, and each kind of hand edit to the SQLite file is
found by it and by the cheap check of ``session/reopen``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from tests.fixtures.driver import Daemon, DaemonFactory
from tests.fixtures.model_server import ModelServer


async def two_turns(daemon: Daemon, model: ModelServer, workspace: Path) -> dict[str, Any]:
    """A session with a tool turn (read README.md, then reply) and a plain one."""
    session = await daemon.call("session/open", {"root": str(workspace)})
    model.reply(
        "Let me look.", tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}]
    )
    model.reply("A demo project.", usage={"prompt_tokens": 50, "completion_tokens": 3})
    first = await daemon.call(
        "session/turn", {"sessionId": session["sessionId"], "prompt": "what is this?"}
    )
    second = await daemon.call(
        "session/turn", {"sessionId": session["sessionId"], "prompt": "anything else?"}
    )
    return {"session": session, "first": first, "second": second}


def edit(db: Path, sql: str, *args: object) -> None:
    """Change the store by hand, as someone with sqlite3 would (no foreign keys)."""
    con = apsw.Connection(str(db))
    con.pragma("foreign_keys", False)
    con.execute(sql, args)
    con.close()


async def test_a_turn_and_its_session_name_the_same_head_hash_and_it_verifies(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    made = await two_turns(daemon, model, workspace)
    session_id = made["session"]["sessionId"]
    assert len(made["session"]["headHash"]) == 64
    assert made["first"]["headHash"] != made["second"]["headHash"]

    verdict = await daemon.call("session/verify", {"sessionId": session_id})
    reopened = await daemon.call("session/reopen", {"sessionId": session_id})

    assert verdict["ok"] is True and "firstBad" not in verdict
    assert verdict["verified"] is True and verdict["anchored"] is True and "check" not in verdict
    assert verdict["headHash"] == made["second"]["headHash"] == reopened["headHash"]
    assert reopened["integrity"] == "ok"
    # session, title, turn, run, model event, 2 steps, end; turn, run, model event, step, end
    assert verdict["entries"] == 8 + 5


HAND_EDITS = {
    "edit": ("UPDATE step SET text = 'Nothing to see.' WHERE run_id = ? AND n = 2", "step", 2),
    "delete": ("DELETE FROM step WHERE run_id = ? AND n = 2", "step", 2),
    "swap": (
        "UPDATE step SET text = CASE n WHEN 1 THEN 'A demo project.' ELSE 'Let me look.' END"
        " WHERE run_id = ?1",
        "step",
        1,
    ),
    "tokens": ("UPDATE step SET output_tokens = 0 WHERE run_id = ? AND n = 2", "step", 2),
}


@pytest.mark.parametrize("kind", list(HAND_EDITS))
async def test_each_kind_of_hand_edit_is_found(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, kind: str
) -> None:
    daemon = await spawn()
    made = await two_turns(daemon, model, workspace)
    session_id, run_id = made["session"]["sessionId"], made["first"]["runId"]
    sql, bad_kind, step = HAND_EDITS[kind]

    edit(daemon.db, sql, run_id)
    verdict = await daemon.call("session/verify", {"sessionId": session_id})
    other = await spawn(db=daemon.db)
    reopened = await other.call("session/reopen", {"sessionId": session_id})

    assert verdict["ok"] is False
    assert verdict["firstBad"]["kind"] == bad_kind
    assert verdict["firstBad"]["id"] == f"{run_id}/{step}"
    assert verdict["firstBad"]["seq"] == 5 + step  # session, title, turn, run, model event
    assert verdict["reason"]
    assert reopened["integrity"] == "broken"


async def test_a_row_inserted_by_hand_is_found(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    made = await two_turns(daemon, model, workspace)
    session_id = made["session"]["sessionId"]
    edit(
        daemon.db,
        "INSERT INTO event(run_id, seq, kind, step, detail, created_at)"
        " VALUES (?, 9, 'steered', 1, '{\"text\": \"do it\"}', '2026-01-01')",
        made["second"]["runId"],
    )
    verdict = await daemon.call("session/verify", {"sessionId": session_id})
    reopened = await daemon.call("session/reopen", {"sessionId": session_id})
    assert verdict["ok"] is False
    assert verdict["firstBad"] == {
        "seq": None,
        "kind": "event",
        "id": f"{made['second']['runId']}/9",
    }
    assert reopened["integrity"] == "broken"


async def test_verify_answers_unknown_sessions_with_not_found(daemon: Daemon) -> None:
    error = await daemon.error("session/verify", {"sessionId": "s-nope"})
    assert error.code == -32010
