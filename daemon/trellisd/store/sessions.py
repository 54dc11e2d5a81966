"""Sessions and their tree of turns."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any, Protocol, TypeVar

import apsw

from ..convert import structure, unstructure
from ..errors import Conflict, InvalidParams, LeaseHeld, NotFound, StaleHead
from ..plans import Plan, PlanEntry
from ..policy.layers import PolicySpec
from ..records import (
    ANY_HEAD,
    ExpectHead,
    FeedEntry,
    ForkedFrom,
    ImageRef,
    ImportedFrom,
    ProviderChoice,
    Session,
    SessionSummary,
    Tokens,
    Turn,
    TurnCommand,
)
from ..vocabulary import EventKind, Outcome, PlanStatus, stored
from . import chain, feed, forks, images, parents, recoveries
from .db import Database, new_id, now
from .pins import pinned, set_pin
from .worktrees import attach, under_root, worktree_of

T = TypeVar("T")

SESSION_COLUMNS = (
    "id, root, title, head, settings, created_at, updated_at, policy, forked_from, forked_turn,"
    " instructions, imported_from, head_hash"
)
# Where a query's own columns start, after the session's.
AFTER_SESSION = len(SESSION_COLUMNS.split(", "))
_TURN_SELECT = f"""
    SELECT t.id, t.session_id, t.parent_id, r.id, t.prompt,
           coalesce((SELECT text FROM step WHERE run_id = r.id AND text != ''
                     ORDER BY n DESC LIMIT 1), ''),
           r.outcome, r.error,
           (SELECT CASE WHEN count(*) = count(input_tokens) THEN coalesce(sum(input_tokens), 0)
                   END FROM step WHERE run_id = r.id),
           (SELECT CASE WHEN count(*) = count(output_tokens) THEN coalesce(sum(output_tokens), 0)
                   END FROM step WHERE run_id = r.id),
           (SELECT CASE WHEN count(*) = count(cached_tokens) THEN coalesce(sum(cached_tokens), 0)
                   END FROM step WHERE run_id = r.id),
           t.created_at, r.model,
           (SELECT e.detail FROM event e WHERE e.run_id = r.id AND e.kind = '{EventKind.RECOVERY}'
            ORDER BY e.seq DESC LIMIT 1),
           (SELECT CASE WHEN count(*) = count(cost) THEN coalesce(sum(cost), 0.0)
                   END FROM step WHERE run_id = r.id),
           (SELECT json_array(e.step, e.detail) FROM event e
            WHERE e.run_id = r.id AND e.kind = '{EventKind.PLAN}' ORDER BY e.seq DESC LIMIT 1),
           (SELECT e.detail FROM event e
            WHERE e.run_id = r.id AND e.kind = '{EventKind.PLAN_APPROVED}' LIMIT 1),
           (SELECT e.detail FROM event e
            WHERE e.run_id = r.id AND e.kind = '{EventKind.IMAGES}' LIMIT 1),
           (SELECT sum(json_extract(e.detail, '$.tokens')) FROM event e
            WHERE e.run_id = r.id AND e.kind = '{EventKind.THOUGHT}'),
           (SELECT e.detail FROM event e
            WHERE e.run_id = r.id AND e.kind = '{EventKind.COMMAND}' LIMIT 1)
    FROM turn t JOIN run r ON r.turn_id = t.id
"""
_TURN_SELECT_BY_ROW = _TURN_SELECT.replace("SELECT t.id,", "SELECT t.rowid, t.id,", 1)


class LeaseTaker(Protocol):
    """The session's lease, taken inside a write transaction (``Leases``)."""

    daemon_id: str

    def acquire(self, con: apsw.Connection, session_id: str) -> None: ...


def _session(row: tuple[Any, ...], pins: tuple[str, ...] = ()) -> Session:
    return Session(
        session_id=row[0],
        root=row[1],
        title=row[2],
        head=row[3],
        provider=structure(json.loads(row[4]), ProviderChoice, "provider"),
        created_at=row[5],
        updated_at=row[6],
        policy=None if row[7] is None else structure(json.loads(row[7]), PolicySpec, "policy"),
        forked_from=None if row[8] is None else ForkedFrom(row[8], row[9]),
        instructions=row[10],
        imported_from=None if row[11] is None else _imported_from(json.loads(row[11])),
        head_hash=row[12],
        pinned=pins,
    )


