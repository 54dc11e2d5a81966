"""Each session's MCP servers: which there are, starting them when a turn needs their tools,
calling them, and stopping them.

A session's servers come from three sources, later ones replacing earlier ones of the same
name: the config file (``config``, a callable the daemon plugs in), the project's
``.trellisd.toml`` (``[[mcp]]``, read when the session's servers are first needed) and
``session/open``'s ``mcpServers`` (kept while this daemon serves the session).

A project's server runs code from a folder that may have come from anyone, so it starts only
once the user has approved its exact command line (or URL) for that root, and the content of
the root's files it runs (``pinned``), whatever the session's approval mode: the first turn
that needs it asks (``session/requestApproval``),
and an ``allow`` or ``allowAlways`` is kept in the user's store (``approvals``). A ``deny``
holds for the rest of the session.

A server that cannot start, crashes or hangs fails the call at hand with the reason, and is
started again for the next call (or turn).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from ..convert import structure
from ..daemon_settings import DEFAULT_MCP_TIMEOUT
from ..errors import InvalidParams
from ..oneline import summary_line
from ..policy.load import PROJECT_FILE, read_project_file
from ..sandbox.walls import Walls
from ..tools.base import ToolFailure
from ..vocabulary import Decision
from .answers import Answer, McpFailure
from .pinned import approval_line
from .spec import Configured, McpServerSpec, ProjectServers
from .tools import McpTool, offer

if TYPE_CHECKING:
    from .connection import McpConnection

log = logging.getLogger(__name__)

State = Literal["stopped", "running", "failed", "awaiting approval", "declined"]
DEFAULT_TIMEOUT_SECONDS = DEFAULT_MCP_TIMEOUT
START_TIMEOUT_SECONDS = 60.0

Ask = Callable[[dict[str, Any]], Awaitable[Decision]]
STARTS = (
    Decision.ALLOW,
    Decision.ALLOW_ALWAYS,
    Decision.ALLOW_ALWAYS_PROJECT,
    Decision.ALLOW_RULE,
    Decision.ALLOW_RULE_PROJECT,
)
"""Answers that start a project's MCP server (and remember its command line for the root)."""
Note = Callable[[dict[str, Any]], Awaitable[None]]


class Approvals(Protocol):
    """The user's store of approved project servers."""

    async def approved(self, root: str, command_line: str) -> bool: ...

    async def approve(self, root: str, command_line: str) -> None: ...

    async def revoke(self, root: str, chosen: Callable[[str], bool]) -> int:
        """Delete the root's approvals whose line ``chosen`` picks; how many there were."""
        ...


@dataclass
class Server:
    """One server of a session, with what is known of it now."""

    configured: Configured
    state: State = "stopped"
    error: str | None = None
    tools: list[McpTool] = field(default_factory=list)
    skipped: int = 0
    connection: McpConnection | None = None
    sandbox: dict[str, Any] | None = None
    """The walls it was last started in (``Walls.record``); None: none."""
    approved: bool = False
    """A project's server: whether the user's approval for the root was found (or given) when
    it was last asked to start; a revoked approval clears it, while the server runs on."""

    @property
    def name(self) -> str:
        return self.configured.spec.name

    def detail(self) -> dict[str, Any]:
        spec = self.configured.spec
        out: dict[str, Any] = {
            "name": spec.name,
            "source": self.configured.source,
            "transport": spec.transport,
            "state": self.state,
            "tools": len(self.tools),
        }
        if spec.command is not None:
            out["commandLine"] = spec.shown_line
        else:
            out["url"] = spec.url
        if self.skipped:
            out["skipped"] = self.skipped
        if self.error is not None:
            out["error"] = self.error
        if self.sandbox is not None:
            out["sandbox"] = self.sandbox
        if self.configured.source == "project":
            out["approved"] = self.approved
        return out


