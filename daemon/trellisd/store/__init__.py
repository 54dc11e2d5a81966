"""The durable store: one SQLite file (WAL) holding sessions, turns, runs, steps, events
and change sets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .budgets import Budgets
from .changes import Changes
from .db import Database
from .leases import Leases
from .runs import Runs
from .search import Search
from .sessions import Sessions


class Store:
    """The store's aggregates over one database."""

    def __init__(self, path: str | Path, alive: Callable[[int], bool]) -> None:
        self.db = Database(path)
        self.leases = Leases(self.db, alive)
        self.sessions = Sessions(self.db)
        self.runs = Runs(self.db, self.leases)
        self.search = Search(self.db)
        self.changes = Changes(self.db, self.leases)
        self.budgets = Budgets(self.db)

    def close(self) -> None:
        self.db.close()


__all__ = ["Store"]
