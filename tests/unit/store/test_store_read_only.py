"""A store the daemon cannot write: every read is served, every write is refused clearly."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from tests.fixtures.read_only import read_only
from trellisd.errors import StoreError
from trellisd.records import Step, Tokens
from trellisd.store import Store
from trellisd.store.migrations import MIGRATIONS


@pytest.fixture
def kept(tmp_path: Path) -> Iterator[tuple[Store, str, str]]:
    """A store with a session and a finished turn, closed, then made read-only and opened;
    ``(store, session_id, run_id)``."""
    db = tmp_path / "store" / "trellisd.db"
    writer = Store(db, lambda pid: True)
    writer.leases.register()
    session = writer.sessions.create("/work/project", "kept", {}, writer.leases.daemon_id)
    _, run_id, _ = writer.runs.begin(session.session_id, "what is here?")
    writer.runs.add_step(
        run_id, Step(1, "reply", "what is here?", "A README.", None, None, Tokens())
    )
    writer.runs.finish(run_id, "finished")
    writer.leases.unregister()
    writer.close()
    with read_only(db.parent):
        store = Store(db, lambda pid: True)
        try:
            yield store, session.session_id, run_id
        finally:
            store.close()


def test_a_read_only_store_serves_every_read(kept: tuple[Store, str, str]) -> None:
    store, session_id, run_id = kept
    store.leases.register()  # what a daemon does first; nothing to record here
    assert store.runs.mark_interrupted() == []

    page, _ = store.sessions.page(None, 10, None)
    assert [s.session.title for s in page] == ["kept"]
    session, history, _, integrity = store.sessions.reopen(session_id, store.leases, None)
    assert session.title == "kept" and [t.reply for t in history] == ["A README."]
    assert integrity == "ok"
    assert [t.reply for t in store.sessions.history(session_id)] == ["A README."]
    assert [t.prompt for t in store.sessions.turns(session_id)] == ["what is here?"]
    assert store.runs.summary(run_id).outcome == "finished"
    assert [s.text for s in store.runs.steps(run_id)] == ["A README."]
    assert store.runs.events(run_id) == []
    store.leases.heartbeat()
    store.leases.unregister()


def test_a_read_only_store_refuses_writes_saying_why(kept: tuple[Store, str, str]) -> None:
    store, session_id, _ = kept
    writes = [
        lambda: store.sessions.create("/work/project", "new", {}, store.leases.daemon_id),
        lambda: store.runs.begin(session_id, "one more"),
        lambda: store.leases.take(session_id),
        lambda: store.sessions.branch(session_id, None, store.leases),
    ]
    for write in writes:
        with pytest.raises(StoreError) as refused:
            write()
        assert refused.value.CODE == -32040
        assert "read-only" in refused.value.message
        assert refused.value.data["readOnly"] is True


def test_a_read_only_store_of_an_older_schema_is_refused_as_it_cannot_be_upgraded(
    tmp_path: Path,
) -> None:
    db = tmp_path / "store" / "trellisd.db"
    Store(db, lambda pid: True).close()
    con = apsw.Connection(str(db))
    con.pragma("user_version", len(MIGRATIONS) - 1)
    con.close()
    with read_only(db.parent), pytest.raises(StoreError) as refused:
        Store(db, lambda pid: True)
    assert "read-only" in refused.value.message and "cannot be upgraded" in refused.value.message
    assert refused.value.data["schemaVersion"] == len(MIGRATIONS) - 1
