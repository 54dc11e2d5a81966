"""The project MCP servers (and hooks) the user approved: a root and the exact command line
(or URL) of a server its ``.trellisd.toml`` names. Kept in the user's store, never in the
repository, so a cloned repository cannot approve its own servers. ``revoke`` takes approvals
back: the next session over the root asks again."""

from __future__ import annotations

from collections.abc import Callable

from .db import Database, now


class McpApprovals:
    def __init__(self, db: Database) -> None:
        self.db = db

    def approved(self, root: str, command_line: str) -> bool:
        with self.db.read() as con:
            row = con.execute(
                "SELECT 1 FROM mcp_approval WHERE root = ? AND command_line = ?",
                (root, command_line),
            ).fetchone()
        return row is not None

    def approve(self, root: str, command_line: str) -> None:
        with self.db.write() as con:
            con.execute(
                "INSERT OR IGNORE INTO mcp_approval(root, command_line, approved_at)"
                " VALUES (?, ?, ?)",
                (root, command_line, now()),
            )

    def revoke(self, root: str, chosen: Callable[[str], bool]) -> int:
        """Delete the root's approvals whose line ``chosen`` picks; how many there were."""
        with self.db.write() as con:
            lines = [
                line
                for (line,) in con.execute(
                    "SELECT command_line FROM mcp_approval WHERE root = ?", (root,)
                )
                if chosen(line)
            ]
            for line in lines:
                con.execute(
                    "DELETE FROM mcp_approval WHERE root = ? AND command_line = ?", (root, line)
                )
        return len(lines)
