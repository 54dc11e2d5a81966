"""Each session's log: every fact committed about it, in order, each entry's hash chained to
the one before, so that a row edited, deleted, reordered or inserted by hand is found.

An entry is one fact: the session opened (``session``), a turn started (``turn``, ``run``),
a step or an event committed (``step``, ``event``), a file a step changed (``change``, naming
the contents before and after by SHA-256), a run ended or resumed (``end``, ``resume``), the
head moved (``branch``), the title set (``title``), the standing instructions set
(``instructions``), a turn pinned or unpinned (``pin``, ``unpin``). Its hash is
``SHA-256(previous hash ‖ canonical bytes)``, the first entry's previous hash being 32 zero
bytes. The canonical bytes are RFC 8785 JSON (keys sorted, no whitespace, UTF-8) of an object
whose values are only strings, integers and ``null``: JSON held in a row (a step's tool call,
an event's detail) is carried as the string stored, never re-encoded.

Entries about a row (``session``, ``turn``, ``run``, ``step``, ``event``, ``change``) are not
copied into the log: their bytes are computed from the row itself, so an edited row no longer
matches its hash. Entries about a change of state (``end``, ``resume``, ``branch``, ``title``,
``instructions``, ``pin``, ``unpin``) keep their bytes in the log, and the state they leave (a
run's outcome, the session's head, title, instructions and pinned turns) is checked against
the rows. Entries are appended
inside the transaction that writes their row, as the session's feed (``feed.py``, what
``session/events`` pages) is: the feed is for following a session, the log for proving it.
``protocol/store.md`` (*The session log*) specifies the encoding for other programs.

A session imported from a file without a log gets one computed over what was imported, ending
in an ``absent`` entry: its history before it was never proven, so the session verifies
``ok`` but not ``verified``. Whoever can write the store can also recompute a whole log with
this module: each head the log reaches on a connection is kept (``moved``) for the store to
anchor outside it, signed (``anchors.py``).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import apsw

GENESIS = bytes(32)
TAIL = 8  # entries a reopen checks

_moved: dict[int, dict[str, Head]] = {}
"""Per connection (by id), the heads its writes moved each session's log to since the store
last asked (``moved``); committed or rolled back, so the store checks before it trusts one."""


_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical(value: dict[str, Any]) -> bytes:
    """RFC 8785 bytes of an object of strings, integers and nulls."""
    return _ENCODER.encode(value).encode()


def link(previous: bytes, body: bytes) -> bytes:
    return hashlib.sha256(previous + body).digest()


@dataclass(frozen=True)
class Head:
    """Where a session's log stood after a write: its last entry's number and hash, and
    whether that write began the log (a session created, forked or imported)."""

    seq: int
    hash: str
    begun: bool = False


def moved(con: apsw.Connection) -> dict[str, Head]:
    """The heads the writes on ``con`` moved sessions' logs to since last asked."""
    return _moved.pop(id(con), {})


@dataclass(frozen=True)
class _RowKind:
    """How entries of one kind are read from their rows: every row of a session, or one."""

    columns: str
    source: str  # the FROM ... of the rows of one session (``?``: its id)
    key: str  # the WHERE that picks one row by its ref's parts
    ref: Callable[[tuple[Any, ...]], str]
    body: Callable[[tuple[Any, ...]], dict[str, Any]]
    split: Callable[[str], tuple[Any, ...]]


def _one(ref: str) -> tuple[str]:
    return (ref,)


def _number(ref: str) -> tuple[int]:
    return (int(ref),)


def _pair(ref: str) -> tuple[str, int]:
    run_id, _, number = ref.rpartition("/")
    return run_id, int(number)


_RUNS_OF = "run r JOIN turn t ON t.id = r.turn_id WHERE t.session_id = ?"
_OF_RUNS = "JOIN run r ON r.id = {}.run_id JOIN turn t ON t.id = r.turn_id WHERE t.session_id = ?"

