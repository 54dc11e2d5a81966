"""A session's budget: what all its turns together may spend, kept with the session (the
``budget`` column of ``session``), so it holds in every daemon and after a reopen."""

from __future__ import annotations

import json

from ..convert import structure, unstructure
from ..records import Budget, Spend
from .db import Database, now
from .sessions import LeaseTaker, Sessions


class Budgets:
    def __init__(self, db: Database) -> None:
        self.db = db

    def get(self, session_id: str) -> Budget | None:
        """The session's budget; None when it has none (``NotFound`` for no such session)."""
        with self.db.read() as con:
            Sessions._get(con, session_id)
            row = con.execute("SELECT budget FROM session WHERE id = ?", (session_id,)).fetchone()
        return None if row is None or row[0] is None else _budget(row[0])

    def spent(self, session_id: str) -> Spend:
        """What the session's turns have spent, summed by the store over their committed
        steps (each priced as it committed): a reopen or a turn's start reads no turn whole.
        The USD is unknown (``priced`` False) when no step that spent tokens has a price."""
        with self.db.read() as con:
            Sessions._get(con, session_id)
            row = con.execute(_SPENT, (session_id,)).fetchone()
        tokens, usd, spending, priced = row if row is not None else (0, 0.0, 0, 0)
        return Spend(int(tokens), float(usd), spending == 0 or priced > 0)

    def set(self, session_id: str, budget: Budget | None, writer: LeaseTaker) -> None:
        """A new budget for the session's turns from now on; None (or nothing capped): none."""
        stored = None
        if budget is not None and (budget.tokens is not None or budget.usd is not None):
            stored = json.dumps(unstructure(budget))
        with self.db.write() as con:
            Sessions._get(con, session_id)
            writer.acquire(con, session_id)
            con.execute(
                "UPDATE session SET budget = ?, updated_at = ? WHERE id = ?",
                (stored, now(), session_id),
            )


_SPENT = """
    SELECT coalesce(sum(coalesce(s.input_tokens, 0) + coalesce(s.output_tokens, 0)), 0),
           coalesce(sum(s.cost), 0.0),
           count(CASE WHEN coalesce(s.input_tokens, 0) + coalesce(s.output_tokens, 0) > 0
                 THEN 1 END),
           count(CASE WHEN coalesce(s.input_tokens, 0) + coalesce(s.output_tokens, 0) > 0
                 AND s.cost IS NOT NULL THEN 1 END)
    FROM turn t JOIN run r ON r.turn_id = t.id JOIN step s ON s.run_id = r.id
    WHERE t.session_id = ?
"""


def _budget(stored: str) -> Budget:
    budget: Budget = structure(json.loads(stored), Budget, "budget")
    return budget
