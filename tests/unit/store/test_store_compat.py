"""A store a newer trellisd wrote: within its compatibility level it is read and not written,
the refusal naming the version that wrote it; outside it, it is refused and left untouched.
The newer trellisd is this one with a migration that exists only here."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from pathlib import Path

import apsw
import pytest

from tests.fixtures.newer_store import written_by_newer
from trellisd import __version__
from trellisd.build import build
from trellisd.errors import StoreError
from trellisd.store import Store, migrations


def test_an_older_trellisd_within_the_level_reads_and_refuses_writes(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session_id = written_by_newer(db_path, monkeypatch, None)
    store = Store(db_path, lambda pid: True)
    try:
        store.leases.register()
        assert [t.reply for t in store.sessions.history(session_id)] == ["Hi."]
        assert store.sessions.reopen(session_id, store.leases, None)[3] == "ok"
        assert store.sessions.verify(session_id).ok
        with pytest.raises(StoreError) as refused:
            store.runs.begin(session_id, "more")
    finally:
        store.close()
    assert "written by trellisd 9.0.0" in refused.value.message
    assert refused.value.data["writtenBy"] == "9.0.0"
    assert refused.value.data["schemaVersion"] == len(migrations.MIGRATIONS) + 1


def test_an_older_trellisd_outside_the_level_refuses_the_store_untouched(
    db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    written_by_newer(db_path, monkeypatch, len(migrations.MIGRATIONS) + 1)
    before = hashlib.sha256(db_path.read_bytes()).hexdigest()
    with pytest.raises(StoreError) as refused:
        Store(db_path, lambda pid: True)
    assert "newer trellisd" in refused.value.message
    assert hashlib.sha256(db_path.read_bytes()).hexdigest() == before


def test_the_store_names_the_build_that_wrote_it_last_and_the_level_it_needs(
    db_path: Path,
) -> None:
    """A store another build of this schema wrote (or recorded a level for) names this
    build, and this build's level, once this build has opened it."""
    Store(db_path, lambda pid: True).close()
    con = apsw.Connection(str(db_path))
    con.execute(
        "UPDATE store_info SET value = CASE key WHEN 'written_by' THEN '0.1.0+000000000000'"
        " ELSE ? END",
        (str(len(migrations.MIGRATIONS)),),
    )
    con.close()
    Store(db_path, lambda pid: True).close()
    con = apsw.Connection(str(db_path))
    info = dict(con.execute("SELECT key, value FROM store_info"))
    con.close()
    assert info == {"written_by": build(), "readable_from": str(migrations.OLDEST_READER)}
    assert build().startswith(f"{__version__}+") and build() != __version__


def _statements(sql: str) -> list[str]:
    statements, pending = [], ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(" ".join(pending.split()))
            pending = ""
    assert not pending.strip(), pending
    return statements


def test_every_step_after_the_oldest_reader_only_adds() -> None:
    """What keeps older builds reading: a step after ``OLDEST_READER`` only adds tables,
    indexes, triggers and columns (and fills tables it made); any other step raises the level
    to its own number."""
    additive = re.compile(
        r"^(CREATE (TABLE|INDEX|UNIQUE INDEX|VIRTUAL TABLE|TRIGGER|VIEW) |"
        r"ALTER TABLE \w+ ADD COLUMN |INSERT INTO (\w+))",
        re.IGNORECASE,
    )
    for number, step in enumerate(migrations.MIGRATIONS, 1):
        if number <= migrations.OLDEST_READER:
            continue
        assert isinstance(step, str), f"step {number} is a function: raise OLDEST_READER to it"
        made: set[str] = set()
        for statement in _statements(step):
            match = additive.match(statement)
            assert match, f"step {number} does more than add: {statement[:80]}"
            if statement.upper().startswith("CREATE TABLE"):
                made.add(statement.split()[2].lower())
            if match.group(3):
                assert match.group(3).lower() in made, f"step {number} fills an older table"
