"""Forks: a new session that owns a copy of another session's path to one turn.

The fork's turns, runs, steps, events, change sets and feed are copies under new ids, so the
fork needs nothing of its origin (which may be deleted later) and the origin is left as it
was. A change set's file contents are not copied: they are stored once for all sessions
(``blobs``), and a content stays while any session's change refers to it. The
fork's feed numbers the copied commits from 1, in the order the origin committed them; its
log records the copies as a store migrated in place does: each turn whole, in order. The
copy is a handful of set-wise statements through a temporary map of old ids to new ones, so
a long path costs little more than reading it.
"""

from __future__ import annotations

import apsw

from ..errors import Conflict, InvalidParams
from ..vocabulary import FeedKind, Outcome
from . import chain, feed
from .db import new_id

_COPY = (
    "INSERT INTO turn(id, session_id, parent_id, prompt, created_at)"
    " SELECT m.new_turn, :fork, p.new_turn, t.prompt, t.created_at"
    " FROM fork_map m JOIN turn t ON t.id = m.old_turn"
    " LEFT JOIN fork_map p ON p.old_turn = t.parent_id",
    "INSERT INTO run(id, turn_id, outcome, error, pid, started_at, ended_at, daemon_id, model)"
    " SELECT m.new_run, m.new_turn, r.outcome, r.error, r.pid, r.started_at, r.ended_at,"
    " r.daemon_id, r.model FROM fork_map m JOIN run r ON r.id = m.old_run",
    "INSERT INTO step(run_id, n, decision, prompt, text, tool_call, result, input_tokens,"
    " output_tokens, cached_tokens, created_at, cost)"
    " SELECT m.new_run, s.n, s.decision, s.prompt, s.text, s.tool_call, s.result,"
    " s.input_tokens, s.output_tokens, s.cached_tokens, s.created_at, s.cost"
    " FROM fork_map m JOIN step s ON s.run_id = m.old_run",
    "INSERT INTO event(run_id, seq, kind, step, detail, created_at)"
    " SELECT m.new_run, e.seq, e.kind, e.step, e.detail, e.created_at"
    " FROM fork_map m JOIN event e ON e.run_id = m.old_run",
    "INSERT INTO change(run_id, step, path, source, before_kind, before_sha256, before_size,"
    " after_kind, after_sha256, after_size, created_at)"
    " SELECT m.new_run, c.step, c.path, c.source, c.before_kind, c.before_sha256,"
    " c.before_size, c.after_kind, c.after_sha256, c.after_size, c.created_at"
    " FROM fork_map m JOIN change c ON c.run_id = m.old_run ORDER BY c.id",
    # A command's marks (``changes``): one change a path per command, so found by its place.
    "INSERT INTO change_share(change_id, session_id, turn_id)"
    " SELECT n.id, s.session_id, s.turn_id FROM fork_map m"
    " JOIN change c ON c.run_id = m.old_run JOIN change_share s ON s.change_id = c.id"
    " JOIN change n ON n.run_id = m.new_run AND n.step = c.step AND n.path = c.path"
    " AND n.source = c.source",
    "INSERT INTO feed(session_id, seq, kind, run_id, n, detail, created_at)"
    " SELECT :fork, row_number() OVER (ORDER BY f.seq), f.kind, m.new_run, f.n, f.detail,"
    " f.created_at FROM fork_map m JOIN feed f ON f.run_id = m.old_run"
    " WHERE f.session_id = :origin",
)


