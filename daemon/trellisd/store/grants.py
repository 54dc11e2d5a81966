"""Remembered approvals: the grants ``allowAlways`` and ``allowRule`` answers leave, kept with
their session, and those ``allowAlwaysProject`` and ``allowRuleProject`` answers leave, kept
for every session over the same root. A rule is kept as kind ``rule``, its target the rule as
a compact JSON array (``["pytest","**"]``); a build that knows no rules reads that kind as a
read, which never asks anyway.

Both live in this store (the user's), never in the session's folder: a cloned repository
must not be able to approve its own commands. Deleting a session deletes its grants (a
trigger of migration 11); a project's grants stay until revoked.
"""

from __future__ import annotations

from ..policy.rules import Grant, grant_key, grant_of
from .db import Database, now

SESSION, PROJECT = "session", "project"


class Grants:
    def __init__(self, db: Database) -> None:
        self.db = db

    def add(self, session_id: str, root: str, grant: Grant, project: bool) -> None:
        """Keep ``grant`` for the session, or for every session over ``root``."""
        scope, owner = (PROJECT, root) if project else (SESSION, session_id)
        kind, target = grant_key(grant)
        with self.db.write() as con:
            con.execute(
                "INSERT OR IGNORE INTO approval_grant(scope, owner, kind, target, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (scope, owner, kind, target, now()),
            )

    def of(self, session_id: str, root: str) -> tuple[frozenset[Grant], frozenset[Grant]]:
        """The session's own grants and its root's."""
        with self.db.read() as con:
            rows = con.execute(
                "SELECT scope, kind, target FROM approval_grant"
                " WHERE (scope = ? AND owner = ?) OR (scope = ? AND owner = ?)",
                (SESSION, session_id, PROJECT, root),
            ).fetchall()
        read = [(str(s), grant_of(str(k), str(t))) for s, k, t in rows]
        own = frozenset(g for s, g in read if s == SESSION and g is not None)
        project = frozenset(g for s, g in read if s == PROJECT and g is not None)
        return own, project

    def remove(self, session_id: str, root: str, grant: Grant, scope: str | None) -> int:
        """Revoke ``grant`` (of the one ``scope``, or of both); how many grants went."""
        scopes = [(SESSION, session_id), (PROJECT, root)]
        kind, target = grant_key(grant)
        with self.db.write() as con:
            removed = 0
            for name, owner in scopes:
                if scope not in (None, name):
                    continue
                con.execute(
                    "DELETE FROM approval_grant WHERE scope = ? AND owner = ? AND kind = ?"
                    " AND target = ?",
                    (name, owner, kind, target),
                )
                removed += con.changes()
            return removed
