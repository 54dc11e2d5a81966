"""The project MCP servers the user approved: a root and the exact command line (or URL) of
a server its ``.trellisd.toml`` names. Kept in the user's store, never in the repository, so
a cloned repository cannot approve its own servers."""

from __future__ import annotations

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
