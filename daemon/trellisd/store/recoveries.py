"""Recoveries: the turns whose cancel had to kill a running command, and the decisions taken.

A cancel that kills a program mid-run records an event ``recovery`` (``{tool, argv}``) on the
turn's run; the person's decision (``session/recover``) records an event ``recovered``
(``{decision}``) on the same run. Both are events, so they are in the session's feed and its
log like any other, they go with a fork and a session file, and every daemon on the store
sees them. A session waits for a decision while one of its runs has a ``recovery`` with no
``recovered`` after it.
"""

from __future__ import annotations

import json
from typing import Any

import apsw

from ..records import Recovery
from ..vocabulary import EventKind

NEEDED, DECIDED = EventKind.RECOVERY, EventKind.RECOVERED


def of_run(turn_id: str, run_id: str, detail: str | None) -> Recovery | None:
    """The recovery of a run, from the detail of its ``recovery`` event (None: it has none)."""
    if detail is None:
        return None
    fields: dict[str, Any] = json.loads(detail)
    return Recovery(turn_id, run_id, str(fields["tool"]), tuple(fields["argv"]))


def pending(con: apsw.Connection, session_id: str) -> Recovery | None:
    """The session's turn waiting for a decision, if one is. The store's few ``recovery``
    events are read first (their index), not the session's turns, however many it has."""
    row = con.execute(
        "SELECT t.id, r.id, e.detail FROM event e CROSS JOIN run r ON r.id = e.run_id"
        " CROSS JOIN turn t ON t.id = r.turn_id"
        f" WHERE e.kind = '{NEEDED}' AND t.session_id = ? AND NOT EXISTS (SELECT 1 FROM event d"
        f"  WHERE d.run_id = e.run_id AND d.kind = '{DECIDED}' AND d.seq > e.seq)"
        " ORDER BY e.created_at DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    return None if row is None else of_run(row[0], row[1], row[2])