ROW_KINDS: dict[str, _RowKind] = {
    "session": _RowKind(
        "s.id, s.root, s.created_at, s.settings, s.policy, s.forked_from, s.forked_turn",
        "session s WHERE s.id = ?",
        "s.id = ?",
        lambda r: str(r[0]),
        lambda r: {
            "kind": "session",
            "sessionId": r[0],
            "root": r[1],
            "createdAt": r[2],
            "provider": r[3],
            "policy": r[4],
            "forkedFrom": r[5],
            "forkedTurnId": r[6],
        },
        _one,
    ),
    "turn": _RowKind(
        "t.id, t.session_id, t.parent_id, t.prompt, t.created_at",
        "turn t WHERE t.session_id = ?",
        "t.id = ?",
        lambda r: str(r[0]),
        lambda r: {
            "kind": "turn",
            "turnId": r[0],
            "sessionId": r[1],
            "parentTurnId": r[2],
            "prompt": r[3],
            "createdAt": r[4],
        },
        _one,
    ),
    "run": _RowKind(
        "r.id, r.turn_id, r.started_at, r.model",
        _RUNS_OF,
        "r.id = ?",
        lambda r: str(r[0]),
        lambda r: {
            "kind": "run",
            "runId": r[0],
            "turnId": r[1],
            "startedAt": r[2],
            "model": r[3],
        },
        _one,
    ),
    "step": _RowKind(
        "s.run_id, s.n, s.decision, s.prompt, s.text, s.tool_call, s.result, s.input_tokens,"
        " s.output_tokens, s.cached_tokens, s.created_at",
        "step s " + _OF_RUNS.format("s"),
        "s.run_id = ? AND s.n = ?",
        lambda r: f"{r[0]}/{r[1]}",
        lambda r: {
            "kind": "step",
            "runId": r[0],
            "step": r[1],
            "decision": r[2],
            "prompt": r[3],
            "text": r[4],
            "toolCall": r[5],
            "result": r[6],
            "inputTokens": r[7],
            "outputTokens": r[8],
            "cachedTokens": r[9],
            "createdAt": r[10],
        },
        _pair,
    ),
    "event": _RowKind(
        "e.run_id, e.seq, e.kind, e.step, e.detail, e.created_at",
        "event e " + _OF_RUNS.format("e"),
        "e.run_id = ? AND e.seq = ?",
        lambda r: f"{r[0]}/{r[1]}",
        lambda r: {
            "kind": "event",
            "runId": r[0],
            "seq": r[1],
            "eventKind": r[2],
            "step": r[3],
            "detail": r[4],
            "createdAt": r[5],
        },
        _pair,
    ),
    "change": _RowKind(
        "c.id, c.run_id, c.step, c.path, c.source, c.before_kind, c.before_sha256,"
        " c.before_size, c.after_kind, c.after_sha256, c.after_size, c.created_at",
        "change c " + _OF_RUNS.format("c"),
        "c.id = ?",
        lambda r: str(r[0]),
        lambda r: {
            "kind": "change",
            "changeId": r[0],
            "runId": r[1],
            "step": r[2],
            "path": r[3],
            "source": r[4],
            "beforeKind": r[5],
            "beforeSha256": r[6],
            "beforeSize": r[7],
            "afterKind": r[8],
            "afterSha256": r[9],
            "afterSize": r[10],
            "createdAt": r[11],
        },
        _number,
    ),
}
STATE_KINDS = ("end", "resume", "branch", "title", "instructions", "pin", "unpin", "absent")
_PIN_KINDS = ("pin", "unpin")  # kept per turn pinned
_SESSION_STATES = ("branch", "title", "instructions", "absent")  # per session, not per run


def _source(kind: _RowKind) -> str:
    """The table of one row of ``kind``, found by its key."""
    table, alias, _ = kind.source.split(" ", 2)
    return f"{table} {alias}"


