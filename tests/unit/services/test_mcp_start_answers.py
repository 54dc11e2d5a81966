"""A project's MCP server starts on any allow answer to its approval (the rule answers
included: a server's start proposes no rule, so they allow it as "always" does), which the
store keeps for the root; any other answer declines it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from trellisd.convert import structure
from trellisd.mcp.servers import SessionServers
from trellisd.mcp.spec import Configured, McpServerSpec
from trellisd.services import Services
from trellisd.vocabulary import Decision

FIXTURE = Path(__file__).parents[2] / "fixtures" / "mcp_server.py"


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
    app: Services, root: Path, decision: Decision, state: str
) -> None:
    (root / "server.py").write_text(FIXTURE.read_text())
    raw = {"name": "proj", "command": sys.executable, "args": ["server.py", "stdio"]}
    entry = structure(raw, McpServerSpec, "mcpServers[0]")
    asked: list[dict[str, Any]] = []

    async def answer(request: dict[str, Any]) -> Decision:
        asked.append(request)
        return decision

    async def started(ask: Any) -> str:
        configured = [Configured(entry, "project")]
        servers = SessionServers(root, configured, app.store.mcp_approvals, 5.0)
        try:
            await servers.tools(ask)
            return str(servers.detail()[0]["state"])
        finally:
            await asyncio.wait_for(servers.close(), 5)

    assert await started(answer) == state
    assert len(asked) == 1 and "proposedRule" not in asked[0]
    kept = "running" if state == "running" else "awaiting approval"
    assert await started(None) == kept  # approved for the root: it starts unasked
