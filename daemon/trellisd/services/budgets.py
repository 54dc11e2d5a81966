"""Budgets as the services see them: a session's budget and spend, and the ledger a turn's
model calls are admitted by (``agent.budget``)."""

from __future__ import annotations

import dataclasses

from ..agent.budget import Ledger, spend_of
from ..pricing import cost
from ..records import Budget, Spend, Turn
from ..store.facade import AsyncStore


class BudgetService:
    def __init__(self, store: AsyncStore) -> None:
        self.store = store

    async def status(self, session_id: str) -> tuple[Budget | None, Spend]:
        """The session's budget (None: none) and what its turns have spent."""
        budget = await self.store.budgets.get(session_id)
        turns = await self.store.sessions.turns(session_id)
        return budget, dataclasses.replace(spend_of(turns), priced=_priced(turns))

    async def set(self, session_id: str, budget: Budget | None) -> tuple[Budget | None, Spend]:
        """A new budget for the session (None: none), for its turns from the next call on."""
        await self.store.budgets.set(session_id, budget)
        return await self.status(session_id)

    async def ledger(self, session_id: str, model: str, turn: Budget | None) -> Ledger | None:
        """What the turn's calls are admitted by; None when neither it nor its session has a
        budget. The running turn's own figures are not in the session's spend yet."""
        session, spent = await self.status(session_id)
        if turn is None and session is None:
            return None
        return Ledger(model, turn, session, spent)


def _priced(turns: list[Turn]) -> bool:
    """Whether the USD the turns spent is known: none spent tokens, or one whose price is
    known did (the others count no USD)."""
    spending = [t for t in turns if (t.tokens.input or 0) + (t.tokens.output or 0) > 0]
    return not spending or any(cost(t.model, t.tokens) is not None for t in spending)
