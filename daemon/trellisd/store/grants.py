"""Remembered approvals: the grants ``allowAlways`` answers leave, kept with their session,
and those ``allowAlwaysProject`` answers leave, kept for every session over the same root.

Both live in this store (the user's), never in the session's folder: a cloned repository
must not be able to approve its own commands. Deleting a session deletes its grants (a
trigger of migration 11); a project's grants stay until revoked.
"""

from __future__ import annotations

from ..tools.base import Action, ActionKind
from .db import Database, now

SESSION, PROJECT = "session", "project"


class Grants:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, session_id: str, root: str, action: Action, project: bool) -> None:
        """Keep ``action`` granted for the session, or for every session over ``root``."""
        scope, owner = (PROJECT, root) if project else (SESSION, session_id)
        with self.db.write() as con:
            con.execute(
                "INSERT OR IGNORE INTO approval_grant(scope, owner, kind, target, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (scope, owner, action.kind, action.target, now()),
            )

    def of(self, session_id: str, root: str) -> tuple[frozenset[Action], frozenset[Action]]:
        """The session's own grants and its root's."""
        with self.db.read() as con:
            rows = con.execute(
                "SELECT scope, kind, target FROM approval_grant"
                " WHERE (scope = ? AND owner = ?) OR (scope = ? AND owner = ?)",
                (SESSION, session_id, PROJECT, root),
            ).fetchall()
        own = frozenset(_action(str(k), str(t)) for s, k, t in rows if s == SESSION)
        project = frozenset(_action(str(k), str(t)) for s, k, t in rows if s == PROJECT)
        return own, project

    def remove(self, session_id: str, root: str, action: Action, scope: str | None) -> int:
        """Revoke ``action`` (of the one ``scope``, or of both); how many grants went."""
        scopes = [(SESSION, session_id), (PROJECT, root)]
        with self.db.write() as con:
            removed = 0
            for name, owner in scopes:
                if scope not in (None, name):
                    continue
                con.execute(
                    "DELETE FROM approval_grant WHERE scope = ? AND owner = ? AND kind = ?"
                    " AND target = ?",
                    (name, owner, action.kind, action.target),
                )
                removed += con.changes()
            return removed


def _action(kind: str, target: str) -> Action:
    k: ActionKind = "write" if kind == "write" else "exec" if kind == "exec" else "read"
    return Action(k, target)