def copy_path(
    con: apsw.Connection,
    origin_id: str,
    turn_id: str | None,
    fork_id: str,
    step: int | None = None,
) -> str | None:
    """Inside a write transaction: copy the path from the first turn of ``origin_id`` to
    ``turn_id`` into session ``fork_id``; returns the copy of ``turn_id`` (the fork's head),
    None for an empty path. A turn still running is refused: its run is not whole yet. With
    ``step``, the copy of ``turn_id`` keeps only its first ``step`` steps (``cut``)."""
    if turn_id is None:
        if step is not None:
            raise InvalidParams("step needs a turnId to fork after", field="step")
        return None
    path = con.execute(
        "WITH RECURSIVE path(id, parent) AS ("
        "  SELECT id, parent_id FROM turn WHERE id = ? UNION ALL"
        "  SELECT turn.id, turn.parent_id FROM path JOIN turn ON turn.id = path.parent)"
        " SELECT path.id, run.id, run.outcome FROM path JOIN run ON run.turn_id = path.id",
        (turn_id,),
    ).fetchall()
    for turn, _, outcome in path:
        if outcome == Outcome.RUNNING:
            raise Conflict(
                f"turn {turn} is still running; fork from it once it has ended",
                sessionId=origin_id,
                turnId=turn,
            )
    ids = {turn: new_id("t") for turn, _, _ in path}
    runs = {turn: new_id("r") for turn, _, _ in path}
    con.execute(
        "CREATE TEMP TABLE fork_map (old_turn TEXT PRIMARY KEY, new_turn TEXT NOT NULL,"
        " old_run TEXT NOT NULL UNIQUE, new_run TEXT NOT NULL)"
    )
    try:
        con.executemany(
            "INSERT INTO fork_map VALUES (?, ?, ?, ?)",
            [(turn, ids[turn], run, runs[turn]) for turn, run, _ in path],
        )
        names = {"fork": fork_id, "origin": origin_id}
        for statement in _COPY:
            con.execute(statement, names)
    finally:
        con.execute("DROP TABLE temp.fork_map")
    if step is not None:
        cut(con, fork_id, turn_id, runs[turn_id], step)
    for turn, _, _ in reversed(path):  # the path is newest first
        chain.record_turn(con, fork_id, ids[turn])
    return ids[turn_id]


def cut(con: apsw.Connection, fork_id: str, turn_id: str, run_id: str, step: int) -> None:
    """Inside the fork's write, before its log records the copy: the fork's run ``run_id``
    (the copy of ``turn_id``) keeps its first ``step`` steps and what it committed before its
    next step began (events, and the changes of those steps), and ends ``forked``. A ``step``
    past the turn's steps is refused."""
    row = con.execute("SELECT count(*) FROM step WHERE run_id = ?", (run_id,)).fetchone()
    steps = int(row[0]) if row is not None else 0
    if step > steps:
        raise InvalidParams(
            f"step {step} is past the last step of turn {turn_id}, which has {steps}",
            field="step",
            turnId=turn_id,
            steps=steps,
        )
    # The feed orders everything the run committed: from its next step on (or, keeping every
    # step, from its end on) nothing is kept, nor an event of a later step.
    edge = _edge(con, fork_id, run_id, step, steps)
    con.execute(
        "DELETE FROM event WHERE run_id = ?1 AND (step > ?2 OR seq IN (SELECT n FROM feed"
        " WHERE session_id = ?3 AND run_id = ?1 AND kind = ?4 AND seq >= ?5))",
        (run_id, step, fork_id, FeedKind.EVENT, edge),
    )
    con.execute(
        "DELETE FROM feed WHERE session_id = ?1 AND run_id = ?2 AND (seq >= ?3"
        " OR (kind = ?4 AND n > ?5)"
        " OR (kind = ?6 AND n NOT IN (SELECT seq FROM event WHERE run_id = ?2)))",
        (fork_id, run_id, edge, FeedKind.STEP, step, FeedKind.EVENT),
    )
    con.execute("DELETE FROM step WHERE run_id = ? AND n > ?", (run_id, step))
    con.execute(
        "DELETE FROM change WHERE run_id = ? AND (step IS NULL OR step > ?)", (run_id, step)
    )
    con.execute("UPDATE run SET outcome = ?, error = NULL WHERE id = ?", (Outcome.FORKED, run_id))
    ended = con.execute("SELECT ended_at FROM run WHERE id = ?", (run_id,)).fetchone()
    end = {"outcome": Outcome.FORKED.value, "error": None}
    feed.append(con, fork_id, FeedKind.TURN_ENDED, run_id, detail=end, at=ended and ended[0])


def _edge(con: apsw.Connection, fork_id: str, run_id: str, step: int, steps: int) -> int:
    """The first feed entry of the run that a cut after ``step`` leaves out: its next step's,
    or (``step`` its last) its end's."""
    if step < steps:
        query = "SELECT seq FROM feed WHERE session_id = ? AND run_id = ? AND kind = ? AND n = ?"
        row = con.execute(query, (fork_id, run_id, FeedKind.STEP, step + 1)).fetchone()
    else:
        row = con.execute(
            "SELECT min(seq) FROM feed WHERE session_id = ?1 AND run_id = ?2 AND kind = ?3"
            " AND seq > coalesce((SELECT seq FROM feed WHERE session_id = ?1 AND run_id = ?2"
            " AND kind = ?4 AND n = ?5), 0)",
            (fork_id, run_id, FeedKind.TURN_ENDED, FeedKind.STEP, step),
        ).fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 2**62