def _row_body(con: apsw.Connection, kind: str, ref: str) -> bytes | None:
    spec = ROW_KINDS[kind]
    row = con.execute(
        f"SELECT {spec.columns} FROM {_source(spec)} WHERE {spec.key}", spec.split(ref)
    ).fetchone()
    return None if row is None else canonical(spec.body(row))


def _tail(con: apsw.Connection, session_id: str) -> tuple[int, bytes]:
    row = con.execute(
        "SELECT seq, hash FROM chain WHERE session_id = ? ORDER BY seq DESC LIMIT 1",
        (session_id,),
    ).fetchone()
    return (0, GENESIS) if row is None else (int(row[0]), bytes.fromhex(row[1]))


def _append(
    con: apsw.Connection, session_id: str, kind: str, ref: str, body: bytes, kept: bytes | None
) -> str:
    seq, previous = _tail(con, session_id)
    digest = link(previous, body).hex()
    con.execute(
        "INSERT INTO chain(session_id, seq, kind, ref, body, hash) VALUES (?, ?, ?, ?, ?, ?)",
        (session_id, seq + 1, kind, ref, kept, digest),
    )
    con.execute("UPDATE session SET head_hash = ? WHERE id = ?", (digest, session_id))
    heads = _moved.setdefault(id(con), {})
    begun = kind == "session" or (session_id in heads and heads[session_id].begun)
    heads[session_id] = Head(seq + 1, digest, begun)
    return digest


def record(con: apsw.Connection, session_id: str, kind: str, ref: str) -> str:
    """Inside the transaction that wrote it: log the row ``ref`` of ``kind``."""
    body = _row_body(con, kind, ref)
    assert body is not None, f"the {kind} row {ref} was just written"
    return _append(con, session_id, kind, ref, body, None)


def record_state(
    con: apsw.Connection, session_id: str, kind: str, ref: str, fields: dict[str, Any]
) -> str:
    """Inside the transaction that made it: log a change of state (``STATE_KINDS``)."""
    body = canonical({"kind": kind, **fields})
    return _append(con, session_id, kind, ref, body, body)


def end_fields(run_id: str, outcome: str, error: str | None, at: str | None) -> dict[str, Any]:
    return {"runId": run_id, "outcome": outcome, "error": error, "endedAt": at}


def record_setting(con: apsw.Connection, session_id: str, kind: str, value: str | None) -> str:
    """Inside the write that set it: log the session's ``title`` or ``instructions``."""
    return record_state(con, session_id, kind, session_id, {"sessionId": session_id, kind: value})


@dataclass(frozen=True)
class BadEntry:
    seq: int | None  # None: a row that no entry records
    kind: str
    id: str


@dataclass(frozen=True)
class LogVerdict:
    """What checking a session's log found: all of it sound, or the first bad entry.
    ``absent``: the log holds an ``absent`` entry (its session came from a file without a
    log); ``anchored``: its head was checked against one this user's key signed, and
    ``rewritten`` when that check failed."""

    ok: bool
    entries: int
    head_hash: str | None
    first_bad: BadEntry | None = None
    reason: str | None = None
    absent: bool = False
    anchored: bool = False
    rewritten: bool = False

    @property
    def verified(self) -> bool:
        """Sound, and proven from the session's first entry."""
        return self.ok and not self.absent

    @property
    def check(self) -> str | None:
        """Why not ``verified``: ``anchor``, ``log`` or ``absent``."""
        if self.verified:
            return None
        return "anchor" if self.rewritten else "log" if not self.ok else "absent"


@dataclass(frozen=True)
class _Problem:
    order: float
    bad: BadEntry
    reason: str

    def __init__(self, order: float, bad: BadEntry | _Lazy, reason: str) -> None:
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "bad", bad.entry() if isinstance(bad, _Lazy) else bad)
        object.__setattr__(self, "reason", reason)


class _Lazy:
    """An entry's key, made a ``BadEntry`` only if it is bad (the check loop makes many)."""

    __slots__ = ("seq", "kind", "ref")

    def __init__(self, seq: Any, kind: Any, ref: Any) -> None:
        self.seq, self.kind, self.ref = seq, kind, ref

    def entry(self) -> BadEntry:
        return BadEntry(int(self.seq), str(self.kind), str(self.ref))


