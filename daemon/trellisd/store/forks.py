"""Forks: a new session that owns a copy of another session's path to one turn.

The fork's turns, runs, steps, events and feed are copies under new ids, so the fork needs
nothing of its origin (which may be deleted later) and the origin is left as it was. The
fork's feed numbers the copied commits from 1, in the order the origin committed them.
"""

from __future__ import annotations

from typing import Any

import apsw

from ..errors import Conflict
from ..records import Turn
from ..vocabulary import Outcome
from .db import new_id, now


def copy_path(con: apsw.Connection, path: list[Turn], fork_id: str) -> str | None:
    """Inside a write transaction: copy ``path`` (oldest first) into session ``fork_id``;
    returns the copy of its last turn (the fork's head), None for an empty path. A turn
    still running is refused: its run is not whole yet."""
    runs: dict[str, str] = {}
    parent: str | None = None
    for turn in path:
        if turn.outcome == Outcome.RUNNING:
            raise Conflict(
                f"turn {turn.turn_id} is still running; fork from it once it has ended",
                sessionId=turn.session_id,
                turnId=turn.turn_id,
            )
        turn_id, run_id = new_id("t"), new_id("r")
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
        runs[turn.run_id] = run_id
        parent = turn_id
    _copy_feed(con, path[0].session_id if path else "", runs, fork_id)
    return parent


def _copy_feed(con: apsw.Connection, origin_id: str, runs: dict[str, str], fork_id: str) -> None:
    if not runs:
        return
    marks = ",".join("?" * len(runs))
    rows: list[tuple[Any, ...]] = con.execute(
        "SELECT kind, run_id, n, detail, created_at FROM feed"
        f" WHERE session_id = ? AND run_id IN ({marks}) ORDER BY seq",
        (origin_id, *runs),
    ).fetchall()
    con.executemany(
        "INSERT INTO feed(session_id, seq, kind, run_id, n, detail, created_at)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (fork_id, seq, kind, runs[run_id], n, detail, at or now())
            for seq, (kind, run_id, n, detail, at) in enumerate(rows, 1)
        ],
    )