def with_recovery(con: apsw.Connection, session: Session) -> Session:
    """``session`` with the recovery it waits for, if it does (``recoveries``), its
    worktree, if it has one (``worktrees``), and the session that started it, if one did
    (``parents``)."""
    session = parents.with_parent(con, session)
    pending = recoveries.pending(con, session.session_id)
    worktree = worktree_of(con, session.session_id)
    if pending is None and worktree is None:
        return session
    return dataclasses.replace(session, recovery=pending, worktree=worktree)


def _imported_from(stored: dict[str, str]) -> ImportedFrom:
    return ImportedFrom(
        stored["sessionId"], stored.get("headHash"), stored.get("exportedAt"), stored["importedAt"]
    )


def plan_of(found: str | None) -> Plan | None:
    """A turn's plan from its last ``plan`` event, as ``[step, detail]``; None: it has none."""
    if found is None:
        return None
    step, detail = json.loads(found)
    entries = json.loads(detail).get("entries", [])
    return Plan(
        int(step),
        tuple(
            PlanEntry(str(e["content"]), stored(PlanStatus, e["status"]), e.get("priority"))
            for e in entries
        ),
    )


def _turn(row: tuple[Any, ...]) -> Turn:
    return Turn(
        turn_id=row[0],
        session_id=row[1],
        parent_turn_id=row[2],
        run_id=row[3],
        prompt=row[4],
        reply=row[5],
        outcome=stored(Outcome, row[6]),
        error=row[7],
        tokens=Tokens(row[8], row[9], row[10], row[18]),  # reasoning: the thought events'
        created_at=row[11],
        model=row[12],
        recovery=recoveries.of_run(row[0], row[3], row[13]),
        cost=row[14],
        plan=plan_of(row[15]),
        follows_plan=None if row[16] is None else json.loads(row[16]).get("turnId"),
        images=images.refs(row[17]),
        command=None if row[19] is None else TurnCommand.of(json.loads(row[19])),
    )


