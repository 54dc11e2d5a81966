"""The git worktrees the daemon made for sessions (``services.worktrees``): a row of
``worktree`` per folder, written before each git step that makes or removes one.

A row is ``creating`` (by ``daemon_id``) before ``git worktree add`` runs, ``ready`` once its
session is made (in the same transaction), and ``removing`` before the worktree is taken
apart; it is deleted last. So whatever point a daemon dies at, the next start finds the row
of what was under way: a ``creating`` or ``removing`` row whose daemon is gone, or a row whose
session is gone, is a leftover to prune; a ``ready`` row of a session is adopted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import apsw

from ..records import Worktree
from .db import Database, now

CREATING, READY, REMOVING = "creating", "ready", "removing"


@dataclass(frozen=True)
class WorktreeRow:
    """A worktree as the store keeps it: the wire's ``Worktree``, its session (None while
    it is made), where it stands and which daemon put it there."""

    worktree: Worktree
    session_id: str | None
    state: str
    daemon_id: str


_COLUMNS = "path, branch, base, base_commit, checkout, session_id, state, daemon_id"


def kept(con: apsw.Connection) -> bool:
    """Whether the store keeps worktrees (a migration before step 21 runs without them)."""
    found = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'worktree'"
    return con.execute(found).fetchone() is not None


def worktree_of(con: apsw.Connection, session_id: str) -> Worktree | None:
    """The session's worktree, once it is made and until it is gone."""
    if not kept(con):
        return None
    row = con.execute(
        f"SELECT {_COLUMNS} FROM worktree WHERE session_id = ? AND state != ?",
        (session_id, CREATING),
    ).fetchone()
    return None if row is None else _row(row).worktree


def under_root(con: apsw.Connection, root: str, alias: str = "") -> tuple[str, list[str]]:
    """A condition, with its arguments, that holds for the sessions over ``root`` and those
    working in a worktree of the checkout at ``root``; just ``root = ?`` (which the index by
    root serves in order) when the checkout has none."""
    found = "SELECT 1 FROM worktree WHERE checkout = ? LIMIT 1"
    if not kept(con) or con.execute(found, (root,)).fetchone() is None:
        return f"{alias}root = ?", [root]
    return (
        f"({alias}root = ? OR {alias}id IN (SELECT session_id FROM worktree WHERE checkout = ?))",
        [root, root],
    )


def attach(con: apsw.Connection, path: str, session_id: str) -> None:
    """Inside the write that made the session: its worktree at ``path`` is ready."""
    con.execute(
        "UPDATE worktree SET session_id = ?, state = ? WHERE path = ?", (session_id, READY, path)
    )


def _row(row: tuple[str, ...]) -> WorktreeRow:
    return WorktreeRow(Worktree(*row[:5]), row[5], row[6], row[7])


class Daemons(Protocol):
    """This daemon, and which others are gone (``Leases``)."""

    daemon_id: str

    def gone_daemons(self, con: apsw.Connection) -> list[str]: ...


class Worktrees:
    def __init__(self, db: Database, leases: Daemons) -> None:
        self.db, self.leases = db, leases

    def begin(self, worktree: Worktree) -> None:
        """Record that this daemon is about to make ``worktree``."""
        with self.db.write() as con:
            con.execute(
                f"INSERT INTO worktree({_COLUMNS}, created_at)"
                " VALUES (?, ?, ?, ?, ?, NULL, ?, ?, ?)",
                (
                    worktree.path,
                    worktree.branch,
                    worktree.base,
                    worktree.base_commit,
                    worktree.checkout,
                    CREATING,
                    self.leases.daemon_id,
                    now(),
                ),
            )

    def removing(self, session_id: str) -> Worktree | None:
        """Record that this daemon is about to take the session's worktree apart; the
        worktree, or None when the session has none."""
        with self.db.write() as con:
            row = con.execute(
                f"SELECT {_COLUMNS} FROM worktree WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None:
                return None
            con.execute(
                "UPDATE worktree SET state = ?, daemon_id = ? WHERE session_id = ?",
                (REMOVING, self.leases.daemon_id, session_id),
            )
            return _row(row).worktree

    def keep(self, session_id: str) -> None:
        """The session's worktree stays after all (its removal was refused before it began)."""
        with self.db.write() as con:
            con.execute(
                "UPDATE worktree SET state = ? WHERE session_id = ? AND state = ?",
                (READY, session_id, REMOVING),
            )

    def forget(self, path: str) -> None:
        """The worktree at ``path`` is gone: its row goes too."""
        with self.db.write() as con:
            con.execute("DELETE FROM worktree WHERE path = ?", (path,))

    def rows(self) -> list[WorktreeRow]:
        with self.db.read() as con:
            return [_row(row) for row in con.execute(f"SELECT {_COLUMNS} FROM worktree")]

    def leftovers(self) -> list[Worktree]:
        """The worktrees to prune: made or removed by a daemon that is gone, or whose
        session is gone."""
        with self.db.read() as con:
            gone = set(self.leases.gone_daemons(con))
            live = {str(r[0]) for r in con.execute("SELECT id FROM daemon")} - gone
            live.add(self.leases.daemon_id)
            rows = [_row(row) for row in con.execute(f"SELECT {_COLUMNS} FROM worktree")]
            sessions = {
                str(r[0])
                for r in con.execute(
                    "SELECT session_id FROM worktree w JOIN session s ON s.id = w.session_id"
                )
            }
        return [
            r.worktree
            for r in rows
            if (r.state != READY and r.daemon_id not in live)
            or (r.state == READY and r.session_id not in sessions)
        ]
