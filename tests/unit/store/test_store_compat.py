"""A store a newer trellisd wrote: within its compatibility level it is read and not written,
the refusal naming the version that wrote it; outside it, it is refused and left untouched.
The newer trellisd is this one with a migration that exists only here."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.fixtures.newer_store import written_by_newer
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