class Sessions:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self,
        root: str,
        title: str,
        provider: ProviderChoice,
        owner: str,
        policy: PolicySpec | None = None,
        instructions: str | None = None,
        worktree: str | None = None,
        parent_session_id: str | None = None,
    ) -> Session:
        """A new session; with ``worktree``, the path of the worktree made for it (its row
        ``creating``), which the same transaction makes ``ready``; ``parent_session_id``: the
        session whose ``task`` call started it."""
        stamp = now()
        session = Session(
            new_id("s"), root, title, None, stamp, stamp, provider, policy, None, instructions
        )
        with self.db.write() as con:
            con.execute(
                "INSERT INTO session(id, root, title, head, settings, created_at, updated_at,"
                " owner, policy, instructions) VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?, ?)",
                (
                    session.session_id,
                    root,
                    title,
                    json.dumps(unstructure(provider)),
                    stamp,
                    stamp,
                    owner,
                    None if policy is None else json.dumps(unstructure(policy)),
                    instructions,
                ),
            )
            _log_opening(con, session.session_id, title, instructions)
            if worktree is not None:
                attach(con, worktree, session.session_id)
            if parent_session_id is not None:
                parents.set_parent(con, session.session_id, parent_session_id)
            return self._get(con, session.session_id)

    def get(self, session_id: str) -> Session:
        with self.db.read() as con:
            return self._get(con, session_id)

    @staticmethod
    def _get(con: apsw.Connection, session_id: str) -> Session:
        row = con.execute(
            f"SELECT {SESSION_COLUMNS} FROM session WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"unknown session {session_id}", sessionId=session_id)
        return with_recovery(con, _session(row, pinned(con, session_id)))

    def page(
        self, root: str | None, limit: int, cursor: str | None, parent: str | None = None
    ) -> tuple[list[SessionSummary], str | None]:
        """Sessions newest first (by last use), ``limit`` at a time; with ``parent``, only the
        sessions it started (``parents``)."""
        where: list[str] = []
        args: list[Any] = []
        if parent is not None:
            where.append(parents.CHILD_OF)
            args.append(parent)
        if cursor is not None:
            updated_at, session_id = _decode_cursor(cursor)
            where.append("(updated_at, id) < (?, ?)")
            args += [updated_at, session_id]
        with self.db.read() as con:
            if root is not None:
                condition, values = under_root(con, root)
                where.append(condition)
                args += values
            sql = (
                f"SELECT {SESSION_COLUMNS},"
                " (SELECT count(*) FROM turn WHERE session_id = session.id) FROM session"
                + (" WHERE " + " AND ".join(where) if where else "")
                + " ORDER BY updated_at DESC, id DESC LIMIT ?"
            )
            rows: list[tuple[Any, ...]] = con.execute(sql, (*args, limit + 1)).fetchall()
            page = [
                SessionSummary(
                    with_recovery(con, _session(row, pinned(con, row[0]))), int(row[AFTER_SESSION])
                )
                for row in rows[:limit]
            ]
        more = len(rows) > limit
        next_cursor = _encode_cursor(page[-1].session) if more and page else None
        return page, next_cursor

    def turn(self, session_id: str, turn_id: str) -> Turn:
        with self.db.read() as con:
            self._get(con, session_id)
            return self._turn(con, session_id, turn_id)

    @staticmethod
    def _turn(con: apsw.Connection, session_id: str, turn_id: str) -> Turn:
        row = con.execute(_TURN_SELECT + " WHERE t.id = ?", (turn_id,)).fetchone()
        if row is None:
            raise NotFound(f"unknown turn {turn_id}", turnId=turn_id)
        turn = _turn(row)
        if turn.session_id != session_id:
            raise InvalidParams(
                f"turn {turn_id} belongs to another session", turnId=turn_id, sessionId=session_id
            )
        return turn

    def history(self, session_id: str) -> list[Turn]:
        """The path from the session's first turn to its head."""
        with self.db.read() as con:
            session = self._get(con, session_id)
            return self._path(con, session.head)

    def history_to(self, session_id: str, turn_id: str | None) -> list[Turn]:
        """The path from the session's first turn to ``turn_id``."""
        with self.db.read() as con:
            self._get(con, session_id)
            return self._path(con, turn_id)

    def history_page(
        self, session_id: str, limit: int, cursor: str | None
    ) -> tuple[list[Turn], str | None]:
        """The newest ``limit`` turns of the path to the head, oldest first, and a cursor to
        the turns before them (None at the first turn). A cursor names a turn, whose
        ancestors never change: paging is stable while the head moves."""
        with self.db.read() as con:
            return self._history_page(con, self._get(con, session_id), limit, cursor)

    def _history_page(
        self, con: apsw.Connection, session: Session, limit: int, cursor: str | None
    ) -> tuple[list[Turn], str | None]:
        start = session.head
        if cursor is not None:
            before = self._turn(con, session.session_id, _decode(cursor, "history", str))
            start = before.parent_turn_id
        ids = self._ancestors(con, start, limit + 1)
        page = self._turns(con, ids[:limit])
        more = len(ids) > limit
        return page, _encode("history", page[0].turn_id) if more else None

    def reopen(
        self, session_id: str, writer: LeaseTaker, limit: int | None
    ) -> tuple[Session, list[Turn], str | None, str]:
        """In one transaction: mark the session used now, become its writer unless a live
        daemon is, read its history (all of it, or its newest ``limit`` turns and a cursor
        to the older ones) and check its log's tail (``integrity``). A read-only store is
        only read."""
        if self.db.read_only:
            with self.db.read() as con:
                return self._reopened(con, self._get(con, session_id), limit)
        with self.db.write() as con:
            self._get(con, session_id)
            con.execute("UPDATE session SET updated_at = ? WHERE id = ?", (now(), session_id))
            try:
                writer.acquire(con, session_id)
            except LeaseHeld:
                pass  # another live daemon writes it: reading needs no lease
            return self._reopened(con, self._get(con, session_id), limit)

    def _reopened(
        self, con: apsw.Connection, session: Session, limit: int | None
    ) -> tuple[Session, list[Turn], str | None, str]:
        integrity = _integrity(con, session.session_id)
        if limit is None:
            return session, self._path(con, session.head), None, integrity
        return session, *self._history_page(con, session, limit, None), integrity

    def turns_page(
        self, session_id: str, limit: int, cursor: str | None
    ) -> tuple[list[Turn], str | None]:
        """Every turn of the session's tree, oldest first, ``limit`` at a time."""
        with self.db.read() as con:
            self._get(con, session_id)
            after = -1 if cursor is None else _decode(cursor, "turns", int)
            rows: list[tuple[Any, ...]] = con.execute(
                _TURN_SELECT_BY_ROW
                + " WHERE t.session_id = ? AND t.rowid > ? ORDER BY t.rowid LIMIT ?",
                (session_id, after, limit + 1),
            ).fetchall()
        page = [_turn(row[1:]) for row in rows[:limit]]
        more = len(rows) > limit
        return page, _encode("turns", int(rows[limit - 1][0])) if more else None

    @staticmethod
    def _ancestors(con: apsw.Connection, head: str | None, limit: int = -1) -> list[str]:
        """``head`` and its ancestors, newest first; at most ``limit`` (-1: all)."""
        if head is None:
            return []
        return [
            row[0]
            for row in con.execute(
                "WITH RECURSIVE path(id) AS ("
                "  SELECT ? UNION ALL"
                "  SELECT turn.parent_id FROM path JOIN turn ON turn.id = path.id"
                "  WHERE turn.parent_id IS NOT NULL)"
                " SELECT id FROM path LIMIT ?",
                (head, limit),
            )
        ]

    @staticmethod
    def _turns(con: apsw.Connection, newest_first: list[str]) -> list[Turn]:
        """The turns named, oldest first."""
        if not newest_first:
            return []
        marks = ",".join("?" * len(newest_first))
        rows = con.execute(_TURN_SELECT + f" WHERE t.id IN ({marks})", newest_first).fetchall()
        by_id = {row[0]: _turn(row) for row in rows}
        return [by_id[turn_id] for turn_id in reversed(newest_first)]

    @classmethod
    def _path(cls, con: apsw.Connection, head: str | None) -> list[Turn]:
        return cls._turns(con, cls._ancestors(con, head))

    def turns(self, session_id: str) -> list[Turn]:
        """Every turn of the session's tree, oldest first."""
        with self.db.read() as con:
            self._get(con, session_id)
            rows = con.execute(
                _TURN_SELECT + " WHERE t.session_id = ? ORDER BY t.created_at, t.rowid",
                (session_id,),
            ).fetchall()
        return [_turn(row) for row in rows]

    def branch(
        self,
        session_id: str,
        turn_id: str | None,
        leases: LeaseTaker,
        expect_head: ExpectHead = ANY_HEAD,
    ) -> Session:
        with self.db.write() as con:
            expect(self._get(con, session_id), expect_head)
            leases.acquire(con, session_id)
            if turn_id is not None:
                self._turn(con, session_id, turn_id)
            stamp = now()
            con.execute(
                "UPDATE session SET head = ?, updated_at = ? WHERE id = ?",
                (turn_id, stamp, session_id),
            )
            chain.record_state(
                con,
                session_id,
                "branch",
                session_id,
                {"sessionId": session_id, "head": turn_id, "at": stamp},
            )
            return self._get(con, session_id)

    def feed(self, session_id: str, after: int, limit: int) -> tuple[list[FeedEntry], int | None]:
        """The session's feed after entry ``after``, ``limit`` entries at most."""
        with self.db.read() as con:
            self._get(con, session_id)
            return feed.page(con, session_id, after, limit)

    def fork(
        self, session_id: str, turn_id: str | None, writer: LeaseTaker, step: int | None = None
    ) -> Session:
        """A new session, written by ``writer``, holding a copy of the path from the first
        turn of ``session_id`` to ``turn_id`` (None: empty), with the origin's root, title,
        model choice, policy, instructions and budget, and the copied turns' change sets;
        the origin is only read. With ``step``, the copy of ``turn_id`` holds its first
        ``step`` steps and ends ``forked``. The fork's log
        records its opening, then each copied turn whole."""
        stamp, fork_id = now(), new_id("s")
        with self.db.write() as con:
            origin = self._get(con, session_id)
            if turn_id is not None:
                self._turn(con, session_id, turn_id)
            con.execute(
                "INSERT INTO session(id, root, title, head, settings, created_at, updated_at,"
                " owner, policy, instructions, forked_from, forked_turn, budget)"
                " SELECT ?, root, title, NULL, settings, ?, ?, ?, policy, instructions, id, ?,"
                " budget"
                " FROM session WHERE id = ?",
                (fork_id, stamp, stamp, writer.daemon_id, turn_id, session_id),
            )
            _log_opening(con, fork_id, origin.title, origin.instructions)
            head = forks.copy_path(con, session_id, turn_id, fork_id, step)
            con.execute("UPDATE session SET head = ? WHERE id = ?", (head, fork_id))
            return self._get(con, fork_id)

    def rename(self, session_id: str, title: str, writer: LeaseTaker) -> Session:
        with self.db.write() as con:
            self._get(con, session_id)
            writer.acquire(con, session_id)
            set_title(con, session_id, title)
            con.execute("UPDATE session SET updated_at = ? WHERE id = ?", (now(), session_id))
            return self._get(con, session_id)

    def pin(self, session_id: str, turn_id: str, pin: bool, writer: LeaseTaker) -> Session:
        """Pin (or unpin) ``turn_id``, any turn of the session's tree; logged when it changed
        anything."""
        with self.db.write() as con:
            self._get(con, session_id)
            self._turn(con, session_id, turn_id)
            writer.acquire(con, session_id)
            set_pin(con, session_id, turn_id, pin)
            return self._get(con, session_id)

    def instruct(self, session_id: str, instructions: str | None, writer: LeaseTaker) -> Session:
        """New standing instructions, logged; the session's next run records them (an
        event)."""
        with self.db.write() as con:
            self._get(con, session_id)
            writer.acquire(con, session_id)
            con.execute(
                "UPDATE session SET instructions = ?, instructions_changed = 1, updated_at = ?"
                " WHERE id = ?",
                (instructions, now(), session_id),
            )
            chain.record_setting(con, session_id, "instructions", instructions)
            return self._get(con, session_id)

    def delete(self, session_id: str, writer: LeaseTaker) -> None:
        """Remove the session and all it owns (its turns, runs, steps, events, feed, log,
        change sets and the file contents no other session's refer to, and its lease), unless
        another live daemon is its writer (``LeaseHeld``)."""
        with self.db.write() as con:
            self._get(con, session_id)
            writer.acquire(con, session_id)
            running = con.execute(
                "SELECT t.id FROM run r JOIN turn t ON t.id = r.turn_id"
                " WHERE t.session_id = ? AND r.outcome = ? AND r.daemon_id = ?",
                (session_id, Outcome.RUNNING, writer.daemon_id),
            ).fetchone()
            if running is not None:  # begun here, though its loop may not have started yet
                raise Conflict(
                    f"session {session_id} has a running turn {running[0]};"
                    " wait for it to end or cancel it before you delete it",
                    sessionId=session_id,
                    turnId=running[0],
                )
            runs = "SELECT r.id FROM run r JOIN turn t ON t.id = r.turn_id WHERE t.session_id = ?"
            con.execute("DELETE FROM feed WHERE session_id = ?", (session_id,))
            con.execute("DELETE FROM chain WHERE session_id = ?", (session_id,))
            con.execute(f"DELETE FROM event WHERE run_id IN ({runs})", (session_id,))
            con.execute(f"DELETE FROM step WHERE run_id IN ({runs})", (session_id,))
            con.execute(f"DELETE FROM change WHERE run_id IN ({runs})", (session_id,))
            con.execute(f"DELETE FROM run WHERE id IN ({runs})", (session_id,))
            con.execute("DELETE FROM turn WHERE session_id = ?", (session_id,))
            con.execute("DELETE FROM session WHERE id = ?", (session_id,))
            _drop_unused_contents(con)

    def verify(self, session_id: str) -> chain.LogVerdict:
        """Check the session's whole log (``chain.verify``), then the bytes of every image
        its turns carried against the SHA-256 and size their events name."""
        with self.db.read() as con:
            self._get(con, session_id)
            verdict = chain.verify(con, session_id)
            if not verdict.ok:
                return verdict
            found = images.damaged(con, session_id)
        if found is None:
            return verdict
        seq, ref, reason = found
        bad = chain.BadEntry(seq, "event", ref)
        return dataclasses.replace(verdict, ok=False, first_bad=bad, reason=reason)

    def image(self, session_id: str, sha256: str) -> tuple[ImageRef, bytes]:
        """An image a turn of the session carried, with its bytes; ``NotFound`` for one no
        turn of it carried."""
        with self.db.read() as con:
            self._get(con, session_id)
            ref = images.find(con, session_id, sha256)
            if ref is None:
                raise NotFound(
                    f"session {session_id} has no image {sha256}",
                    sessionId=session_id,
                    sha256=sha256,
                )
            try:
                return ref, images.get(con, sha256)
            except KeyError:
                raise NotFound(
                    f"the bytes of image {sha256} are missing from the store",
                    sessionId=session_id,
                    sha256=sha256,
                ) from None


def _drop_unused_contents(con: apsw.Connection) -> None:
    """Remove the file contents no change set and no image refers to any more (another
    session's may still: contents are kept once for all), and the delta bases only they
    needed."""
    while True:
        con.execute(
            "DELETE FROM blob WHERE sha256 NOT IN"
            " (SELECT before_sha256 FROM change WHERE before_sha256 IS NOT NULL"
            "  UNION SELECT after_sha256 FROM change WHERE after_sha256 IS NOT NULL"
            "  UNION SELECT base FROM blob WHERE base IS NOT NULL"
            f"  UNION {images.NAMED_BY_IMAGES})"
        )
        if not con.changes():
            return


def expect(session: Session, expect_head: ExpectHead) -> None:
    """``StaleHead`` when the write expected another head than the session's."""
    if expect_head is ANY_HEAD or expect_head == session.head:
        return
    raise StaleHead(
        f"session {session.session_id} has moved on: its head is"
        f" {session.head or 'before the first turn'}, not"
        f" {expect_head or 'before the first turn'}; nothing was done",
        sessionId=session.session_id,
        expectHead=expect_head,
        head=session.head,
    )


def _integrity(con: apsw.Connection, session_id: str) -> str:
    """``unchecked`` while a turn of the session runs (its log is still growing), else
    whether the log's tail is sound."""
    running = con.execute(
        "SELECT 1 FROM run r JOIN turn t ON t.id = r.turn_id"
        " WHERE t.session_id = ? AND r.outcome = 'running' LIMIT 1",
        (session_id,),
    ).fetchone()
    if running is not None:
        return "unchecked"
    return "ok" if chain.tail_sound(con, session_id) else "broken"


def _log_opening(
    con: apsw.Connection, session_id: str, title: str, instructions: str | None
) -> None:
    """Inside the write that made the session: its log's first entries (the session, its
    title and its instructions, when it has them)."""
    chain.record(con, session_id, "session", session_id)
    if title:
        chain.record_setting(con, session_id, "title", title)
    if instructions is not None:
        chain.record_setting(con, session_id, "instructions", instructions)


def set_title(con: apsw.Connection, session_id: str, title: str) -> None:
    """Inside a write: the session's title is ``title``, and its log says so."""
    con.execute("UPDATE session SET title = ? WHERE id = ?", (title, session_id))
    chain.record_setting(con, session_id, "title", title)


def _encode(kind: str, value: str | int) -> str:
    return base64.urlsafe_b64encode(json.dumps([kind, value]).encode()).decode()


def _decode(cursor: str, kind: str, of: type[T]) -> T:
    """The turn id or row a paging cursor of ``kind`` holds."""
    try:
        got_kind, value = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError) as exc:
        raise InvalidParams(
            f"cursor is not one that session/{kind} returned", field="cursor"
        ) from exc
    if got_kind != kind or not isinstance(value, of):
        raise InvalidParams(f"cursor is not one that session/{kind} returned", field="cursor")
    return value


def _encode_cursor(session: Session) -> str:
    raw = json.dumps([session.updated_at, session.session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        updated_at, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return str(updated_at), str(session_id)
    except (ValueError, TypeError) as exc:
        raise InvalidParams("cursor is not one that session/list returned", field="cursor") from exc
