"""A project's MCP server starts on any allow answer to its approval (the rule answers
included: a server's start proposes no rule, so they allow it as "always" does) and is
declined on any other."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from trellisd.convert import structure
from trellisd.mcp.servers import SessionServers
from trellisd.mcp.spec import Configured, McpServerSpec
from trellisd.vocabulary import Decision

FIXTURE = Path(__file__).parents[2] / "fixtures" / "mcp_server.py"


class Remembered:
    def __init__(self) -> None:
        self.kept: set[tuple[str, str]] = set()

    async def approved(self, root: str, command_line: str) -> bool:
        return (root, command_line) in self.kept

    async def approve(self, root: str, command_line: str) -> None:
        self.kept.add((root, command_line))


@pytest.mark.parametrize(
    ("decision", "state"),
    [
        (Decision.ALLOW, "running"),
        (Decision.ALLOW_ALWAYS, "running"),
        (Decision.ALLOW_ALWAYS_PROJECT, "running"),
        (Decision.ALLOW_RULE, "running"),
        (Decision.ALLOW_RULE_PROJECT, "running"),
        (Decision.DENY, "declined"),
        (Decision.TIMEOUT, "declined"),
    ],
)
async def test_a_project_server_starts_on_any_allow_answer(
    tmp_path: Path, decision: Decision, state: str
) -> None:
    script = tmp_path / "server.py"
    script.write_text(FIXTURE.read_text())
    raw = {"name": "proj", "command": sys.executable, "args": ["server.py", "stdio"]}
    entry = structure(raw, McpServerSpec, "mcpServers[0]")
    approvals = Remembered()
    asked: list[dict[str, Any]] = []

    async def answer(request: dict[str, Any]) -> Decision:
        asked.append(request)
        return decision

    servers = SessionServers(tmp_path, [Configured(entry, "project")], approvals, 5.0)
    try:
        await servers.tools(answer)
        assert servers.detail()[0]["state"] == state
    finally:
        await asyncio.wait_for(servers.close(), 5)
    assert len(asked) == 1 and "proposedRule" not in asked[0]
    assert bool(approvals.kept) == (state == "running")
