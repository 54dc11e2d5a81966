"""The durable store: one SQLite file (WAL) holding sessions, turns, runs, steps and events."""

from __future__ import annotations

from pathlib import Path

from .db import Database
from .runs import Runs
from .sessions import Sessions


class Store:
    """The store's aggregates over one database."""

    def __init__(self, path: str | Path) -> None:
        self.db = Database(path)
        self.sessions = Sessions(self.db)
        self.runs = Runs(self.db)

    def close(self) -> None:
        self.db.close()


__all__ = ["Store"]
