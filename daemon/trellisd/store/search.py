"""Finding sessions by what was said in them: their title, prompts and replies, in the
``search`` FTS5 index that migration 6 made and its triggers keep (a row per session for its
title, a row per turn for its prompt and reply).

A query is a person's words, never FTS5 syntax: each word is quoted, so any text is a valid
query, and the last word (of two characters or more) also matches as the start of a word
(search as you type). A
session matches when all the words appear in its title or in one of its turns; the best
matching row (bm25, a title counting four times a turn) is its match and ranks it. Only the
newest ``DEPTH`` matching turns and titles are ranked, so that a word found everywhere costs
no more than a rare one.

A query holds at most ``MAX_QUERY_WORDS`` words and ``MAX_QUERY_BYTES`` bytes (``check_query``),
and a search still running after ``SEARCH_BUDGET`` seconds is interrupted (SQLite's progress
handler): the store is one connection that every window waits on, so no query may hold it.
"""

from __future__ import annotations

import base64
import json
import re
import time
import unicodedata
from collections.abc import Callable
from typing import Any

import apsw

from ..errors import InvalidParams
from ..records import SearchMatch, SessionSummary
from .db import Database
from .pins import pinned
from .sessions import AFTER_SESSION, SESSION_COLUMNS, _session, with_recovery
from .worktrees import under_root

SNIPPET_TOKENS = 12
SNIPPET_CANDIDATES = 50  # places in a column where a snippet may start
DEPTH = 5_000
"""Of a query found in more turns (or titles) than this, the newest this many are ranked:
a search takes the same time however common its words are."""
MIN_PREFIX = 2  # the index keeps prefixes of 2 and 3 characters (migration 6)
MARK_START, MARK_END, ELLIPSIS = "\u00ab", "\u00bb", "\u2026"
MAX_QUERY_WORDS = 64
MAX_QUERY_BYTES = 4096
SEARCH_BUDGET = 5.0  # seconds a search may run before it is interrupted
PROGRESS_STEPS = 1000  # SQLite instructions between two looks at the clock
_RANK = "bm25(search, 4.0, 1.0, 1.0)"
_COLUMNS = ", ".join(f"s.{column}" for column in SESSION_COLUMNS.split(", "))
# A hit's columns after the session's: its turn count, the turn that matched, the search row,
# the score.
_COUNT, _TURN, _HIT, _SCORE = range(AFTER_SESSION, AFTER_SESSION + 4)


def check_query(text: str) -> list[str]:
    """The words of a query; ``InvalidParams`` (field ``query``) for one that holds none, more
    than ``MAX_QUERY_WORDS`` or ``MAX_QUERY_BYTES``, or text that is not Unicode (a lone
    surrogate, which JSON's ``\\ud800`` can carry)."""
    limits = f"at most {MAX_QUERY_WORDS} words and {MAX_QUERY_BYTES // 1024} KiB"
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidParams(
            "query is not valid Unicode text: it holds a lone surrogate", field="query"
        ) from None
    if size > MAX_QUERY_BYTES:
        raise InvalidParams(f"query must be {limits}, not {size:,} bytes", field="query")
    words = "".join(c if c >= " " else " " for c in text).split()  # no NUL reaches FTS5
    if not words:
        raise InvalidParams("query must hold at least one word", field="query")
    if len(words) > MAX_QUERY_WORDS:
        raise InvalidParams(f"query must be {limits}, not {len(words)} words", field="query")
    return words


def fts_query(text: str) -> str:
    """A person's words as an FTS5 query that cannot be a syntax error."""
    words = check_query(text)
    quoted = ['"' + word.replace('"', '""') + '"' for word in words]
    prefix = "*" if len(words[-1]) >= MIN_PREFIX else ""
    return " ".join(quoted) + prefix


