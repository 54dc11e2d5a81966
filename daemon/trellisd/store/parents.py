"""Child sessions (the ``task`` tool): which session started which. A row of
``session_parent`` per child, written with the child; a session a person opened has none."""

from __future__ import annotations

import dataclasses

import apsw

from ..records import Session

CHILD_OF = "id IN (SELECT session_id FROM session_parent WHERE parent_session_id = ?)"
"""The condition on a ``session`` row that keeps the children of one session."""


def kept(con: apsw.Connection) -> bool:
    """Whether the store keeps parents (a migration before step 22 runs without them)."""
    found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'session_parent'"
    return con.execute(found).fetchone() is not None


def with_parent(con: apsw.Connection, session: Session) -> Session:
    """``session`` with the session that started it, if one did."""
    if not kept(con):
        return session
    row = con.execute(
        "SELECT parent_session_id FROM session_parent WHERE session_id = ?",
        (session.session_id,),
    ).fetchone()
    if row is None:
        return session
    return dataclasses.replace(session, parent_session_id=str(row[0]))


def set_parent(con: apsw.Connection, session_id: str, parent_session_id: str) -> None:
    """Inside the write that made the child ``session_id``: ``parent_session_id`` started it."""
    con.execute(
        "INSERT INTO session_parent(session_id, parent_session_id) VALUES (?, ?)",
        (session_id, parent_session_id),
    )
