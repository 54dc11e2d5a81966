"""A full disk: a clear store error, nothing half written, and a turn that still ends."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from trellisd.errors import StoreError
from trellisd.records import Session, Step, Tokens
from trellisd.store import Store

OpenSession = Callable[..., Session]

BIG = "x" * 20_000  # more than a page: the write needs pages the full file does not have


def fill_up(store: Store) -> None:
    """Make the database full: SQLite's own limit on its pages, at the pages it has now."""
    con = store.db.con
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert con.pragma("freelist_count") == 0
    con.pragma("max_page_count", con.pragma("page_count"))


def make_room(store: Store) -> None:
    store.db.con.pragma("max_page_count", 1 << 30)


def step(n: int, text: str) -> Step:
    return Step(n, "reply", "go", text, None, None, Tokens(1, 1, 0))


@pytest.fixture
def run_on_a_full_disk(store: Store, open_session: OpenSession) -> str:
    """A turn that started, then the disk filled up; its run id."""
    _, run_id, _ = store.runs.begin(open_session().session_id, "go")
    fill_up(store)
    return run_id


def test_a_full_disk_is_a_store_error_and_leaves_nothing_half_written(
    store: Store, run_on_a_full_disk: str
) -> None:
    run_id = run_on_a_full_disk
    with pytest.raises(StoreError) as full:
        store.runs.add_step(run_id, step(1, BIG))

    assert full.value.CODE == -32040
    assert "full" in full.value.message and "nothing was written" in full.value.message
    assert store.runs.steps(run_id) == []
    make_room(store)
    store.runs.add_step(run_id, step(1, "kept"))
    assert [s.text for s in store.runs.steps(run_id)] == ["kept"]


def test_a_turn_ends_even_when_its_end_cannot_be_written_at_once(
    store: Store, run_on_a_full_disk: str
) -> None:
    run_id = run_on_a_full_disk
    with pytest.raises(StoreError):
        store.runs.finish(run_id, "error", "the disk is full: " + BIG)
    assert store.runs.summary(run_id).outcome == "running"

    make_room(store)
    store.runs.mark_interrupted()  # what the daemon does on its heartbeat

    summary = store.runs.summary(run_id)
    assert summary.outcome == "error"
    assert summary.error is not None and summary.error.startswith("the disk is full")
    store.runs.resume(run_id)
    store.runs.add_step(run_id, step(1, "resumed"))
    store.runs.finish(run_id, "finished")
    assert store.runs.summary(run_id).outcome == "finished"