def verify(con: apsw.Connection, session_id: str) -> LogVerdict:
    """Check every entry of the session's log against its hash and its row, every row
    against the log, and the state the log leaves against the rows. Call inside a read."""
    rows: dict[tuple[str, str], bytes] = {}
    for kind, spec in ROW_KINDS.items():
        for row in con.execute(f"SELECT {spec.columns} FROM {spec.source}", (session_id,)):
            rows[kind, spec.ref(row)] = canonical(spec.body(row))
    entries: list[tuple[Any, ...]] = con.execute(
        "SELECT seq, kind, ref, body, hash FROM chain WHERE session_id = ? ORDER BY seq",
        (session_id,),
    ).fetchall()
    problems: list[_Problem] = []
    previous, last_hash = GENESIS, None
    state: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
    head: tuple[int, str, str, str | None] | None = None
    sha256 = hashlib.sha256
    for index, (seq, kind, ref, kept, stored) in enumerate(entries, 1):
        bad = _Lazy(seq, kind, ref)
        if seq != index:
            problems.append(_Problem(index, bad, f"entry {seq} stands where entry {index} should"))
            break
        if kind in ROW_KINDS:
            body = rows.pop((kind, ref), None)
            if body is None:
                problems.append(_Problem(seq, bad, f"its {kind} row is missing"))
                break
        elif kept is not None:
            # A state entry; or one of a kind a later build writes, checked by its hash alone,
            # so that what a newer build adds to a log keeps an older one verifying it.
            body = bytes(kept)
        else:
            problems.append(_Problem(seq, bad, f"the log holds an unknown entry kind {kind!r}"))
            break
        digest = sha256(previous + body).digest()
        if digest.hex() != stored:
            problems.append(
                _Problem(
                    seq,
                    bad,
                    f"its {kind} does not match its hash: it was changed,"
                    " or an entry before it was",
                )
            )
            break
        previous = digest
        last_hash = stored
        if kind == "turn":
            head = (seq, kind, ref, ref)
        elif kind in STATE_KINDS:
            fields = json.loads(body)
            key = "pin" if kind in _PIN_KINDS else kind if kind in _SESSION_STATES else "run"
            state[key, ref] = (seq, fields)
            if kind == "branch":
                head = (seq, kind, ref, fields["head"])
    else:
        problems += _unrecorded(rows)
        problems += _state(con, session_id, len(entries), last_hash, state, head)
    absent = ("absent", session_id) in state
    if not problems:
        return LogVerdict(True, len(entries), last_hash, absent=absent)
    first = min(problems, key=lambda p: p.order)
    return LogVerdict(False, len(entries), last_hash, first.bad, first.reason, absent)


def _unrecorded(rows: dict[tuple[str, str], bytes]) -> list[_Problem]:
    return [
        _Problem(float("inf"), BadEntry(None, kind, ref), f"its {kind} row is in no log entry")
        for kind, ref in rows
    ]


