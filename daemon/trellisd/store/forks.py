"""Forks: a new session that owns a copy of another session's path to one turn.

The fork's turns, runs, steps and events are copies under new ids, so the fork needs nothing
of its origin, and the origin is left as it was. The fork's log records the copies as a store
migrated in place does: each turn whole, in order.
"""

from __future__ import annotations

import uuid

import apsw

from ..errors import Conflict
from ..records import Turn
from ..vocabulary import Outcome
from . import chain


def copy_path(con: apsw.Connection, path: list[Turn], fork_id: str) -> str | None:
    """Inside a write transaction: copy ``path`` (oldest first) into session ``fork_id`` and
    log the copies; returns the copy of its last turn (the fork's head), None for an empty
    path. A turn still running is refused: its run is not whole yet."""
    parent: str | None = None
    for turn in path:
        if turn.outcome == Outcome.RUNNING:
            raise Conflict(
                f"turn {turn.turn_id} is still running; fork from it once it has ended",
                sessionId=turn.session_id,
                turnId=turn.turn_id,
            )
        turn_id, run_id = f"t-{uuid.uuid4().hex}", f"r-{uuid.uuid4().hex}"
        con.execute(
            "INSERT INTO turn(id, session_id, parent_id, prompt, created_at)"
            " SELECT ?, ?, ?, prompt, created_at FROM turn WHERE id = ?",
            (turn_id, fork_id, parent, turn.turn_id),
        )
        con.execute(
            "INSERT INTO run(id, turn_id, outcome, error, pid, started_at, ended_at, daemon_id,"
            " model) SELECT ?, ?, outcome, error, pid, started_at, ended_at, daemon_id, model"
            " FROM run WHERE id = ?",
            (run_id, turn_id, turn.run_id),
        )
        con.execute(
            "INSERT INTO step(run_id, n, decision, prompt, text, tool_call, result,"
            " input_tokens, output_tokens, cached_tokens, created_at)"
            " SELECT ?, n, decision, prompt, text, tool_call, result, input_tokens,"
            " output_tokens, cached_tokens, created_at FROM step WHERE run_id = ?",
            (run_id, turn.run_id),
        )
        con.execute(
            "INSERT INTO event(run_id, seq, kind, step, detail, created_at)"
            " SELECT ?, seq, kind, step, detail, created_at FROM event WHERE run_id = ?",
            (run_id, turn.run_id),
        )
        chain.record_turn(con, fork_id, turn_id)
        parent = turn_id
    return parent
