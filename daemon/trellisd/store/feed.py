"""A session's feed: one numbered entry per commit, in the order they were committed.

Each write that commits part of a turn (its start, a step, an event, its end) appends an
entry in the same transaction, numbered from 1 within the session. An entry points at the
row it committed; a turn's end keeps the outcome it ended with, since a resumed run ends
again. A reader sees exactly the committed prefix: an entry and its row commit together.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import apsw

from ..errors import StoreError
from ..records import FeedEntry
from ..vocabulary import FeedKind, Outcome
from .db import Database, now
from .rows import event_of, step_of

log = logging.getLogger(__name__)


def append(
    con: apsw.Connection,
    session_id: str,
    kind: FeedKind,
    run_id: str,
    n: int | None = None,
    detail: dict[str, Any] | None = None,
    at: str | None = None,
) -> int:
    """Inside a write transaction: the session's next entry; returns its number. ``n``: the
    step's number or the event's sequence number within the run."""
    row = con.execute(
        "SELECT coalesce(max(seq), 0) + 1 FROM feed WHERE session_id = ?", (session_id,)
    ).fetchone()
    assert row is not None  # an aggregate always answers one row
    seq = int(row[0])
    con.execute(
        "INSERT INTO feed(session_id, seq, kind, run_id, n, detail, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        (
            session_id,
            seq,
            kind,
            run_id,
            n,
            None if detail is None else json.dumps(detail),
            at or now(),
        ),
    )
    return seq


_ENTRY_SELECT = """
    SELECT f.seq, f.kind, t.id, f.run_id, f.created_at, f.detail, t.prompt, t.parent_id,
           s.n, s.decision, s.prompt, s.text, s.tool_call, s.result,
           s.input_tokens, s.output_tokens, s.cached_tokens,
           e.seq, e.kind, e.step, e.detail, e.created_at
    FROM feed f
    JOIN run r ON r.id = f.run_id
    JOIN turn t ON t.id = r.turn_id
    LEFT JOIN step s ON f.kind = 'step' AND s.run_id = f.run_id AND s.n = f.n
    LEFT JOIN event e ON f.kind = 'event' AND e.run_id = f.run_id AND e.seq = f.n
"""


def page(
    con: apsw.Connection, session_id: str, after: int, limit: int
) -> tuple[list[FeedEntry], int | None]:
    """The session's entries numbered after ``after``, at most ``limit``, and the number to
    read on from (the last one given) when more are committed already, else None."""
    rows: list[tuple[Any, ...]] = con.execute(
        _ENTRY_SELECT + " WHERE f.session_id = ? AND f.seq > ? ORDER BY f.seq LIMIT ?",
        (session_id, after, limit + 1),
    ).fetchall()
    entries = []
    for row in rows[:limit]:
        seq, kind, turn_id, run_id, at, detail = row[:6]
        end = json.loads(detail) if detail is not None else {}
        entries.append(
            FeedEntry(
                seq=int(seq),
                kind=FeedKind(kind),
                turn_id=str(turn_id),
                run_id=str(run_id),
                created_at=str(at),
                prompt=row[6] if kind == FeedKind.TURN_STARTED else None,
                parent_turn_id=row[7] if kind == FeedKind.TURN_STARTED else None,
                step=step_of(row[8:17]) if kind == FeedKind.STEP else None,
                event=event_of(row[17:22]) if kind == FeedKind.EVENT else None,
                outcome=None if end.get("outcome") is None else Outcome(end["outcome"]),
                error=end.get("error"),
            )
        )
    more = len(rows) > limit
    return entries, entries[-1].seq if more else None


def build_session(con: apsw.Connection, session_id: str) -> None:
    """Inside the write that wrote a whole session without its feed (an import): its feed, one
    entry per row in the order they were written, as a migration fills older stores' feeds:
    each turn started, its steps and events (a step before an event of the same moment, as
    the session's log has them), its end."""
    con.execute(
        """
        INSERT INTO feed(session_id, seq, kind, run_id, n, detail, created_at)
        SELECT ?1, row_number() OVER (ORDER BY created_at, turn_order, rank, n),
               kind, run_id, n, detail, created_at
        FROM (
            SELECT 'turnStarted' AS kind, r.id AS run_id, NULL AS n, NULL AS detail,
                   t.created_at, t.rowid AS turn_order, 0 AS rank
            FROM turn t JOIN run r ON r.turn_id = t.id WHERE t.session_id = ?1
            UNION ALL
            SELECT 'step', s.run_id, s.n, NULL, s.created_at, t.rowid, 1
            FROM step s JOIN run r ON r.id = s.run_id JOIN turn t ON t.id = r.turn_id
            WHERE t.session_id = ?1
            UNION ALL
            SELECT 'event', e.run_id, e.seq, NULL, e.created_at, t.rowid, 2
            FROM event e JOIN run r ON r.id = e.run_id JOIN turn t ON t.id = r.turn_id
            WHERE t.session_id = ?1
            UNION ALL
            SELECT 'turnEnded', r.id, NULL, json_object('outcome', r.outcome, 'error', r.error),
                   r.ended_at, t.rowid, 3
            FROM run r JOIN turn t ON t.id = r.turn_id
            WHERE t.session_id = ?1 AND r.ended_at IS NOT NULL
        )
        """,
        (session_id,),
    )


_UNFED = (
    "SELECT s.id FROM session s WHERE EXISTS (SELECT 1 FROM turn t WHERE t.session_id = s.id)"
    " AND NOT EXISTS (SELECT 1 FROM feed f WHERE f.session_id = s.id)"
)


def fill_missing(db: Database) -> None:
    """Give the sessions that have turns but no feed theirs: those imported before imports
    wrote one. A read finds them; a write only when there are some (nothing in a store only
    read)."""
    if db.read_only:
        return
    try:
        with db.read() as con:
            if con.execute(_UNFED + " LIMIT 1").fetchone() is None:
                return
        with db.write() as con:
            unfed: list[tuple[Any, ...]] = con.execute(_UNFED).fetchall()
            for (session_id,) in unfed:
                build_session(con, str(session_id))
    except StoreError as exc:  # the feeds can wait for the next open; the store serves
        log.warning("the sessions without a feed keep none for now: %s", exc.message)
