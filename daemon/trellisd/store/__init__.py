"""The durable store: one SQLite file (WAL) holding sessions, turns, runs, steps, events
and change sets."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from . import chain, feed
from .acp_choices import AcpChoices
from .anchors import Anchors
from .budgets import Budgets
from .changes import Changes
from .db import Database
from .grants import Grants
from .leases import STALE_SECONDS, Leases
from .mcp_approvals import McpApprovals
from .runs import Runs
from .search import SessionSearch
from .sessions import Sessions
from .worktrees import Worktrees


class Store:
    """The store's aggregates over one database. With ``anchors`` (the user's config
    folder), each session's log is anchored there (``anchors.py``): ``anchor`` after writes,
    and ``verify`` checks it. ``stale_seconds``: how long another daemon whose process
    cannot be seen goes without a heartbeat before it is taken for gone."""

    def __init__(
        self,
        path: str | Path,
        alive: Callable[[int], bool],
        anchors: Path | None = None,
        stale_seconds: float = STALE_SECONDS,
    ) -> None:
        self.db = Database(path)
        feed.fill_missing(self.db)
        self.anchors = None if anchors is None else Anchors(anchors, self.db.path)
        self.leases = Leases(self.db, alive, stale_seconds)
        self.sessions = Sessions(self.db)
        self.runs = Runs(self.db, self.leases)
        self.search = SessionSearch(self.db)
        self.changes = Changes(self.db, self.leases)
        self.mcp_approvals = McpApprovals(self.db)
        self.grants = Grants(self.db)
        self.budgets = Budgets(self.db)
        self.acp_choices = AcpChoices(self.db)
        self.worktrees = Worktrees(self.db, self.leases)

    def anchor(self) -> None:
        """Sign where the writes since the last call left each session's log: the heads
        they reached that were committed (a rolled-back one is not in the log)."""
        heads = chain.moved(self.db.con)
        if not heads or self.anchors is None:
            return
        with self.db.read() as con:
            committed = {
                session_id: head
                for session_id, head in heads.items()
                if con.execute(
                    "SELECT 1 FROM chain WHERE session_id = ? AND seq = ? AND hash = ?",
                    (session_id, head.seq, head.hash),
                ).fetchone()
            }
        self.anchors.record(committed)

    def verify(self, session_id: str) -> chain.LogVerdict:
        """The session's log checked (``chain.verify``), and against its signed head."""
        verdict = self.sessions.verify(session_id)
        anchor = None if self.anchors is None else self.anchors.of(session_id)
        if anchor is None:
            return verdict
        with self.db.read() as con:
            row = con.execute(
                "SELECT kind, ref, hash FROM chain WHERE session_id = ? AND seq = ?",
                (session_id, anchor.seq),
            ).fetchone()
        if anchor.signed and row is not None and row[2] == anchor.hash:
            return dataclasses.replace(verdict, anchored=True)
        if not anchor.signed:
            why = "the signature of its anchor does not match: the anchor was changed"
        elif row is None:
            why = f"its log ends before entry {anchor.seq}, which this user's key signed"
        else:
            why = (
                f"entry {anchor.seq} is not the one this user's key signed: the log was"
                " rewritten at or before it"
            )
        bad = chain.BadEntry(anchor.seq, "session", session_id)
        if row is not None:
            bad = chain.BadEntry(anchor.seq, str(row[0]), str(row[1]))
        if not verdict.ok:  # its own first bad entry says more
            return dataclasses.replace(verdict, anchored=True, rewritten=True)
        return dataclasses.replace(
            verdict, ok=False, first_bad=bad, reason=why, anchored=True, rewritten=True
        )

    def close(self) -> None:
        chain.moved(self.db.con)  # heads not anchored by now never will be: let them go
        if self.anchors is not None:
            self.anchors.close()
        self.db.close()


__all__ = ["Store"]
