"""Pinned turns (``session/pin``): the turns of a session that a turn sends verbatim whatever
is compacted. A pin is a row of ``pin``; pinning or unpinning logs a ``pin`` or ``unpin``
entry (``chain``) in the same transaction."""

from __future__ import annotations

import apsw

from . import chain
from .db import now


def kept(con: apsw.Connection) -> bool:
    """Whether the store keeps pins (a migration before step 17 runs without them)."""
    found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pin'"
    return con.execute(found).fetchone() is not None


def pinned(con: apsw.Connection, session_id: str) -> tuple[str, ...]:
    """The session's pinned turns, in the order the turns started (a path's order)."""
    if not kept(con):
        return ()
    rows = con.execute(
        "SELECT p.turn_id FROM pin p JOIN turn t ON t.id = p.turn_id"
        " WHERE p.session_id = ? ORDER BY t.rowid",
        (session_id,),
    )
    return tuple(str(row[0]) for row in rows)


def set_pin(con: apsw.Connection, session_id: str, turn_id: str, pin: bool) -> None:
    """Inside a write: pin or unpin ``turn_id`` (a turn of the session), logged when it
    changed anything."""
    if pin:
        con.execute(
            "INSERT OR IGNORE INTO pin(session_id, turn_id, created_at) VALUES (?, ?, ?)",
            (session_id, turn_id, now()),
        )
    else:
        con.execute("DELETE FROM pin WHERE session_id = ? AND turn_id = ?", (session_id, turn_id))
    if con.changes():
        fields = {"sessionId": session_id, "turnId": turn_id}
        chain.record_state(con, session_id, "pin" if pin else "unpin", turn_id, fields)
