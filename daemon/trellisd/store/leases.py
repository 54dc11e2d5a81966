"""One writer per session: the daemons sharing a store, and each session's lease.

Each daemon process registers itself: its pid, which process that is (the boot it runs in
and its start time, so that a reused pid is not taken for it) and a heartbeat it renews. A
session's writer is the daemon that holds its lease; another daemon may read the session but
not write it while the writer lives. ``take`` takes the lease outright.

A daemon on this host lives as long as its process does, however long it goes without a
heartbeat (a laptop asleep, a stopped process, an editor that stops reading): it is gone when
its pid is gone, is a zombie, or now names a process that started at another time. Only a
daemon whose process cannot be seen from here (another host or boot) is judged by its
heartbeat, gone once it is stale; where there is no /proc (or for a daemon registered by an
older trellisd) a daemon is gone when its pid is gone or its heartbeat is stale. The leases
of a gone daemon are free to the next writer. A daemon that finds its registration removed
registers again at its next heartbeat.
"""

from __future__ import annotations

import datetime
import logging
import os
from collections.abc import Callable

import apsw

from ..errors import LeaseHeld
from .db import Database, new_id, now
from .sessions import Sessions

log = logging.getLogger(__name__)


STALE_SECONDS = 15.0
"""How long a daemon that cannot be seen may go without a heartbeat (7.5 beats of the
default 2 s: ``DaemonSettings.stale_seconds``)."""


def boot_id() -> str | None:
    """This boot of this host, or None where the system does not say."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks after boot (field 22 of
    /proc/<pid>/stat); None when there is no such process or no /proc."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            fields = f.read().rsplit(") ", 1)[1].split()
        return int(fields[19])  # fields after the command name start at field 3
    except (OSError, IndexError, ValueError):
        return None


class Leases:
    def __init__(
        self, db: Database, alive: Callable[[int], bool], stale_seconds: float = STALE_SECONDS
    ) -> None:
        self.db = db
        self.alive = alive
        self.stale_seconds = stale_seconds
        self.daemon_id = new_id("d")
        self.pid = os.getpid()
        self.boot_id = boot_id()
        self.process_start = process_start(self.pid)

    def register(self) -> None:
        """Record this daemon among those using the store; a read-only store, which no
        daemon writes, has none to record."""
        if self.db.read_only:
            return
        with self.db.write() as con:
            self._register(con)

    def _register(self, con: apsw.Connection) -> None:
        stamp = now()
        con.execute(
            "INSERT INTO daemon(id, pid, started_at, heartbeat_at, boot_id, process_start)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (self.daemon_id, self.pid, stamp, stamp, self.boot_id, self.process_start),
        )

    def heartbeat(self) -> None:
        """Renew this daemon's heartbeat; register again if another daemon removed it."""
        if self.db.read_only:
            return
        with self.db.write() as con:
            con.execute("UPDATE daemon SET heartbeat_at = ? WHERE id = ?", (now(), self.daemon_id))
            if con.changes() == 0:
                log.warning("this daemon's registration in the store was removed; registering")
                self._register(con)

    def unregister(self) -> None:
        """A clean exit: release every lease this daemon holds."""
        if self.db.read_only:
            return
        with self.db.write() as con:
            con.execute("UPDATE session SET owner = NULL WHERE owner = ?", (self.daemon_id,))
            con.execute("DELETE FROM daemon WHERE id = ?", (self.daemon_id,))

    def gone_daemons(self, con: apsw.Connection) -> list[str]:
        """Other daemons that are gone: their process, where it can be seen from here;
        else their heartbeat."""
        cutoff = (
            datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=self.stale_seconds)
        ).isoformat(timespec="milliseconds")
        return [
            daemon_id
            for daemon_id, pid, beat, boot, start in con.execute(
                "SELECT id, pid, heartbeat_at, boot_id, process_start FROM daemon WHERE id != ?",
                (self.daemon_id,),
            )
            if self._gone(pid, beat < cutoff, boot, start)
        ]

    def _gone(self, pid: int, stale: bool, boot: str | None, start: int | None) -> bool:
        if boot is not None and boot == self.boot_id:  # this host, this boot: ask the process
            if not self.alive(pid):
                return True
            now_start = process_start(pid)
            return start is not None and now_start is not None and now_start != start
        if boot is None:  # written where /proc is not (or by an older trellisd)
            return stale or not self.alive(pid)
        return stale  # another host, or an earlier boot of this one

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

    def release(self, session_id: str) -> None:
        """Stop being the session's writer (if this daemon is): the next daemon to write it
        takes the lease without waiting for this one to exit."""
        if self.db.read_only:
            return
        with self.db.write() as con:
            Sessions._get(con, session_id)
            con.execute(
                "UPDATE session SET owner = NULL WHERE id = ? AND owner = ?",
                (session_id, self.daemon_id),
            )

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
