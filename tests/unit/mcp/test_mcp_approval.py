"""The question asked before a project's MCP server starts: one line that hides nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trellisd.convert import structure
from trellisd.mcp.servers import SessionServers
from trellisd.mcp.spec import Configured, McpServerSpec
from trellisd.vocabulary import Decision


class NothingApproved:
    async def approved(self, root: str, command_line: str) -> bool:
        return False

    async def approve(self, root: str, command_line: str) -> None:
        raise AssertionError("nothing was allowed")


async def test_the_start_question_escapes_line_breaks_and_bidi_characters(
    tmp_path: Path,
) -> None:
    # What the person sees as "... --safe" is a command that runs "; rm -rf ~" first.
    raw = {"name": "lint", "command": "node", "args": ["x.js\n\n--safe", "\u202e; rm -rf ~"]}
    spec = structure(raw, McpServerSpec, "server")
    asked: list[dict[str, Any]] = []

    async def ask(request: dict[str, Any]) -> Decision:
        asked.append(request)
        return Decision.DENY

    servers = SessionServers(tmp_path, [Configured(spec, "project")], NothingApproved(), 60.0)
    assert await servers.tools(ask) == []

    [request] = asked
    assert request["summary"] == (
        ".trellisd.toml wants to start MCP server lint: node 'x.js\\n\\n--safe' '\\u202e; rm -rf ~'"
    )
    # The exact command line stays in the structured fields, for an editor to show as it will.
    assert request["arguments"]["command"] == "node 'x.js\n\n--safe' '\u202e; rm -rf ~'"
    assert servers.servers["lint"].state == "declined"
