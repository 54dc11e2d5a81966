"""Budgets as the services see them: a session's budget and spend, and the ledger a turn's
model calls are admitted by (``agent.budget``)."""

from __future__ import annotations

from ..agent.budget import Ledger
from ..records import Budget, Spend
from ..store.facade import AsyncStore


class BudgetService:
    def __init__(self, store: AsyncStore) -> None:
        self.store = store

    async def status(self, session_id: str) -> tuple[Budget | None, Spend]:
        """The session's budget (None: none) and what its turns have spent."""
        budget = await self.store.budgets.get(session_id)
        return budget, await self.store.budgets.spent(session_id)

    async def set(self, session_id: str, budget: Budget | None) -> tuple[Budget | None, Spend]:
        """A new budget for the session (None: none), for its turns from the next call on."""
        await self.store.budgets.set(session_id, budget)
        return await self.status(session_id)

    async def ledger(
        self, session_id: str, model: str, turn: Budget | None, parent: Ledger | None = None
    ) -> Ledger | None:
        """What the turn's calls are admitted by; None when neither it, its session nor the
        turn that started it (``parent``: a child session's, ``services.tasks``) has a
        budget. The running turn's own figures are not in the session's spend yet."""
        session, spent = await self.status(session_id)
        if turn is None and session is None and parent is None:
            return None
        return Ledger(model, turn, session, spent, parent)
