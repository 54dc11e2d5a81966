"""Which MCP stdio servers start inside the walls: a project's always, the user's own unless
the config file names it in ``unconfinedMcp``. Real servers, started and asked for their
tools."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

from tests.fixtures.reachable import reachable
from trellisd.mcp.servers import SessionServers
from trellisd.mcp.spec import Configured, McpServerSpec
from trellisd.sandbox.walls import Walls

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")

SERVER = str(reachable(Path(__file__).parents[2] / "fixtures" / "mcp_server.py"))


class AllApproved:
    async def approved(self, root: str, command_line: str) -> bool:
        return True

    async def approve(self, root: str, command_line: str) -> None:
        pass


@pytest.mark.parametrize(
    ("source", "walled"), [("config", False), ("session", False), ("project", True)]
)
async def test_only_the_users_own_server_may_opt_out_of_the_walls(
    tmp_path: Path, source: str, walled: bool
) -> None:
    spec = McpServerSpec(name="t", command=sys.executable, args=(SERVER, "stdio"))
    walls = Walls("workspace-write", False, tmp_path, unconfined_servers=frozenset({"t"}))
    servers = SessionServers(
        tmp_path,
        [Configured(spec, source)],
        AllApproved(),
        30.0,
        walls=walls,
    )
    try:
        assert await servers.tools()
        [detail] = servers.detail()
        assert detail["state"] == "running"
        assert ("sandbox" in detail) == walled
    finally:
        await servers.close()


async def test_a_server_not_named_runs_inside_the_walls(tmp_path: Path) -> None:
    spec = McpServerSpec(name="other", command=sys.executable, args=(SERVER, "stdio"))
    walls = Walls("read-only", False, tmp_path, unconfined_servers=frozenset({"t"}))
    servers = SessionServers(
        tmp_path, [Configured(spec, "config")], AllApproved(), 30.0, walls=walls
    )
    try:
        assert await servers.tools()
        assert servers.detail()[0]["sandbox"] == {"mode": "read-only", "network": False}
    finally:
        await servers.close()
