"""The durable store: one SQLite file (WAL) holding sessions, turns, runs, steps, events
and change sets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from . import feed
from .acp_choices import AcpChoices
from .budgets import Budgets
from .changes import Changes
from .db import Database
from .grants import Grants
from .leases import Leases
from .mcp_approvals import McpApprovals
from .runs import Runs
from .search import Search
from .sessions import Sessions


class Store:
    """The store's aggregates over one database."""

    def __init__(self, path: str | Path, alive: Callable[[int], bool]) -> None:
        self.db = Database(path)
        feed.fill_missing(self.db)
        self.leases = Leases(self.db, alive)
        self.sessions = Sessions(self.db)
        self.runs = Runs(self.db, self.leases)
        self.search = Search(self.db)
        self.changes = Changes(self.db, self.leases)
        self.mcp_approvals = McpApprovals(self.db)
        self.grants = Grants(self.db)
        self.budgets = Budgets(self.db)
        self.acp_choices = AcpChoices(self.db)

    def close(self) -> None:
        self.db.close()


__all__ = ["Store"]
