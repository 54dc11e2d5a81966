"""Change sets: every file a step changed, with its content before and after.

A change's ``source`` says what made it: ``tool`` (``write_file``, ``edit_file``),
``command`` (a ``run_command`` in a git work tree), or ``revert`` (``turn/revert`` putting
a turn's files back, recorded on the reverted turn's run). Changes are read back in the order
they were made (``id``), which is the order they happened on disk. Each change is an entry of
its session's log (``chain``), written with it.

A ``command`` change may be marked shared (``change_share``) with other sessions' turns that
may have made it too (``services.changes``): marks come with the change, or later, when the
other session's command ends; a mark found wrong then is taken back. Marks are not in the log.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import apsw

from ..changes.content import Content, Kind
from ..errors import NotFound
from ..records import Sharer
from . import blobs, chain
from .db import Database, now
from .leases import Leases

SOURCES = ("tool", "command", "revert")


@dataclass(frozen=True)
class Recorded:
    """One recorded change; its contents carry no text until ``Changes.load`` reads it."""

    id: int
    turn_id: str
    run_id: str
    step: int | None
    path: str
    source: str
    before: Content
    after: Content
    shared: frozenset[Sharer] = field(default_factory=frozenset)


Marks = Mapping[str, Iterable[Sharer]]
"""For some paths of a command's change set: the other sessions' turns it is shared with."""


@dataclass(frozen=True)
class TurnRun:
    """A turn, the session it belongs to and its run."""

    turn_id: str
    session_id: str
    run_id: str


def _content(kind: str, sha256: str | None, size: int) -> Content:
    return Content(Kind(kind), sha256, size)


class Changes:
    def __init__(self, db: Database, leases: Leases) -> None:
        self.db, self.leases = db, leases

    def record(
        self,
        run_id: str,
        step: int | None,
        source: str,
        files: Sequence[tuple[str, Content, Content]],
        shared: Marks | None = None,
    ) -> None:
        """Record ``(path, before, after)`` for each file, storing each text once, with
        the marks ``shared`` names for its paths."""
        if not files:
            return
        with self.db.write() as con:
            row = con.execute(
                "SELECT t.session_id FROM run r JOIN turn t ON t.id = r.turn_id WHERE r.id = ?",
                (run_id,),
            ).fetchone()
            if row is None:
                raise NotFound(f"unknown run {run_id}", runId=run_id)
            session_id = str(row[0])
            self.leases.holds(con, session_id)
            stamp = now()
            for path, before, after in files:
                blobs.put(con, before, None)
                blobs.put(con, after, before.sha256 if before.kind == Kind.TEXT else None)
                con.execute(
                    "INSERT INTO change(run_id, step, path, source, before_kind, before_sha256,"
                    " before_size, after_kind, after_sha256, after_size, created_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        run_id,
                        step,
                        path,
                        source,
                        before.kind.value,
                        before.sha256,
                        before.size,
                        after.kind.value,
                        after.sha256,
                        after.size,
                        stamp,
                    ),
                )
                change_id = con.last_insert_rowid()
                chain.record(con, session_id, "change", str(change_id))
                for sharer in (shared or {}).get(path, ()):
                    _mark(con, change_id, sharer)

    def share(self, run_id: str, step: int, marks: Marks) -> None:
        """Mark what the command of ``run_id``'s ``step`` changed at these paths shared."""
        with self.db.write() as con:
            for change_id, path in self._commanded(con, run_id, step, marks):
                for sharer in marks[path]:
                    _mark(con, change_id, sharer)

    def unshare(self, run_id: str, step: int, marks: Marks) -> None:
        """Take back marks the command of ``run_id``'s ``step`` was found not to share."""
        with self.db.write() as con:
            for change_id, path in self._commanded(con, run_id, step, marks):
                for sharer in marks[path]:
                    con.execute(
                        "DELETE FROM change_share WHERE change_id = ? AND session_id = ?"
                        " AND turn_id = ?",
                        (change_id, sharer.session_id, sharer.turn_id),
                    )

    @staticmethod
    def _commanded(
        con: apsw.Connection, run_id: str, step: int, paths: Iterable[str]
    ) -> list[tuple[int, str]]:
        wanted = set(paths)
        rows: list[tuple[Any, ...]] = con.execute(
            "SELECT id, path FROM change WHERE run_id = ? AND step = ? AND source = 'command'",
            (run_id, step),
        ).fetchall()
        return [(int(r[0]), str(r[1])) for r in rows if r[1] in wanted]

    def turn_run(self, turn_id: str) -> TurnRun:
        with self.db.read() as con:
            return self._turn_run(con, turn_id)

    @staticmethod
    def _turn_run(con: apsw.Connection, turn_id: str) -> TurnRun:
        row = con.execute(
            "SELECT t.id, t.session_id, r.id FROM turn t JOIN run r ON r.turn_id = t.id"
            " WHERE t.id = ?",
            (turn_id,),
        ).fetchone()
        if row is None:
            raise NotFound(f"unknown turn {turn_id}", turnId=turn_id)
        return TurnRun(str(row[0]), str(row[1]), str(row[2]))

    def of_turns(self, turn_ids: Sequence[str]) -> list[Recorded]:
        """The changes the runs of these turns made, in the order they were made."""
        if not turn_ids:
            return []
        marks = ",".join("?" * len(turn_ids))
        with self.db.read() as con:
            rows: list[tuple[Any, ...]] = con.execute(
                "SELECT c.id, r.turn_id, c.run_id, c.step, c.path, c.source, c.before_kind,"
                " c.before_sha256, c.before_size, c.after_kind, c.after_sha256, c.after_size"
                " FROM change c JOIN run r ON r.id = c.run_id"
                f" WHERE r.turn_id IN ({marks}) ORDER BY c.id",
                list(turn_ids),
            ).fetchall()
            shares: dict[int, set[Sharer]] = {}
            for change_id, session_id, turn_id in con.execute(
                "SELECT s.change_id, s.session_id, s.turn_id FROM change_share s"
                " JOIN change c ON c.id = s.change_id JOIN run r ON r.id = c.run_id"
                f" WHERE r.turn_id IN ({marks})",
                list(turn_ids),
            ):
                shares.setdefault(int(change_id), set()).add(Sharer(session_id, turn_id))
        return [
            Recorded(
                int(r[0]),
                str(r[1]),
                str(r[2]),
                None if r[3] is None else int(r[3]),
                str(r[4]),
                str(r[5]),
                _content(r[6], r[7], int(r[8])),
                _content(r[9], r[10], int(r[11])),
                frozenset(shares.get(int(r[0]), ())),
            )
            for r in rows
        ]

    def load(self, content: Content) -> Content:
        """``content`` with its text, when the store keeps it."""
        if content.kind != Kind.TEXT or content.data is not None or content.sha256 is None:
            return content
        with self.db.read() as con:
            try:
                data = blobs.get(con, content.sha256)
            except KeyError:
                return content
        return Content(content.kind, content.sha256, content.size, data)

    def stored_bytes(self) -> int:
        """What the stored texts take in the store, compressed."""
        with self.db.read() as con:
            row = con.execute("SELECT coalesce(sum(length(data)), 0) FROM blob").fetchone()
        return int(row[0]) if row else 0


def _mark(con: apsw.Connection, change_id: int, sharer: Sharer) -> None:
    con.execute(
        "INSERT OR IGNORE INTO change_share(change_id, session_id, turn_id) VALUES (?, ?, ?)",
        (change_id, sharer.session_id, sharer.turn_id),
    )