class SessionServers:
    """The MCP servers of one session over ``root``. ``search_path`` is the daemon's
    ``PATH``, where a server's program is looked for when its entry sets none."""

    def __init__(
        self,
        root: Path,
        configured: Sequence[Configured],
        approvals: Approvals,
        timeout: float,
        search_path: str = os.defpath,
        walls: Walls | None = None,
    ) -> None:
        self.root, self.approvals, self.timeout = root, approvals, timeout
        self.search_path = search_path
        self.walls = walls
        self.servers = {c.spec.name: Server(c) for c in configured}
        self._lock = asyncio.Lock()

    async def tools(self, ask: Ask | None = None, note: Note | None = None) -> list[McpTool]:
        """The tools of every server, starting those not running. A project server not yet
        approved is asked about through ``ask``; without ``ask`` it waits for a turn."""
        async with self._lock:
            for server in self.servers.values():
                if server.state in ("stopped", "failed", "awaiting approval"):
                    await self._start(server, ask, note)
            return [t for s in self.servers.values() for t in s.tools]

    async def _start(self, server: Server, ask: Ask | None, note: Note | None) -> None:
        spec = server.configured.spec
        if server.configured.source == "project" and not await self._approved(server, ask, note):
            return
        from .connection import McpConnection  # the SDK, imported when a server first starts

        walls = self._walls_of(server)
        server.sandbox = None if walls is None else walls.record()
        connection = McpConnection(spec, self.root, START_TIMEOUT_SECONDS, walls)
        try:
            listed = await connection.open()
        except McpFailure as exc:
            server.state, server.error, server.tools = "failed", str(exc), []
            if note is not None:
                await note(server.detail())
            return
        offered = offer(spec.name, listed, self._call)
        server.connection, server.state, server.error = connection, "running", None
        server.tools, server.skipped = offered.tools, offered.skipped
        if note is not None:
            await note(server.detail())

    def _walls_of(self, server: Server) -> Walls | None:
        """The walls a stdio server runs in: a project's always; the user's own (the config
        file's, ``session/open``'s) unless the config file names it in ``unconfinedMcp``."""
        walls = self.walls
        if walls is None or not walls.confined or server.configured.spec.command is None:
            return None
        if server.configured.source != "project" and server.name in walls.unconfined_servers:
            return None
        return walls

    async def _approved(self, server: Server, ask: Ask | None, note: Note | None) -> bool:
        spec, root = server.configured.spec, str(self.root)
        pinned = await asyncio.to_thread(approval_line, spec, self.root, self.search_path)
        server.approved = await self.approvals.approved(root, pinned)
        if server.approved:
            return True
        if ask is None:
            server.state = "awaiting approval"
            return False
        what = "command" if spec.command is not None else "url"
        request = {
            "tool": "start_mcp_server",
            "arguments": {"server": spec.name, what: spec.command_line},
            "summary": summary_line(
                f"{PROJECT_FILE} wants to start MCP server {spec.name}: {spec.command_line}"
            ),
            "mcp": {"server": spec.name, "source": "project", "start": spec.command_line},
        }
        decision = await ask(request)
        if decision in STARTS:
            await self.approvals.approve(root, pinned)
            server.approved = True
            return True
        server.state = "declined"
        server.error = f"the user did not approve starting it ({decision.value})"
        if note is not None:
            await note(server.detail())
        return False

    async def _call(self, name: str, tool: str, arguments: dict[str, Any]) -> Answer:
        server = self.servers.get(name)
        if server is None:
            raise ToolFailure(f"MCP server {name} is no longer configured")
        timeout = server.configured.spec.timeout or self.timeout
        async with self._lock:
            if server.connection is None or not server.connection.live:
                await self._stop(server)
                await self._start(server, None, None)
            connection = server.connection
        if connection is None:
            raise ToolFailure(server.error or f"MCP server {name} is not running")
        try:
            return await connection.call(tool, arguments, timeout)
        except McpFailure as exc:
            server.state, server.error = "failed", str(exc)
            await self._stop(server)
            raise ToolFailure(str(exc)) from exc

    async def _stop(self, server: Server) -> None:
        connection, server.connection = server.connection, None
        if connection is not None:
            await connection.stop()

    def detail(self) -> list[dict[str, Any]]:
        return [s.detail() for s in self.servers.values()]

    def revoked(self, command_line: str) -> None:
        """The approval of the project's server ``command_line`` was taken back: it is asked
        for when it next starts (a running one runs on until the session closes)."""
        for server in self.servers.values():
            if server.configured.source == "project":
                if server.configured.spec.command_line == command_line:
                    server.approved = False

    async def close(self) -> None:
        for server in self.servers.values():
            await self._stop(server)
            if server.state == "running":
                server.state = "stopped"


class McpServers:
    """Every session's MCP servers. ``config`` gives the config file's servers (none until
    the daemon plugs its config in); ``timeout`` and ``search_path`` are ``SessionServers``'."""

    def __init__(
        self,
        approvals: Approvals,
        config: Callable[[], Sequence[McpServerSpec]] = lambda: (),
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        search_path: str = os.defpath,
    ) -> None:
        self.approvals, self.config, self.timeout = approvals, config, timeout
        self.search_path = search_path
        self._given: dict[str, tuple[McpServerSpec, ...]] = {}
        self._by_session: dict[str, SessionServers] = {}

    def give(self, session_id: str, servers: Sequence[McpServerSpec]) -> None:
        """The servers ``session/open`` gave the session."""
        if servers:
            self._given[session_id] = tuple(servers)

    async def of(self, session_id: str, root: str, walls: Walls | None = None) -> SessionServers:
        """The session's servers; ``walls``: those its stdio servers start in."""
        servers = self._by_session.get(session_id)
        if servers is None:
            project = await asyncio.to_thread(project_servers, Path(root))
            configured: dict[str, Configured] = {}
            for spec in self.config():
                configured[spec.name] = Configured(spec, "config")
            for spec in project:
                configured[spec.name] = Configured(spec, "project")
            for spec in self._given.get(session_id, ()):
                configured[spec.name] = Configured(spec, "session")
            servers = SessionServers(
                Path(root),
                list(configured.values()),
                self.approvals,
                self.timeout,
                self.search_path,
                walls,
            )
            self._by_session[session_id] = servers
        return servers

    def revoked(self, root: str, command_line: str) -> None:
        """The root's approval of the project's server ``command_line`` was taken back."""
        for servers in self._by_session.values():
            if servers.root == Path(root):
                servers.revoked(command_line)

    async def close(self, session_id: str) -> None:
        """Stop the session's servers; they start again if it is used again."""
        self._given.pop(session_id, None)
        servers = self._by_session.pop(session_id, None)
        if servers is not None:
            await servers.close()

    async def close_all(self) -> None:
        sessions, self._by_session = list(self._by_session.values()), {}
        await asyncio.gather(*(s.close() for s in sessions))


def project_servers(root: Path) -> tuple[McpServerSpec, ...]:
    """The ``[[mcp]]`` servers of ``root/.trellisd.toml``."""
    data = read_project_file(root)
    if data is None:
        return ()
    path = root / PROJECT_FILE
    try:
        return structure(data, ProjectServers, "").mcp
    except InvalidParams as exc:
        raise InvalidParams(
            f"{path}: {exc.message}", field=f"{path}: {exc.data['field']}"
        ) from None
