"""Sessions across processes: a new process reopens a session by id, and a store written
by a newer trellisd is refused untouched."""

from __future__ import annotations

from pathlib import Path

import apsw

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.driver import open_session, turn
from tests.fixtures.model_server import ModelServer


async def test_a_new_process_reopens_the_session_by_id(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    first_daemon = await spawn()
    session = await open_session(first_daemon, workspace)
    await turn(first_daemon, session, "remember the number 42")
    await turn(first_daemon, session, "and the colour blue")
    await first_daemon.client.shutdown_session()

    second_daemon = await spawn()
    reopened = await second_daemon.call("session/reopen", {"sessionId": session["sessionId"]})
    assert [t["prompt"] for t in reopened["history"]] == [
        "remember the number 42",
        "and the colour blue",
    ]
    assert reopened["title"] == "remember the number 42"
    await turn(second_daemon, reopened, "what did I say?")
    assert model.user_messages() == [
        "remember the number 42",
        "and the colour blue",
        "what did I say?",
    ]

    # Another session over the same folder starts empty.
    fresh = await open_session(second_daemon, workspace)
    await turn(second_daemon, fresh, "hello")
    assert model.user_messages() == ["hello"]


async def test_a_store_from_a_newer_trellisd_is_refused_untouched(
    spawn: DaemonFactory, tmp_path: Path
) -> None:
    db = tmp_path / "newer.db"
    con = apsw.Connection(str(db))
    con.pragma("user_version", 99)
    con.close()
    before = db.read_bytes()
    daemon = await spawn(db=db)
    error = await daemon.error("session/list", {})
    assert error.code == -32040 and "newer trellisd" in error.message
    await daemon.client.shutdown_session()
    assert db.read_bytes() == before
