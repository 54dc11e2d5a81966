"""The store file itself: its schema, its journal, and what it does with a file it cannot use."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

from trellisd.errors import StoreError
from trellisd.records import Session, Step, Tokens
from trellisd.store import Store
from trellisd.store.migrations import MIGRATIONS

TABLES = {"session", "turn", "run", "step", "event"}


def raw(path: Path) -> apsw.Connection:
    """A plain SQLite connection, as a person inspecting the file would use."""
    return apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE)


def test_a_new_store_is_migrated_to_the_latest_schema(store: Store, db_path: Path) -> None:
    con = raw(db_path)
    try:
        assert con.pragma("user_version") == len(MIGRATIONS)
        tables = {
            name: strict
            for name, strict in con.execute(
                "SELECT name, strict FROM pragma_table_list"
                " WHERE schema = 'main' AND type = 'table' AND name NOT LIKE 'sqlite_%'"
            )
        }
    finally:
        con.close()
    assert TABLES <= tables.keys()
    assert all(tables.values()), f"tables that are not STRICT: {tables}"


def test_the_store_file_is_in_wal_mode(
    store: Store, db_path: Path, open_session: Callable[..., Session]
) -> None:
    open_session()
    header = db_path.read_bytes()[:100]
    # Bytes 18 and 19 of the header are the file format's write and read versions: 2 is WAL.
    assert header[18:20] == b"\x02\x02"
    con = raw(db_path)
    try:
        assert con.pragma("journal_mode") == "wal"
    finally:
        con.close()


def test_reopening_the_file_keeps_what_was_written(
    open_store: Callable[[], Store],
    open_session: Callable[..., Session],
    take_turn: Callable[..., tuple[str, str]],
    store: Store,
) -> None:
    session = open_session(title="kept")
    turn_id, run_id = take_turn(session.session_id, "remember me")
    store.runs.add_event(run_id, "retry", None, {"a": 1})
    store.close()

    again = open_store()
    assert again.sessions.get(session.session_id).title == "kept"
    history = again.sessions.history(session.session_id)
    assert [(t.turn_id, t.prompt, t.reply) for t in history] == [
        (turn_id, "remember me", "re: remember me")
    ]
    assert [e.detail for e in again.runs.events(run_id)] == [{"a": 1}]


def test_a_store_from_a_newer_trellisd_is_refused_and_left_byte_identical(
    db_path: Path, open_store: Callable[[], Store]
) -> None:
    open_store().close()
    newer = len(MIGRATIONS) + 3
    con = raw(db_path)
    con.pragma("user_version", newer)
    # a schema this version is too old to read (outside the store's compatibility level)
    con.execute("UPDATE store_info SET value = ? WHERE key = 'readable_from'", (str(newer),))
    con.close()
    before = db_path.read_bytes()

    with pytest.raises(StoreError) as refused:
        Store(db_path, lambda pid: True)

    assert "newer" in refused.value.message
    assert refused.value.data["schemaVersion"] == newer
    assert refused.value.data["knownVersion"] == len(MIGRATIONS)
    assert db_path.read_bytes() == before


def test_a_second_store_reads_while_the_first_holds_a_write_transaction(
    store: Store,
    open_store: Callable[[], Store],
    open_session: Callable[..., Session],
) -> None:
    committed = open_session(root="/committed")
    reader = open_store()
    with store.db.write() as con:
        # Enough uncommitted rows that the writer cannot keep them all in its page cache.
        for n in range(3000):
            con.execute(
                "INSERT INTO session(id, root, title, settings, created_at, updated_at)"
                " VALUES (?, '/uncommitted', ?, '{}', ?, ?)",
                (f"s-bulk-{n}", "x" * 4000, "2000-01-01", "2000-01-01"),
            )
        # Were the read to wait for the writer it could never go on: the writer is this
        # thread, so the store would give up busy and the read would fail.
        page, _ = reader.sessions.page(None, 10, None)

    assert [s.session.session_id for s in page] == [committed.session_id]


def test_a_write_that_fails_leaves_nothing_behind(
    store: Store, open_session: Callable[..., Session]
) -> None:
    session = open_session()
    with pytest.raises(RuntimeError), store.db.write() as con:
        con.execute("UPDATE session SET title = 'half done' WHERE id = ?", (session.session_id,))
        raise RuntimeError("stop here")
    assert store.sessions.get(session.session_id).title == ""
    _, run_id, _ = store.runs.begin(session.session_id, "after the failure")
    store.runs.add_step(run_id, Step(1, "reply", "after", "ok", None, None, Tokens()))
    assert store.runs.summary(run_id).steps == 1
