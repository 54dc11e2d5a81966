"""What a step cost, recorded as it commits: the ledger prices each step once, with its run's
model and the price table (``pricing``), and a turn's cost is the sum of its steps' (unknown
when any step's is). What reads a turn reads its cost; nothing prices it again."""

from __future__ import annotations

from typing import Any

import apsw

from ..pricing import cost
from ..records import Tokens


def of_step(con: apsw.Connection, run_id: str, tokens: Tokens) -> float | None:
    """The cost of a step of ``run_id`` that used ``tokens``; None when it is unknown."""
    row = con.execute("SELECT model FROM run WHERE id = ?", (run_id,)).fetchone()
    return cost(None if row is None else row[0], tokens)


def fill(con: apsw.Connection) -> None:
    """Price the steps recorded before steps carried their cost (inside the migration that
    adds the column)."""
    rows: list[tuple[Any, ...]] = con.execute(
        "SELECT s.rowid, r.model, s.input_tokens, s.output_tokens, s.cached_tokens"
        " FROM step s JOIN run r ON r.id = s.run_id WHERE s.cost IS NULL"
    ).fetchall()
    priced = [
        (value, rowid)
        for rowid, model, *figures in rows
        if (value := cost(model, Tokens(*figures))) is not None
    ]
    con.executemany("UPDATE step SET cost = ? WHERE rowid = ?", priced)
