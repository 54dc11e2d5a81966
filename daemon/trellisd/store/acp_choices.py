"""What the user chose for a session, kept with it so that it holds after a restart and in
every window: its approval mode (``session/mode``, ACP's ``session/set_mode``), and for an
ACP client its model and the requests the user rejected for good (``reject_always``, by the
request's summary). Deleting a session deletes them (a trigger of the migration that made
their tables).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .db import Database, now

MODES = ("all", "auto", "acceptEdits", "ask", "plan", "read-only")
"""The approval modes a choice names (``services.policies.KEPT``), ``never`` as ACP's mode id
``read-only``."""


@dataclass(frozen=True)
class AcpChoice:
    mode: str | None = None
    model: str | None = None
    rejected: frozenset[str] = field(default_factory=frozenset)


class AcpChoices:
    def __init__(self, db: Database) -> None:
        self.db = db

    def of(self, session_id: str) -> AcpChoice:
        with self.db.read() as con:
            row = con.execute(
                "SELECT mode, model FROM acp_choice WHERE session_id = ?", (session_id,)
            ).fetchone()
            rejected = con.execute(
                "SELECT summary FROM acp_rejection WHERE session_id = ?", (session_id,)
            ).fetchall()
        mode, model = (None, None) if row is None else (row[0], row[1])
        return AcpChoice(
            None if mode is None else str(mode),
            None if model is None else str(model),
            frozenset(str(r[0]) for r in rejected),
        )

    def choose_mode(self, session_id: str, mode: str) -> None:
        self._choose(session_id, "mode", mode)

    def choose_model(self, session_id: str, model: str) -> None:
        self._choose(session_id, "model", model)

    def _choose(self, session_id: str, column: str, value: str) -> None:
        assert column in ("mode", "model")
        with self.db.write() as con:
            con.execute(
                f"INSERT INTO acp_choice(session_id, {column}, updated_at) VALUES (?, ?, ?)"
                f" ON CONFLICT(session_id) DO UPDATE SET {column} = excluded.{column},"
                " updated_at = excluded.updated_at",
                (session_id, value, now()),
            )

    def reject(self, session_id: str, summary: str) -> None:
        with self.db.write() as con:
            con.execute(
                "INSERT OR IGNORE INTO acp_rejection(session_id, summary, created_at)"
                " VALUES (?, ?, ?)",
                (session_id, summary, now()),
            )

    def copy(self, origin_id: str, fork_id: str) -> None:
        """A fork starts with its origin's choices."""
        with self.db.write() as con:
            con.execute(
                "INSERT OR REPLACE INTO acp_choice(session_id, mode, model, updated_at)"
                " SELECT ?, mode, model, ? FROM acp_choice WHERE session_id = ?",
                (fork_id, now(), origin_id),
            )
            con.execute(
                "INSERT OR IGNORE INTO acp_rejection(session_id, summary, created_at)"
                " SELECT ?, summary, ? FROM acp_rejection WHERE session_id = ?",
                (fork_id, now(), origin_id),
            )
