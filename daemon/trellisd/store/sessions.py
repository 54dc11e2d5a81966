"""Sessions and their tree of turns."""

from __future__ import annotations

import base64
import json
import uuid
from typing import TYPE_CHECKING, Any

import apsw

from ..errors import InvalidParams, NotFound
from .db import Database, now

if TYPE_CHECKING:
    from .leases import Leases
from .records import Session, SessionSummary, Tokens, Turn

_TURN_SELECT = """
    SELECT t.id, t.session_id, t.parent_id, r.id, t.prompt,
           (SELECT coalesce(group_concat(text, ''), '') FROM
               (SELECT text FROM step WHERE run_id = r.id ORDER BY n)),
           r.outcome, r.error,
           (SELECT CASE WHEN count(*) = count(input_tokens) THEN coalesce(sum(input_tokens), 0)
                   END FROM step WHERE run_id = r.id),
           (SELECT CASE WHEN count(*) = count(output_tokens) THEN coalesce(sum(output_tokens), 0)
                   END FROM step WHERE run_id = r.id),
           (SELECT CASE WHEN count(*) = count(cached_tokens) THEN coalesce(sum(cached_tokens), 0)
                   END FROM step WHERE run_id = r.id),
           t.created_at, r.model
    FROM turn t JOIN run r ON r.turn_id = t.id
"""


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def _session(row: tuple[Any, ...]) -> Session:
    return Session(
        session_id=row[0],
        root=row[1],
        title=row[2],
        head=row[3],
        settings=json.loads(row[4]),
        created_at=row[5],
        updated_at=row[6],
        policy=json.loads(row[7]) if row[7] is not None else None,
    )


def _turn(row: tuple[Any, ...]) -> Turn:
    return Turn(
        turn_id=row[0],
        session_id=row[1],
        parent_turn_id=row[2],
        run_id=row[3],
        prompt=row[4],
        reply=row[5],
        outcome=row[6],
        error=row[7],
        tokens=Tokens(row[8], row[9], row[10]),
        created_at=row[11],
        model=row[12],
    )


class Sessions:
    def __init__(self, db: Database) -> None:
        self.db = db

    def create(
        self,
        root: str,
        title: str,
        settings: dict[str, Any],
        owner: str,
        policy: dict[str, Any] | None = None,
    ) -> Session:
        stamp = now()
        session = Session(new_id("s"), root, title, None, stamp, stamp, settings, policy)
        with self.db.write() as con:
            con.execute(
                "INSERT INTO session(id, root, title, head, settings, created_at, updated_at,"
                " owner, policy) VALUES (?, ?, ?, NULL, ?, ?, ?, ?, ?)",
                (
                    session.session_id,
                    root,
                    title,
                    json.dumps(settings),
                    stamp,
                    stamp,
                    owner,
                    None if policy is None else json.dumps(policy),
                ),
            )
        return session

    def get(self, session_id: str) -> Session:
        with self.db.read() as con:
            return self._get(con, session_id)

    @staticmethod
    def _get(con: apsw.Connection, session_id: str) -> Session:
        row = con.execute(
            "SELECT id, root, title, head, settings, created_at, updated_at, policy FROM session"
            " WHERE id = ?",
            (session_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"unknown session {session_id}", sessionId=session_id)
        return _session(row)

    def page(
        self, root: str | None, limit: int, cursor: str | None
    ) -> tuple[list[SessionSummary], str | None]:
        """Sessions newest first (by last use), ``limit`` at a time."""
        where, args = [], []
        if root is not None:
            where.append("root = ?")
            args.append(root)
        if cursor is not None:
            updated_at, session_id = _decode_cursor(cursor)
            where.append("(updated_at, id) < (?, ?)")
            args += [updated_at, session_id]
        sql = (
            "SELECT id, root, title, head, settings, created_at, updated_at, policy,"
            " (SELECT count(*) FROM turn WHERE session_id = session.id) FROM session"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY updated_at DESC, id DESC LIMIT ?"
        )
        with self.db.read() as con:
            rows: list[tuple[Any, ...]] = con.execute(sql, (*args, limit + 1)).fetchall()
        page = [SessionSummary(_session(row), int(row[8])) for row in rows[:limit]]
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

    @staticmethod
    def _path(con: apsw.Connection, head: str | None) -> list[Turn]:
        if head is None:
            return []
        ids = [
            row[0]
            for row in con.execute(
                "WITH RECURSIVE path(id) AS ("
                "  SELECT ? UNION ALL"
                "  SELECT turn.parent_id FROM path JOIN turn ON turn.id = path.id"
                "  WHERE turn.parent_id IS NOT NULL)"
                " SELECT id FROM path",
                (head,),
            )
        ]
        marks = ",".join("?" * len(ids))
        rows = con.execute(_TURN_SELECT + f" WHERE t.id IN ({marks})", ids).fetchall()
        by_id = {row[0]: _turn(row) for row in rows}
        return [by_id[turn_id] for turn_id in reversed(ids)]

    def turns(self, session_id: str) -> list[Turn]:
        """Every turn of the session's tree, oldest first."""
        with self.db.read() as con:
            self._get(con, session_id)
            rows = con.execute(
                _TURN_SELECT + " WHERE t.session_id = ? ORDER BY t.created_at, t.rowid",
                (session_id,),
            ).fetchall()
        return [_turn(row) for row in rows]

    def branch(self, session_id: str, turn_id: str | None, leases: Leases) -> Session:
        with self.db.write() as con:
            self._get(con, session_id)
            leases.acquire(con, session_id)
            if turn_id is not None:
                self._turn(con, session_id, turn_id)
            con.execute(
                "UPDATE session SET head = ?, updated_at = ? WHERE id = ?",
                (turn_id, now(), session_id),
            )
            return self._get(con, session_id)

    def touch(self, session_id: str) -> Session:
        """Mark the session used now; a read-only store keeps it as it was."""
        if self.db.read_only:
            return self.get(session_id)
        with self.db.write() as con:
            con.execute("UPDATE session SET updated_at = ? WHERE id = ?", (now(), session_id))
            return self._get(con, session_id)


def _encode_cursor(session: Session) -> str:
    raw = json.dumps([session.updated_at, session.session_id]).encode()
    return base64.urlsafe_b64encode(raw).decode()


def _decode_cursor(cursor: str) -> tuple[str, str]:
    try:
        updated_at, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
        return str(updated_at), str(session_id)
    except (ValueError, TypeError) as exc:
        raise InvalidParams("cursor is not one that session/list returned", field="cursor") from exc
