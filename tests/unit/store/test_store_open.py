"""Opening a store that other daemons are creating or writing at the same moment."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

import apsw

from trellisd.errors import StoreError
from trellisd.store import Store
from trellisd.store.migrations import MIGRATIONS

# A daemon starting: open the store, register, write a session; it waits for a line on stdin
# so that every daemon of a round starts at the same moment.
DAEMON_START = """
import sys
from trellisd.errors import StoreError
from trellisd.store import Store
sys.stdin.readline()
try:
    store = Store(sys.argv[1], lambda pid: True)
    store.leases.register()
    store.sessions.create("/work/project", "", {}, store.leases.daemon_id)
    store.close()
    print("ok")
except StoreError as exc:
    print(exc.message)
"""


def test_daemons_started_at_once_on_a_new_store_all_open_it(tmp_path: Path) -> None:
    answers = []
    for round_ in range(3):
        db = tmp_path / f"round-{round_}" / "trellisd.db"
        daemons = [
            subprocess.Popen(
                [sys.executable, "-c", DAEMON_START, str(db)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(8)
        ]
        for daemon in daemons:
            assert daemon.stdin is not None
            daemon.stdin.write("go\n")
            daemon.stdin.flush()
        answers += [daemon.communicate(timeout=60)[0].strip() for daemon in daemons]
    failed = [answer for answer in answers if answer != "ok"]
    assert failed == [], f"{len(failed)} of {len(answers)} daemons could not open the store"


class _Waiting(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.seen = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "locked" in record.getMessage():
            self.seen.set()


def test_opening_a_new_store_waits_for_a_daemon_that_holds_it_locked(tmp_path: Path) -> None:
    db = tmp_path / "trellisd.db"
    creator = apsw.Connection(str(db))  # another daemon, halfway through creating the store
    creator.execute("BEGIN EXCLUSIVE; CREATE TABLE half_made(x)")
    waiting = _Waiting()
    logger = logging.getLogger("trellisd.store.db")
    logger.addHandler(waiting)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    opened: list[Store | StoreError] = []

    def open_() -> None:
        try:
            opened.append(Store(db, lambda pid: True))
        except StoreError as exc:
            opened.append(exc)

    opener = threading.Thread(target=open_)
    try:
        opener.start()
        while not waiting.seen.wait(0.05) and opener.is_alive():
            pass
        creator.execute("ROLLBACK")
        opener.join(timeout=60)
    finally:
        logger.removeHandler(waiting)
        logger.setLevel(old_level)
        creator.close()

    [store] = opened
    assert isinstance(store, Store), store
    try:
        assert store.db.con.pragma("user_version") == len(MIGRATIONS)
    finally:
        store.close()
