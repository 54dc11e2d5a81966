"""MCP in-process: server entries, the tools offered from what a server lists, the launcher."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from trellisd.convert import structure
from trellisd.daemon_settings import mcp_timeout
from trellisd.errors import InvalidParams
from trellisd.mcp.answers import Answer, RemoteTool
from trellisd.mcp.launcher import __file__ as LAUNCHER
from trellisd.mcp.servers import project_servers
from trellisd.mcp.spec import McpServerSpec
from trellisd.mcp.tools import MAX_RESULT_CHARS, MAX_TOOLS, McpTool, offer
from trellisd.tools import RunCommand, ToolContext, ToolFailure


def spec(raw: dict[str, Any]) -> McpServerSpec:
    return structure(raw, McpServerSpec, "server")


def test_an_entry_is_a_command_or_a_url_and_its_line_names_what_it_runs() -> None:
    stdio = spec({"name": "fs", "command": "npx", "args": ["-y", "a b"], "env": {"X": "1"}})
    assert stdio.transport == "stdio"
    assert stdio.command_line == "X=1 npx -y 'a b'"
    keyed = spec({"name": "gh", "command": "gh-mcp", "env": {"GITHUB_TOKEN": "ghp_1", "A": "2"}})
    assert keyed.command_line == "A=2 GITHUB_TOKEN=ghp_1 gh-mcp"
    assert keyed.shown_line == "A=2 GITHUB_TOKEN=… gh-mcp"
    assert spec({"name": "fs", "command": "x", "cwd": "sub dir"}).command_line == "x (in 'sub dir')"
    http = spec({"name": "web", "url": "http://127.0.0.1:9/mcp", "type": "http"})
    assert http.transport == "http" and http.command_line == "http://127.0.0.1:9/mcp"


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        ({"name": "a", "command": "x", "url": "http://h"}, "needs either command"),
        ({"name": "a"}, "needs either command"),
        ({"name": "a__b", "command": "x"}, "server.name must be 1 to 32 letters"),
        ({"name": "a b", "command": "x"}, "server.name must be 1 to 32 letters"),
        ({"name": "a", "url": "file:///etc/passwd"}, "server.url must be an http"),
        ({"name": "a", "url": "http://h", "args": ["x"]}, "args, env and cwd are for a command"),
        ({"name": "a", "command": "x", "headers": {"A": "b"}}, "server.headers are for a url"),
        ({"name": "a", "command": "x", "timeout": 0}, "server.timeout must be a number"),
        ({"name": "a", "command": "x", "env": {"A=B": "c"}}, "server.env.A=B must map names"),
        ({"name": "a", "command": "x", "args": "not a list"}, "server.args must be an array"),
    ],
)
def test_a_bad_entry_is_refused_naming_the_field(raw: dict[str, Any], said: str) -> None:
    with pytest.raises(InvalidParams) as refused:
        spec(raw)
    assert said in refused.value.message


def test_a_project_files_mcp_tables_are_read_and_a_bad_one_names_the_file(
    tmp_path: Path,
) -> None:
    assert project_servers(tmp_path) == ()
    (tmp_path / ".trellisd.toml").write_text(
        '[[layers]]\nname = "p"\n[[mcp]]\nname = "one"\ncommand = "x"\n'
    )
    assert [s.name for s in project_servers(tmp_path)] == ["one"]
    (tmp_path / ".trellisd.toml").write_text('[[mcp]]\nname = "bad name"\ncommand = "x"\n')
    with pytest.raises(InvalidParams) as refused:
        project_servers(tmp_path)
    assert str(tmp_path / ".trellisd.toml") in refused.value.message
    assert refused.value.data["field"].endswith("mcp[0].name")


def test_the_call_timeout_comes_from_the_environment() -> None:
    assert mcp_timeout({}) == 60.0
    assert mcp_timeout({"TRELLISD_MCP_TIMEOUT": "2.5"}) == 2.5
    assert mcp_timeout({"TRELLISD_MCP_TIMEOUT": "-1"}) == 60.0
    assert mcp_timeout({"TRELLISD_MCP_TIMEOUT": "soon"}) == 60.0


async def _never(server: str, tool: str, arguments: dict[str, Any]) -> Answer:
    raise AssertionError("not called")


def _remote(name: Any, schema: Any = None, description: Any = "d") -> RemoteTool:
    return RemoteTool(name, description, {"type": "object"} if schema is None else schema)


def test_only_tools_with_good_names_and_schemas_are_offered() -> None:
    deep: dict[str, Any] = {"type": "object"}
    inner = deep
    for _ in range(20):
        inner["properties"] = {"x": {"type": "object"}}
        inner = inner["properties"]["x"]
    listed = [
        _remote("good", description="x" * 5000),
        _remote("has space"),
        _remote("x" * 60),  # mcp__srv__ + 60 characters is past 64
        _remote(None),
        _remote("good"),  # twice
        _remote("not_object", {"type": "string"}),
        _remote("no_schema", "a string"),
        _remote("huge", {"type": "object", "description": "y" * 40000}),
        _remote("deep", deep),
    ]
    offered = offer("srv", listed, _never)
    assert [t.name for t in offered.tools] == ["mcp__srv__good"]
    assert offered.skipped == 8
    assert len(offered.tools[0].description) == 2001


def test_a_server_offers_at_most_max_tools() -> None:
    offered = offer("s", [_remote(f"t{i}") for i in range(MAX_TOOLS + 5)], _never)
    assert len(offered.tools) == MAX_TOOLS and offered.skipped == 5


async def test_a_call_is_an_exec_of_its_target_and_its_answer_is_capped(tmp_path: Path) -> None:
    async def answer(server: str, tool: str, arguments: dict[str, Any]) -> Answer:
        return Answer("a" * (MAX_RESULT_CHARS * 2), arguments.get("fail", False))

    tool = McpTool("srv", "read", "d", {"type": "object"}, answer)
    context = ToolContext(tmp_path)
    action = tool.action({}, context)
    assert (action.kind, action.target) == ("exec", "mcp:srv/read")
    text = await tool.run({}, context)
    assert len(text) < MAX_RESULT_CHARS + 100 and "characters left out" in text
    with pytest.raises(ToolFailure):
        await tool.run({"fail": True}, context)


def test_a_command_may_not_pass_for_an_mcp_call(tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match="may not start with 'mcp:'"):
        RunCommand().action({"argv": ["mcp:srv/read"]}, ToolContext(tmp_path))


def _launch(limit: int, code: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-I", LAUNCHER, str(os.getpid()), str(limit), "--"]
    return subprocess.run(
        [*argv, sys.executable, "-c", code],
        capture_output=True,
        text=True,
        start_new_session=True,
        check=False,
    )


def test_the_launcher_relays_messages_and_says_how_the_server_ended() -> None:
    done = _launch(1000, "import sys; print('one'); print('two'); sys.exit(4)")
    assert done.stdout == "one\ntwo\n"
    assert done.returncode == 4
    assert "the MCP server exited with code 4" in done.stderr


def test_the_launcher_stops_a_server_that_sends_a_message_past_the_limit() -> None:
    done = _launch(1000, "import sys; print('ok'); sys.stdout.write('x' * 5000); print()")
    assert "longer than 1000 bytes" in done.stderr
    assert "x" * 1000 not in done.stdout
    assert done.returncode == -9


def test_the_launcher_refuses_to_start_once_its_daemon_is_gone() -> None:
    argv = [sys.executable, "-I", LAUNCHER, "1", "1000", "--", sys.executable, "-c", "print(1)"]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 1 and done.stdout == ""


async def test_a_session_without_servers_starts_nothing(tmp_path: Path) -> None:
    from trellisd.mcp.servers import SessionServers

    class Never:
        async def approved(self, root: str, command_line: str) -> bool:
            raise AssertionError

        async def approve(self, root: str, command_line: str) -> None:
            raise AssertionError

    servers = SessionServers(tmp_path, [], Never(), 1.0)
    assert await servers.tools() == []
    await asyncio.wait_for(servers.close(), 5)


async def test_an_approved_project_server_whose_script_changed_is_asked_about_again(
    tmp_path: Path,
) -> None:
    from trellisd.mcp.servers import SessionServers
    from trellisd.mcp.spec import Configured
    from trellisd.vocabulary import Decision

    class Remembered:
        def __init__(self) -> None:
            self.kept: set[tuple[str, str]] = set()

        async def approved(self, root: str, command_line: str) -> bool:
            return (root, command_line) in self.kept

        async def approve(self, root: str, command_line: str) -> None:
            self.kept.add((root, command_line))

    asked: list[dict[str, Any]] = []

    async def allow(request: dict[str, Any]) -> Decision:
        asked.append(request)
        return Decision.ALLOW

    script = tmp_path / "tools" / "server.py"
    script.parent.mkdir()
    script.write_text(Path(__file__).parents[2].joinpath("fixtures/mcp_server.py").read_text())
    (tmp_path / "notes.txt").write_text("an argument that is a file\n")
    entry = spec({"name": "proj", "command": sys.executable, "args": ["tools/server.py", "stdio"]})
    approvals = Remembered()

    async def state(ask: Any = None, what: McpServerSpec = entry) -> str:
        servers = SessionServers(tmp_path, [Configured(what, "project")], approvals, 5.0)
        try:
            await servers.tools(ask)
            return str(servers.detail()[0]["state"])
        finally:
            await servers.close()

    assert await state(allow) == "running" and len(asked) == 1
    assert await state() == "running"  # approved: it starts unasked
    with script.open("a") as f:
        f.write("\nprint('something else now', file=__import__('sys').stderr)\n")
    assert await state() == "awaiting approval"  # the script changed: asked again

    with_file = spec({**_entry(entry), "args": ["tools/server.py", "stdio", "notes.txt"]})
    assert await state(allow, with_file) == "running" and len(asked) == 2
    (tmp_path / "notes.txt").write_text("changed\n")
    assert await state(None, with_file) == "awaiting approval"  # an argument's file changed


def _entry(entry: McpServerSpec) -> dict[str, Any]:
    return {"name": entry.name, "command": entry.command, "args": list(entry.args)}
