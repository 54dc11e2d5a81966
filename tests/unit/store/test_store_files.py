"""The store's folder and files on disk: who may read them."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from trellisd.store import Store


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(params=[0o022, 0o002, 0o000], ids=["umask-022", "umask-002", "umask-000"])
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_a_new_store_is_private_to_its_user(tmp_path: Path, umask: int) -> None:
    db = tmp_path / "data" / "trellisd" / "trellisd.db"
    store = Store(db, lambda pid: True)
    try:
        store.leases.register()
        store.sessions.create("/work/project", "private", {}, store.leases.daemon_id)
        files = {p.name: mode(p) for p in db.parent.iterdir()}
        folders = {str(p.relative_to(tmp_path)): mode(p) for p in (db.parent, db.parent.parent)}
    finally:
        store.close()
    assert files == {
        "trellisd.db": 0o600,
        "trellisd.db-wal": 0o600,
        "trellisd.db-shm": 0o600,
    }
    assert folders == {"data/trellisd": 0o700, "data": 0o700}


def test_an_existing_folder_keeps_its_mode(tmp_path: Path, umask: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    Store(shared / "trellisd.db", lambda pid: True).close()
    assert mode(shared) == 0o755
    assert mode(shared / "trellisd.db") == 0o600


def test_an_existing_store_readable_by_others_is_made_private(tmp_path: Path) -> None:
    db = tmp_path / "trellisd.db"
    Store(db, lambda pid: True).close()
    db.chmod(0o644)
    store = Store(db, lambda pid: True)
    try:
        store.leases.register()
        assert {p.name: mode(p) for p in tmp_path.iterdir()} == {
            "trellisd.db": 0o600,
            "trellisd.db-wal": 0o600,
            "trellisd.db-shm": 0o600,
        }
    finally:
        store.close()
