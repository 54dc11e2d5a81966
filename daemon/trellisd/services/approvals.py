"""The user's approvals of a project's programs, taken back: a hook or an MCP server that a
root's ``.trellisd.toml`` names runs only once the user approved its exact command line for
that root (``hooks``, ``mcp.servers``), and ``session/revoke`` deletes that approval from the
user's store. The hook is asked about again at its event's next turn, and the server when it
next starts; a server running now runs on until its session is closed.

An approval is kept as a line (``mcp.pinned``): a hook's is led by ``hook <event>``, and both
end with the digests of the root's files they run. A revoke names the command line alone, so
it takes back every approval of it for the root: a hook's for each of its events, and the
approvals of earlier contents of its files.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Literal

from ..errors import NotFound
from ..mcp import McpServers
from ..mcp.pinned import approved_command
from ..mcp.servers import Approvals, project_servers
from ..policy.layers import Policy
from ..store.facade import AsyncStore
from .hooks import HOOK_LINE, HookService
from .policies import Policies

Program = Literal["hook", "mcpServer"]
PROGRAMS: tuple[Program, ...] = ("hook", "mcpServer")


def hook_command(line: str) -> str | None:
    """The command line a hook's approval line was kept for; None: a server's line."""
    if not line.startswith(HOOK_LINE) or "\n" not in line:
        return None
    return approved_command(line.split("\n", 1)[1])


def _server_line(root: str, shown: str) -> str:
    """The exact command line (or URL) of the root's project server that ``session/tools``
    lists as ``shown`` (secrets left out of it); ``shown`` itself when none is."""
    for spec in project_servers(Path(root)):
        if shown in (spec.shown_line, spec.command_line):
            return spec.command_line
    return shown


class ProjectApprovals:
    """Takes back the user's approval of a project's hook or MCP server."""

    def __init__(
        self,
        store: AsyncStore,
        policies: Policies,
        approvals: Approvals,
        hooks: HookService,
        mcp: McpServers,
    ) -> None:
        self.store, self.policies, self.approvals = store, policies, approvals
        self.hooks, self.mcp = hooks, mcp

    async def revoke(self, session_id: str, kind: Program, target: str) -> Policy:
        """Delete every approval of ``target`` (a hook's or a server's command line, as
        ``session/hooks`` and ``session/tools`` list it) for the session's root; the session's
        policy, which it leaves as it is. ``NotFound`` when there is none."""
        session = await self.store.sessions.get(session_id)
        root = session.root
        if kind == "hook":
            removed = await self.approvals.revoke(root, lambda line: hook_command(line) == target)
            self.hooks.revoked(root, target)
        else:
            exact = await asyncio.to_thread(_server_line, root, target)
            removed = await self.approvals.revoke(
                root, lambda line: hook_command(line) is None and approved_command(line) == exact
            )
            self.mcp.revoked(root, exact)
        if not removed:
            what = "hook" if kind == "hook" else "MCP server"
            raise NotFound(
                f"no approval of the {what} {target} for {root}",
                sessionId=session_id,
                kind=kind,
                target=target,
            )
        return await self.policies.of(session)
