"""MCP servers: the time to the first tool list from a stdio server, and what a call through
trellisd costs over calling the same server directly with the SDK.

    python tests/bench/bench_mcp.py [--runs 5] [--calls 200]

For each server (the SDK-built one of the tests, ``tests/fixtures/mcp_server.py``, and the npm
filesystem server if ``.ci/mcp-setup.sh`` installed it):

- first tool list: from ``McpConnection.open()`` (spawning the launcher and the server, the
  initialize handshake, ``tools/list``) to the list, ``--runs`` times;
- per call: ``--calls`` sequential calls of one cheap tool through ``SessionServers`` (what a
  turn's ``McpTool.run`` does: the lock, the launcher's relay, the timeout race) against the
  same calls with the SDK's ``Client`` on the server started directly (no launcher).

Prints one line per figure, in milliseconds (median, min, max).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "daemon")]

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402

from trellisd.mcp.connection import McpConnection  # noqa: E402
from trellisd.mcp.servers import SessionServers  # noqa: E402
from trellisd.mcp.spec import Configured, McpServerSpec  # noqa: E402
from trellisd.tools.base import ToolContext  # noqa: E402

FIXTURE = REPO / "tests" / "fixtures" / "mcp_server.py"
FILESYSTEM = (
    REPO / "tests/mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
)


class Trusting:
    async def approved(self, root: str, command_line: str) -> bool:
        return True

    async def approve(self, root: str, command_line: str) -> None:
        pass


def line(what: str, samples: list[float]) -> None:
    ms = [s * 1000 for s in samples]
    print(
        f"{what}: median {statistics.median(ms):.1f} ms, min {min(ms):.1f}, max {max(ms):.1f}"
        f" ({len(ms)} runs)"
    )


async def first_list(spec: McpServerSpec, root: Path, runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        connection = McpConnection(spec, root, 120.0)
        started = time.perf_counter()
        tools = await connection.open()
        samples.append(time.perf_counter() - started)
        assert tools
        await connection.stop()
    return samples


async def through_trellisd(
    spec: McpServerSpec, root: Path, tool: str, arguments: dict[str, Any], calls: int
) -> list[float]:
    servers = SessionServers(root, [Configured(spec, "session")], Trusting(), 60.0)
    offered = {t.remote: t for t in await servers.tools()}
    context = ToolContext(root)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        await offered[tool].run(arguments, context)
        samples.append(time.perf_counter() - started)
    await servers.close()
    return samples


async def direct(
    spec: McpServerSpec, root: Path, tool: str, arguments: dict[str, Any], calls: int
) -> list[float]:
    assert spec.command is not None
    params = StdioServerParameters(command=spec.command, args=list(spec.args), cwd=str(root))
    samples = []
    async with Client(params, mode="legacy") as client:
        await client.list_tools()
        for _ in range(calls):
            started = time.perf_counter()
            await client.call_tool(tool, arguments)
            samples.append(time.perf_counter() - started)
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--calls", type=int, default=200)
    options = parser.parse_args()
    root = REPO
    servers: list[tuple[str, McpServerSpec, str, dict[str, Any]]] = [
        (
            "SDK server (tests/fixtures/mcp_server.py)",
            McpServerSpec("t", command=sys.executable, args=(str(FIXTURE),)),
            "echo",
            {"text": "hello"},
        )
    ]
    if FILESYSTEM.is_file():
        servers.append(
            (
                "npm @modelcontextprotocol/server-filesystem",
                McpServerSpec("fs", command="node", args=(str(FILESYSTEM), str(root))),
                "list_allowed_directories",
                {},
            )
        )
    else:
        print("npm filesystem server not installed (.ci/mcp-setup.sh): measuring the SDK one only")
    for name, spec, tool, arguments in servers:
        print(f"== {name}")
        line(
            "first tool list (spawn, handshake, tools/list)",
            await first_list(spec, root, options.runs),
        )
        via = await through_trellisd(spec, root, tool, arguments, options.calls)
        plain = await direct(spec, root, tool, arguments, options.calls)
        line(f"call {tool} through trellisd (launcher, lock, timeout race)", via)
        line(f"call {tool} with the SDK directly", plain)
        overhead = statistics.median(via) - statistics.median(plain)
        print(f"per-call overhead: {overhead * 1000:+.2f} ms (median against median)")


if __name__ == "__main__":
    asyncio.run(main())