def _state(
    con: apsw.Connection,
    session_id: str,
    count: int,
    last_hash: str | None,
    state: dict[tuple[str, str], tuple[int, dict[str, Any]]],
    head: tuple[int, str, str, str | None] | None,
) -> list[_Problem]:
    """The session's head, title and head hash, and each run's end, as the log leaves them."""
    problems: list[_Problem] = []
    row = con.execute(
        "SELECT head, title, head_hash, instructions FROM session WHERE id = ?", (session_id,)
    ).fetchone()
    if row is None:
        return problems
    if row[2] != last_hash:
        problems.append(
            _Problem(
                count + 0.5,
                BadEntry(count or None, "session", session_id),
                "the session's head hash is not the hash of its last entry",
            )
        )
    logged_head = None if head is None else head[3]
    if row[0] != logged_head:
        seq, kind, ref = (count, "branch", session_id) if head is None else head[:3]
        problems.append(
            _Problem(
                seq,
                BadEntry(seq or None, kind, ref),
                f"the session's head is {row[0]} but its log says {logged_head}",
            )
        )
    for kind, held, unset in (("title", row[1], ""), ("instructions", row[3], None)):
        set_at = state.get((kind, session_id))
        logged = unset if set_at is None else set_at[1][kind]
        if held != logged:
            seq = 1 if set_at is None else set_at[0]
            problems.append(
                _Problem(
                    seq,
                    BadEntry(seq, kind, session_id),
                    f"the session's {kind} is {held!r} but its log says {logged!r}",
                )
            )
    problems += _pins(con, session_id, state)
    runs: list[tuple[Any, ...]] = con.execute(
        "SELECT r.id, r.outcome, r.error, r.ended_at FROM " + _RUNS_OF, (session_id,)
    ).fetchall()
    for run_id, outcome, error, ended_at in runs:
        logged = state.get(("run", run_id))
        fields = logged[1] if logged is not None else {}
        want = (fields.get("outcome", "running"), fields.get("error"), fields.get("endedAt"))
        if (outcome, error, ended_at) != want:
            at = None if logged is None else logged[0]
            problems.append(
                _Problem(
                    at or float("inf"),
                    BadEntry(at, "end", run_id),
                    f"run {run_id} says {outcome} but its log says {want[0]}",
                )
            )
    return problems


def _pins(
    con: apsw.Connection, session_id: str, state: dict[tuple[str, str], tuple[int, dict[str, Any]]]
) -> list[_Problem]:
    """The session's pinned turns, as its last ``pin`` or ``unpin`` of each turn leaves them
    (where the pins are kept: a session file's are not)."""
    kept = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'pin'"
    if con.execute(kept).fetchone() is None:
        return []
    held = {
        str(r[0])
        for r in con.execute("SELECT turn_id FROM pin WHERE session_id = ?", (session_id,))
    }
    problems = []
    logged = {
        ref: (seq, f["kind"] == "pin") for (key, ref), (seq, f) in state.items() if key == "pin"
    }
    for turn_id in sorted(held | set(logged)):
        seq, pinned = logged.get(turn_id, (None, False))
        if (turn_id in held) != pinned:
            held_word, says = ("not pinned", "pinned") if pinned else ("pinned", "not pinned")
            problems.append(
                _Problem(
                    seq or float("inf"),
                    BadEntry(seq, "pin", turn_id),
                    f"turn {turn_id} is {held_word} but its log says {says}",
                )
            )
    return problems


def tail_sound(con: apsw.Connection, session_id: str) -> bool:
    """A cheap check for a reopen: the last ``TAIL`` entries against their rows and hashes,
    the head hash, and as many row entries as rows."""
    entries: list[tuple[Any, ...]] = con.execute(
        "SELECT seq, kind, ref, body, hash FROM chain WHERE session_id = ?"
        " ORDER BY seq DESC LIMIT ?",
        (session_id, TAIL + 1),
    ).fetchall()[::-1]
    row = con.execute("SELECT head_hash FROM session WHERE id = ?", (session_id,)).fetchone()
    if not entries or row is None or row[0] != entries[-1][4]:
        return False
    previous = bytes.fromhex(entries[0][4]) if len(entries) > TAIL else GENESIS
    checked = entries[1:] if len(entries) > TAIL else entries
    if checked[0][0] != entries[-1][0] - len(checked) + 1:
        return False
    for _seq, kind, ref, kept, stored in checked:
        body = _row_body(con, kind, ref) if kind in ROW_KINDS else kept
        if body is None or link(previous, bytes(body)).hex() != stored:
            return False
        previous = bytes.fromhex(stored)
    return _rows_logged(con, session_id)


