"""Finding sessions by what was said in them: their title, prompts and replies, in the
``search`` FTS5 index that migration 6 made and its triggers keep (a row per session for its
title, a row per turn for its prompt and reply).

A query is a person's words, never FTS5 syntax: each word is quoted, so any text is a valid
query, and the last word also matches as the start of a word (search as you type). A
session matches when all the words appear in its title or in one of its turns; the best
matching row (bm25, a title counting four times a turn) is its match and ranks it.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import apsw

from ..errors import InvalidParams
from ..records import SearchMatch, SessionSummary
from .db import Database
from .sessions import SESSION_COLUMNS, _session

SNIPPET_TOKENS = 12
MARK_START, MARK_END, ELLIPSIS = "\u00ab", "\u00bb", "\u2026"
_RANK = "bm25(search, 0, 0, 4.0, 1.0, 1.0)"
_COLUMNS = ", ".join(f"s.{column}" for column in SESSION_COLUMNS.split(", "))


def fts_query(text: str) -> str:
    """A person's words as an FTS5 query that cannot be a syntax error."""
    words = "".join(c if c >= " " else " " for c in text).split()  # no NUL reaches FTS5
    if not words:
        raise InvalidParams("query must hold at least one word", field="query")
    quoted = ['"' + word.replace('"', '""') + '"' for word in words]
    return " ".join(quoted) + "*"


class Search:
    def __init__(self, db: Database) -> None:
        self.db = db

    def page(
        self, query: str, root: str | None, limit: int, cursor: str | None
    ) -> tuple[list[SessionSummary], str | None]:
        """The sessions matching ``query``, best first, ``limit`` at a time."""
        match = fts_query(query)
        where: list[str] = []
        args: list[Any] = [match]
        if root is not None:
            where.append("s.root = ?")
            args.append(root)
        if cursor is not None:
            where.append("(best.score, s.id) > (?, ?)")
            args += list(_decode(cursor))
        sql = (
            "WITH hits AS MATERIALIZED ("
            f"   SELECT session_id, turn_id, rowid AS hit, {_RANK} AS score"
            "   FROM search WHERE search MATCH ?),"
            " best AS (SELECT session_id, turn_id, hit, min(score) AS score FROM hits"
            "   GROUP BY session_id)"
            f" SELECT {_COLUMNS}, (SELECT count(*) FROM turn WHERE session_id = s.id),"
            "  best.turn_id, best.hit, best.score"
            " FROM best CROSS JOIN session s ON s.id = best.session_id"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY best.score, s.id LIMIT ?"
        )
        with self.db.read() as con:
            try:
                rows: list[tuple[Any, ...]] = con.execute(sql, (*args, limit + 1)).fetchall()
            except apsw.SQLError as exc:  # not expected of a quoted query; named if it is
                raise InvalidParams(f"query cannot be searched: {exc}", field="query") from exc
            snippets = self._snippets(con, match, [int(row[11]) for row in rows[:limit]])
        page = [
            SessionSummary(_session(row), int(row[9]), SearchMatch(row[10], snippets[row[11]]))
            for row in rows[:limit]
        ]
        more = len(rows) > limit
        last = rows[limit - 1] if more else None
        return page, None if last is None else _encode(float(last[12]), str(last[0]))

    @staticmethod
    def _snippets(con: apsw.Connection, match: str, hits: list[int]) -> dict[int, str]:
        if not hits:
            return {}
        marks = ",".join("?" * len(hits))
        rows = con.execute(
            f"SELECT rowid, snippet(search, -1, ?, ?, ?, {SNIPPET_TOKENS}) FROM search"
            f" WHERE search MATCH ? AND rowid IN ({marks})",
            (MARK_START, MARK_END, ELLIPSIS, match, *hits),
        )
        return {int(rowid): str(text) for rowid, text in rows}


def _encode(score: float, session_id: str) -> str:
    return base64.urlsafe_b64encode(json.dumps(["search", score, session_id]).encode()).decode()


def _decode(cursor: str) -> tuple[float, str]:
    try:
        kind, score, session_id = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except (ValueError, TypeError) as exc:
        raise _not_ours() from exc
    if kind != "search" or not isinstance(score, int | float) or not isinstance(session_id, str):
        raise _not_ours()
    return float(score), session_id


def _not_ours() -> InvalidParams:
    return InvalidParams("cursor is not one that session/list returned for a query", field="cursor")
