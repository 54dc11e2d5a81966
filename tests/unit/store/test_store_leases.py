"""Who is alive among the daemons sharing a store: their process, not their heartbeat."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest

from trellisd.daemon_settings import heartbeat_seconds
from trellisd.errors import LeaseHeld
from trellisd.records import Step, Tokens
from trellisd.store import Store
from trellisd.store.leases import process_start

OpenStore = Callable[[], Store]


@pytest.fixture
def writer(open_store: OpenStore) -> tuple[Store, str, str]:
    """A daemon with a session and a turn still running; ``(store, session_id, run_id)``."""
    store = open_store()
    session = store.sessions.create("/work/project", "", {}, store.leases.daemon_id)
    _, run_id, _ = store.runs.begin(session.session_id, "a long turn")
    return store, session.session_id, run_id


def set_daemon(store: Store, column: str, value: object) -> None:
    """Change this daemon's row in the store, as time or another daemon would."""
    with store.db.write() as con:
        con.execute(f"UPDATE daemon SET {column} = ? WHERE id = ?", (value, store.leases.daemon_id))


def test_a_live_daemon_without_a_heartbeat_keeps_its_session_and_its_turn(
    writer: tuple[Store, str, str], open_store: OpenStore
) -> None:
    store, session_id, run_id = writer
    set_daemon(store, "heartbeat_at", "2000-01-01T00:00:00.000+00:00")  # asleep for years
    other = open_store()

    assert other.runs.mark_interrupted() == []
    with pytest.raises(LeaseHeld):
        other.leases.claim(session_id)
    assert other.runs.summary(run_id).outcome == "running"
    store.runs.finish(run_id, "finished")
    assert other.runs.summary(run_id).outcome == "finished"


@pytest.fixture
def other_process() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE
    )
    yield process
    process.communicate(timeout=10)


def test_a_reused_pid_is_not_taken_for_the_daemon_that_had_it(
    writer: tuple[Store, str, str], open_store: OpenStore, other_process: subprocess.Popen[bytes]
) -> None:
    store, session_id, run_id = writer
    # The daemon died and its pid now names a process that started at another time.
    start = process_start(other_process.pid)
    assert start is not None
    set_daemon(store, "pid", other_process.pid)
    set_daemon(store, "process_start", start - 1)
    other = open_store()

    assert other.runs.mark_interrupted() == [run_id]
    other.leases.claim(session_id)
    assert other.runs.summary(run_id).outcome == "interrupted"


def test_the_same_process_under_its_own_pid_is_alive(
    writer: tuple[Store, str, str], open_store: OpenStore, other_process: subprocess.Popen[bytes]
) -> None:
    store, session_id, _ = writer
    set_daemon(store, "pid", other_process.pid)
    set_daemon(store, "process_start", process_start(other_process.pid))
    with pytest.raises(LeaseHeld) as held:
        open_store().leases.claim(session_id)
    assert held.value.data["ownerPid"] == other_process.pid


def test_a_daemon_whose_registration_was_removed_registers_again(
    writer: tuple[Store, str, str], open_store: OpenStore
) -> None:
    store, session_id, run_id = writer
    with store.db.write() as con:  # as an older trellisd that judged it by its heartbeat
        con.execute("DELETE FROM daemon WHERE id = ?", (store.leases.daemon_id,))

    store.leases.heartbeat()

    other = open_store()
    assert other.runs.mark_interrupted() == []
    with pytest.raises(LeaseHeld):
        other.leases.claim(session_id)
    store.runs.add_step(run_id, _step())


def _step() -> Step:

    return Step(1, "reply", "go", "done", None, None, Tokens())


@pytest.mark.parametrize(
    ("value", "seconds"), [("0.05", 0.05), ("3", 3.0), ("soon", 2.0), ("-1", 2.0), ("nan", 2.0)]
)
def test_the_heartbeat_interval_comes_from_the_environment(value: str, seconds: float) -> None:
    assert heartbeat_seconds({"TRELLISD_HEARTBEAT": value}) == seconds
    assert heartbeat_seconds({}) == 2.0