def _rows_logged(con: apsw.Connection, session_id: str) -> bool:
    """Whether the log records as many rows as the session holds: two numbers the store's
    triggers keep (``log_rows``), so a long session is not counted at each reopen; counted
    in a store from before them (one served read-only, not migrated)."""
    try:
        kept = con.execute(
            "SELECT held, logged FROM log_rows WHERE session_id = ?", (session_id,)
        ).fetchone()
    except apsw.SQLError:
        kept = None
    if kept is not None:
        return int(kept[0]) == int(kept[1])
    logged = con.execute(
        "SELECT count(*) FROM chain WHERE session_id = ? AND kind IN"
        f" ({', '.join('?' * len(ROW_KINDS))})",
        (session_id, *ROW_KINDS),
    ).fetchone()
    held = sum(_count(con, spec.source, session_id) for spec in ROW_KINDS.values())
    return logged is not None and int(logged[0]) == held


def _count(con: apsw.Connection, source: str, session_id: str) -> int:
    row = con.execute(f"SELECT count(*) FROM {source}", (session_id,)).fetchone()
    return 0 if row is None else int(row[0])


def record_turn(con: apsw.Connection, session_id: str, turn_id: str) -> None:
    """Log a whole turn already written (by a migration, or copied into a fork): the turn,
    its run, its steps, events and changes in the order they were written, its end."""
    row = con.execute(
        "SELECT id, outcome, error, ended_at FROM run WHERE turn_id = ?", (turn_id,)
    ).fetchone()
    assert row is not None, f"turn {turn_id} has a run"
    run_id, outcome, error, ended_at = row
    record(con, session_id, "turn", turn_id)
    record(con, session_id, "run", str(run_id))
    written: list[tuple[Any, ...]] = con.execute(
        "SELECT 'step', run_id || '/' || n, created_at, 0, n FROM step WHERE run_id = ?1"
        " UNION ALL SELECT 'event', run_id || '/' || seq, created_at, 1, seq FROM event"
        " WHERE run_id = ?1 UNION ALL"
        " SELECT 'change', id, created_at, 2, id FROM change WHERE run_id = ?1"
        " ORDER BY 3, 4, 5",
        (run_id,),
    ).fetchall()
    for kind, ref, *_ in written:
        record(con, session_id, kind, str(ref))
    if outcome != "running":
        fields = end_fields(str(run_id), str(outcome), error, ended_at)
        record_state(con, session_id, "end", str(run_id), fields)


def build(con: apsw.Connection) -> None:
    """Compute every existing session's log from its rows, once, in a migration: the session
    with its title and instructions, then each turn with its run, its steps and events in the
    order they were written, its end; then the head where it stands."""
    sessions: list[tuple[Any, ...]] = con.execute(
        "SELECT id FROM session ORDER BY rowid"
    ).fetchall()
    for (session_id,) in sessions:
        build_session(con, session_id)


def build_session(con: apsw.Connection, session_id: str, proven: bool = True) -> None:
    """Compute the log of one session written without it (as ``build`` does), inside the
    transaction that wrote it: a store migrating, or a session imported. Not ``proven`` (a
    file without a log, or one whose log says so): it ends with an ``absent`` entry."""
    row = con.execute(
        "SELECT head, title, instructions FROM session WHERE id = ?", (session_id,)
    ).fetchone()
    assert row is not None, f"session {session_id} was just written"
    head, title, instructions = row
    record(con, session_id, "session", session_id)
    if title:
        record_setting(con, session_id, "title", title)
    if instructions is not None:
        record_setting(con, session_id, "instructions", instructions)
    turns: list[tuple[Any, ...]] = con.execute(
        "SELECT id FROM turn WHERE session_id = ? ORDER BY rowid", (session_id,)
    ).fetchall()
    last = None
    for (turn_id,) in turns:
        record_turn(con, session_id, turn_id)
        last = turn_id
    if head != last:
        record_state(
            con,
            session_id,
            "branch",
            session_id,
            {"sessionId": session_id, "head": head, "at": None},
        )
    if not proven:
        fields = {"sessionId": session_id, "log": "absent"}
        record_state(con, session_id, "absent", session_id, fields)