class SessionSearch:
    def __init__(
        self,
        db: Database,
        budget: float = SEARCH_BUDGET,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.budget, self.clock = budget, clock

    def page(
        self, query: str, root: str | None, limit: int, cursor: str | None, depth: int = DEPTH
    ) -> tuple[list[SessionSummary], str | None]:
        """The sessions matching ``query``, best first, ``limit`` at a time; of the turns
        (and titles) it is found in, the newest ``depth`` are ranked. ``InvalidParams`` when
        the search runs past the budget."""
        match = fts_query(query)
        where: list[str] = []
        args: list[Any] = [match, depth]
        if root is not None:
            with self.db.read() as con:
                condition, values = under_root(con, root, "s.")
            where.append(condition)
            args += values
        if cursor is not None:
            where.append("(best.score, s.id) > (?, ?)")
            args += list(_decode(cursor))
        sql = (
            "WITH hits AS MATERIALIZED ("
            f"  SELECT * FROM (SELECT rowid AS hit, {_RANK} AS score FROM search"
            "   WHERE search MATCH ?1 AND rowid > 0 ORDER BY rowid DESC LIMIT ?2)"
            "  UNION ALL"
            f"  SELECT * FROM (SELECT rowid AS hit, {_RANK} AS score FROM search"
            "   WHERE search MATCH ?1 AND rowid < 0 ORDER BY rowid LIMIT ?2)),"
            " owned AS ("
            "  SELECT t.session_id AS session_id, t.id AS turn_id, h.hit, h.score"
            "   FROM hits h CROSS JOIN turn t ON t.rowid = h.hit WHERE h.hit > 0"
            "  UNION ALL"
            "  SELECT s.id, NULL, h.hit, h.score"
            "   FROM hits h CROSS JOIN session s ON s.rowid = -h.hit WHERE h.hit < 0),"
            " best AS (SELECT session_id, turn_id, hit, min(score) AS score FROM owned"
            "  GROUP BY session_id)"
            f" SELECT {_COLUMNS}, (SELECT count(*) FROM turn WHERE session_id = s.id),"
            "  best.turn_id, best.hit, best.score"
            " FROM best CROSS JOIN session s ON s.id = best.session_id"
            + (" WHERE " + " AND ".join(where) if where else "")
            + " ORDER BY best.score, s.id LIMIT ?"
        )
        with self.db.read() as con:
            deadline = self.clock() + self.budget
            con.setprogresshandler(lambda: self.clock() > deadline, PROGRESS_STEPS)
            try:
                rows: list[tuple[Any, ...]] = con.execute(sql, (*args, limit + 1)).fetchall()
                texts: dict[int, tuple[str, ...]] = {
                    int(row[_HIT]): tuple(
                        con.execute(
                            "SELECT title, prompt, reply FROM search WHERE rowid = ?", (row[_HIT],)
                        ).fetchone()
                        or ()
                    )
                    for row in rows[:limit]
                }
            except apsw.InterruptError as exc:
                raise InvalidParams(
                    f"the search took longer than {self.budget:g} s and was stopped, so that"
                    " the store stays free for other requests: search for fewer or rarer words",
                    field="query",
                ) from exc
            except apsw.SQLError as exc:  # not expected of a quoted query; named if it is
                raise InvalidParams(f"query cannot be searched: {exc}", field="query") from exc
            finally:
                con.setprogresshandler(None)
            found = {
                row[0]: with_recovery(con, _session(row, pinned(con, row[0])))
                for row in rows[:limit]
            }
        words = query_words(query)
        page = [
            SessionSummary(
                found[row[0]],
                int(row[_COUNT]),
                SearchMatch(row[_TURN], snippet(texts[row[_HIT]], words)),
            )
            for row in rows[:limit]
        ]
        more = len(rows) > limit
        last = rows[limit - 1] if more else None
        return page, None if last is None else _encode(float(last[_SCORE]), str(last[0]))


_TOKEN = re.compile(r"[^\W_]+")
"""A word as FTS5's unicode61 tokenizer sees one: a run of letters and digits."""


def _fold(word: str) -> str:
    """A word as the index keeps it: without case or accents."""
    plain = unicodedata.normalize("NFKD", word)
    return "".join(c for c in plain if not unicodedata.combining(c)).casefold()


def query_words(text: str) -> tuple[frozenset[str], str | None]:
    """The words of a query as the index matches them: whole words, and the prefix the
    last word is (None when it is too short to be one)."""
    words = [_fold(w) for w in _TOKEN.findall(text)]
    prefix = words[-1] if words and len(text.split()[-1]) >= MIN_PREFIX else None
    return frozenset(words), prefix


def snippet(columns: tuple[str, ...], words: tuple[frozenset[str], str | None]) -> str:
    """Up to ``SNIPPET_TOKENS`` words of the column where most of the query's words are,
    around them, each found word marked."""
    exact, prefix = words

    def found(token: str) -> str | None:
        folded = _fold(token)
        if folded in exact or (prefix is not None and folded.startswith(prefix)):
            return folded
        return None

    best: tuple[int, str, list[re.Match[str]], int] = (-1, "", [], 0)
    for text in columns:
        tokens = list(_TOKEN.finditer(text))
        hits = [i for i, t in enumerate(tokens) if found(t.group())]
        for first in hits[:SNIPPET_CANDIDATES] or [0]:
            start = max(0, min(first - 2, len(tokens) - SNIPPET_TOKENS))
            window = tokens[start : start + SNIPPET_TOKENS]
            score = len({found(t.group()) for t in window} - {None})
            if score > best[0]:
                best = (score, text, tokens, start)
    _, text, tokens, start = best
    window = tokens[start : start + SNIPPET_TOKENS]
    if not window:
        return ""
    out, at = [ELLIPSIS] if start > 0 else [], window[0].start()
    for token in window:
        out.append(text[at : token.start()])
        word = token.group()
        out.append(f"{MARK_START}{word}{MARK_END}" if found(word) else word)
        at = token.end()
    out.append(ELLIPSIS if start + len(window) < len(tokens) else text[at:])
    return "".join(out).strip()


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
