"""Runs: what a turn's run did, read back from the store."""

from __future__ import annotations

from ..records import Event, RunSummary, Step
from ..store.facade import AsyncStore


class RunService:
    def __init__(self, store: AsyncStore) -> None:
        self.store = store

    async def summary(self, run_id: str) -> RunSummary:
        return await self.store.runs.summary(run_id)

    async def steps(self, run_id: str) -> list[Step]:
        return await self.store.runs.steps(run_id)

    async def events(self, run_id: str) -> list[Event]:
        return await self.store.runs.events(run_id)

    async def events_page(
        self, run_id: str, after: int, limit: int
    ) -> tuple[list[Event], int | None]:
        """The run's events after ``after``, ``limit`` at most (-1: all), and the ``after``
        that reads on when more are recorded already."""
        return await self.store.runs.events_page(run_id, after, limit)
