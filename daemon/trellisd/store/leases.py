"""One writer per session: the daemons sharing a store, and each session's lease.

Each daemon process registers itself (its pid and a heartbeat it renews). A session's
writer is the daemon that holds its lease; another daemon may read the session but not
write it while the writer lives. A writer is gone when its pid is gone or its heartbeat is
stale; the next write from another daemon then takes the lease. ``take`` takes it outright.
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Callable, Mapping

import apsw

from ..errors import LeaseHeld
from .db import Database, now
from .sessions import Sessions, new_id

log = logging.getLogger(__name__)


def _heartbeat_seconds(environ: Mapping[str, str]) -> float:
    """Seconds between heartbeats: ``TRELLISD_HEARTBEAT``, else 2."""
    try:
        seconds = float(environ.get("TRELLISD_HEARTBEAT", "2"))
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < 3600:
        log.warning("TRELLISD_HEARTBEAT must be a number of seconds; using 2")
        seconds = 2.0
    return seconds


HEARTBEAT_SECONDS = _heartbeat_seconds(os.environ)
STALE_SECONDS = 7.5 * HEARTBEAT_SECONDS  # 15 s at the default


class Leases:
    def __init__(self, db: Database, alive: Callable[[int], bool]) -> None:
        self.db = db
        self.alive = alive
        self.daemon_id = new_id("d")
        self.pid = os.getpid()

    def register(self) -> None:
        stamp = now()
        with self.db.write() as con:
            con.execute(
                "INSERT INTO daemon(id, pid, started_at, heartbeat_at) VALUES (?, ?, ?, ?)",
                (self.daemon_id, self.pid, stamp, stamp),
            )

    def heartbeat(self) -> None:
        with self.db.write() as con:
            con.execute("UPDATE daemon SET heartbeat_at = ? WHERE id = ?", (now(), self.daemon_id))

    def unregister(self) -> None:
        """A clean exit: release every lease this daemon holds."""
        with self.db.write() as con:
            con.execute("UPDATE session SET owner = NULL WHERE owner = ?", (self.daemon_id,))
            con.execute("DELETE FROM daemon WHERE id = ?", (self.daemon_id,))

    def gone_daemons(self, con: apsw.Connection) -> list[str]:
        """Daemons whose process is gone or whose heartbeat stopped."""
        cutoff = (
            datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=STALE_SECONDS)
        ).isoformat(timespec="milliseconds")
        return [
            daemon_id
            for daemon_id, pid, beat in con.execute(
                "SELECT id, pid, heartbeat_at FROM daemon WHERE id != ?", (self.daemon_id,)
            )
            if not self.alive(pid) or beat < cutoff
        ]

    def _owner(self, con: apsw.Connection, session_id: str) -> tuple[str | None, int | None]:
        Sessions._get(con, session_id)
        row = con.execute(
            "SELECT s.owner, d.pid FROM session s LEFT JOIN daemon d"
            " ON d.id = s.owner WHERE s.id = ?",
            (session_id,),
        ).fetchone()
        assert row is not None  # the session exists: checked above
        return row[0], row[1]

    def acquire(self, con: apsw.Connection, session_id: str) -> None:
        """Inside a write transaction: make this daemon the session's writer, or refuse."""
        owner, pid = self._owner(con, session_id)
        if owner == self.daemon_id:
            return
        if owner is not None and pid is not None and owner not in self.gone_daemons(con):
            raise LeaseHeld(
                f"session {session_id} is being written by another trellisd (pid {pid});"
                " it can be read here, and session/takeover makes this daemon its writer",
                sessionId=session_id,
                ownerPid=pid,
            )
        con.execute("UPDATE session SET owner = ? WHERE id = ?", (self.daemon_id, session_id))

    def claim(self, session_id: str) -> None:
        with self.db.write() as con:
            self.acquire(con, session_id)

    def try_claim(self, session_id: str) -> bool:
        """Become the writer if nobody live is; reading never needs the lease."""
        try:
            self.claim(session_id)
        except LeaseHeld:
            return False
        return True

    def take(self, session_id: str) -> int | None:
        """Take the lease whoever holds it; returns the previous writer's pid, if any."""
        with self.db.write() as con:
            _, pid = self._owner(con, session_id)
            con.execute("UPDATE session SET owner = ? WHERE id = ?", (self.daemon_id, session_id))
        return pid

    def holds(self, con: apsw.Connection, session_id: str) -> None:
        """Inside a write transaction: refuse unless this daemon is still the writer."""
        owner, pid = self._owner(con, session_id)
        if owner != self.daemon_id:
            raise LeaseHeld(
                f"session {session_id} was taken over by another trellisd"
                + (f" (pid {pid})" if pid else "")
                + "; this daemon no longer writes it",
                sessionId=session_id,
                ownerPid=pid,
            )
