"""A store written by a newer trellisd, opened by this daemon over real pipes: within the
store's compatibility level every read is served and every write is refused, naming the
version that wrote the store; outside it the store is refused and left untouched."""

from __future__ import annotations

import hashlib
from pathlib import Path

import apsw
import pytest

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.newer_store import written_by_newer
from trellisd.store import migrations


async def test_a_newer_store_within_the_level_is_read_and_not_written(
    spawn: DaemonFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "store" / "trellisd.db"
    session_id = written_by_newer(db, monkeypatch, None)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    daemon = await spawn(db=db)

    listed = await daemon.call("session/list", {})
    reopened = await daemon.call("session/reopen", {"sessionId": session_id})
    verdict = await daemon.call("session/verify", {"sessionId": session_id})
    turn = await daemon.error("session/turn", {"sessionId": session_id, "prompt": "more"})
    branch = await daemon.error("session/branch", {"sessionId": session_id, "turnId": None})

    assert [s["title"] for s in listed["sessions"]] == ["kept"]
    assert [t["reply"] for t in reopened["history"]] == ["Hi."]
    assert reopened["integrity"] == "ok" and verdict["ok"] is True
    for error in (turn, branch):
        assert error.code == -32040
        assert "written by trellisd 9.0.0" in error.message
        assert error.data["writtenBy"] == "9.0.0" and error.data["readOnly"] is True
    await daemon.client.shutdown_session()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


async def test_a_newer_store_outside_the_level_is_refused_untouched(
    spawn: DaemonFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "store" / "trellisd.db"
    written_by_newer(db, monkeypatch, len(migrations.MIGRATIONS) + 1)
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    daemon = await spawn(db=db)
    error = await daemon.error("session/list", {})
    assert error.code == -32040 and "newer trellisd" in error.message
    await daemon.client.shutdown_session()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before


async def test_a_newer_store_is_left_byte_for_byte_as_it_was(
    spawn: DaemonFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A newer trellisd that keeps no query statistics: serving its store adds none."""
    db = tmp_path / "store" / "trellisd.db"
    session_id = written_by_newer(db, monkeypatch, None)
    con = apsw.Connection(str(db))
    con.execute("DROP TABLE IF EXISTS sqlite_stat1; DROP TABLE IF EXISTS sqlite_stat4")
    con.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    daemon = await spawn(db=db)

    await daemon.call("session/list", {})
    await daemon.call("session/history", {"sessionId": session_id})
    await daemon.call("session/list", {"query": "hello"})
    await daemon.client.shutdown_session()

    assert hashlib.sha256(db.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in db.parent.iterdir()) == ["trellisd.db"]
