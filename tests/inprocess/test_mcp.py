"""MCP servers over real pipes: real MCP servers (one built with the SDK's MCPServer, the npm
filesystem server, one over streamable HTTP on 127.0.0.1), offered, asked for, recorded,
restarted, and bounded."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.driver import (
    ALLOW_MCP,
    UNWALLED_MCP,
    Daemon,
    DaemonFactory,
    answer_approvals,
    call,
    events,
    one_call,
    open_session,
    stdio,
    turn,
)
from tests.fixtures.driver import MCP_SERVER as SERVER
from tests.fixtures.model_server import ModelServer
from tests.fixtures.reachable import reachable
from tests.fixtures.waits import alive, eventually

FILESYSTEM = (
    Path(__file__).parents[1]
    / "mcp-servers/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
)


async def test_a_session_server_tool_is_offered_asked_for_and_recorded(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn(env={"GITHUB_TOKEN": "ghp-secret", "SOME_PASSWORD": "hunter2"})
    asked = answer_approvals(daemon, ["allow", "allow"])
    session = await open_session(daemon, workspace, mcpServers=[stdio(env={"GREETING": "hello"})])
    said, result = await one_call(daemon, model, session, call("mcp__t__echo", text="hi there"))

    assert said == "hi there"
    offered = {t["function"]["name"]: t["function"] for t in model.requests[0]["tools"]}
    assert offered["mcp__t__echo"]["parameters"]["properties"]["text"]["type"] == "string"
    assert offered["mcp__t__echo"]["description"] == "Say the text back."
    assert asked[0]["tool"] == "mcp__t__echo"
    assert asked[0]["mcp"] == {"server": "t", "tool": "echo"}
    assert asked[0]["summary"] == "mcp__t__echo wants to exec mcp:t/echo"
    approval = (await events(daemon, result["runId"], "approval"))[0]["detail"]
    assert approval["action"] == {"kind": "exec", "target": "mcp:t/echo"}
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert steps[0]["toolCall"]["arguments"] == {"text": "hi there"}

    seen, _ = await one_call(daemon, model, session, call("mcp__t__environment"))
    names = seen.split("\n")
    assert "GREETING" in names and "PATH" in names
    assert "GITHUB_TOKEN" not in names and "SOME_PASSWORD" not in names
    assert "TRELLISD_API_KEY" not in names


async def test_a_stdio_server_gets_only_the_allowed_variables_and_its_own(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn(
        env={
            "PLAIN_SETTING": "plain",
            "DATABASE_URL": "postgres://app:pw@db/app",
            "SSH_AUTH_SOCK": "/tmp/agent.sock",
            "LANG": "C.UTF-8",
            "LC_MESSAGES": "C",
        }
    )
    answer_approvals(daemon, ["allow"])
    session = await open_session(daemon, workspace, mcpServers=[stdio(env={"GREETING": "hi"})])
    seen, _ = await one_call(daemon, model, session, call("mcp__t__environment"))
    names = set(seen.split("\n"))
    # TRELLISD_RUN is the daemon's mark, which finds what the server started when it ends;
    # PWD is the folder the walls start the server in, as bwrap sets it.
    allowed = {
        "PWD",
        "PATH",
        "HOME",
        "LANG",
        "TERM",
        "TMPDIR",
        "USER",
        "SHELL",
        "GREETING",
        "TRELLISD_RUN",
    }
    assert {"PATH", "HOME", "LANG", "LC_MESSAGES", "GREETING"} <= names
    assert {n for n in names if not n.startswith("LC_")} <= allowed, names


async def test_session_tools_lists_builtin_and_mcp_tools_with_the_policy(
    daemon: Daemon, workspace: Path
) -> None:
    policy = {"layers": [{"name": "p", "allowExec": ["mcp:t/*"], "denyExec": ["mcp:t/crash"]}]}
    session = await open_session(daemon, workspace, mcpServers=[stdio()], policy=policy)
    listed = await daemon.call("session/tools", {"sessionId": session["sessionId"]})

    by_name = {t["name"]: t for t in listed["tools"]}
    assert by_name["read_file"]["source"] == "builtin"
    assert by_name["read_file"]["policy"] == "depends"
    assert by_name["mcp__t__echo"] == {
        "name": "mcp__t__echo",
        "description": "Say the text back.",
        "source": "mcp",
        "server": "t",
        "kind": "exec",
        "target": "mcp:t/echo",
        "policy": "ask",
    }
    assert by_name["mcp__t__crash"]["policy"] == "refuse"
    [server] = listed["servers"]
    assert server["name"] == "t" and server["state"] == "running" and server["tools"] == 8
    assert server["source"] == "session" and server["transport"] == "stdio"


async def test_a_reopen_in_a_new_daemon_gets_the_editors_servers_again(
    spawn: DaemonFactory, workspace: Path
) -> None:
    first = await spawn()
    session = await open_session(first, workspace, mcpServers=[stdio()])
    await first.client.shutdown_session()

    # Session servers are not stored: a daemon started since has none until the editor
    # gives them with the reopen, as it gave them with the open.
    second = await spawn()
    sid = session["sessionId"]
    await second.call("session/reopen", {"sessionId": sid})
    assert (await second.call("session/tools", {"sessionId": sid}))["servers"] == []
    await second.call("session/close", {"sessionId": sid})
    await second.call("session/reopen", {"sessionId": sid, "mcpServers": [stdio()]})
    listed = await second.call("session/tools", {"sessionId": sid})
    [server] = listed["servers"]
    assert server["name"] == "t" and server["source"] == "session"
    assert "mcp__t__echo" in {t["name"] for t in listed["tools"]}
    error = await second.error("session/reopen", {"sessionId": sid, "mcpServers": [{"name": 1}]})
    assert error.code == -32602 and "mcpServers" in str(error)


async def test_a_denied_mcp_tool_is_refused_by_the_policy(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    policy = {
        "layers": [{"name": "p", "allowExec": ["mcp:*"], "denyExec": ["mcp:t/add"]}],
        "approval": "all",
    }
    session = await open_session(daemon, workspace, mcpServers=[stdio()], policy=policy)
    said, result = await one_call(daemon, model, session, call("mcp__t__add", a=1, b=2))

    assert said.startswith("refused by the session's policy")
    refusal = (await events(daemon, result["runId"], "refusal"))[0]["detail"]
    assert refusal["rule"] == "mcp:t/add"
    said, _ = await one_call(daemon, model, session, call("mcp__t__echo", text="allowed"))
    assert said == "allowed"


async def test_a_crashing_server_fails_the_call_with_the_reason_and_restarts(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, mcpServers=[stdio()], policy=UNWALLED_MCP)
    first, _ = await one_call(daemon, model, session, call("mcp__t__pid"))
    said, _ = await one_call(daemon, model, session, call("mcp__t__crash"))

    assert said.startswith("error: MCP server t stopped")
    assert "crashing on purpose" in said and "exited with code 3" in said
    second, _ = await one_call(daemon, model, session, call("mcp__t__pid"))
    assert second != first and alive(int(second))
    assert not alive(int(first))


async def test_a_hanging_server_fails_the_call_after_its_timeout_and_restarts(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(
        daemon, workspace, mcpServers=[stdio(timeout=5)], policy=UNWALLED_MCP
    )
    first, _ = await one_call(daemon, model, session, call("mcp__t__pid"))
    said, _ = await one_call(daemon, model, session, call("mcp__t__hang"))

    assert said == "error: MCP server t did not answer hang within 5 seconds; it was stopped"
    await eventually(lambda: not alive(int(first)), "the hung server is stopped")
    said, _ = await one_call(daemon, model, session, call("mcp__t__echo", text="back"))
    assert said == "back"


async def test_a_server_error_answer_reaches_the_model_as_an_error(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, mcpServers=[stdio()], policy=ALLOW_MCP)
    said, _ = await one_call(daemon, model, session, call("mcp__t__fail"))
    assert said == "error: Error executing tool fail"


async def test_a_server_with_100_tools_and_bad_ones_offers_the_good_ones(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    servers = [stdio("many", "--many", "100", "--bad")]
    session = await open_session(daemon, workspace, mcpServers=servers, policy=ALLOW_MCP)
    said, _ = await one_call(daemon, model, session, call("mcp__many__tool_99", x=4))

    assert said == "tool 99 got 4"
    offered = [t["function"]["name"] for t in model.requests[0]["tools"]]
    assert len([n for n in offered if n.startswith("mcp__many__")]) == 108
    assert all(len(n) <= 64 for n in offered)
    assert "mcp__many__huge_schema" not in offered
    listed = await daemon.call("session/tools", {"sessionId": session["sessionId"]})
    assert listed["servers"][0]["skipped"] == 3


@pytest.fixture(params=["events"])
def http_server(request: pytest.FixtureRequest) -> Iterator[str]:
    """The test server over streamable HTTP: answering in event streams, or ``json``."""
    flags = ["--json"] if request.param == "json" else []
    process = subprocess.Popen(
        [sys.executable, SERVER, "http", *flags], stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    line = process.stdout.readline()
    try:
        assert line.startswith("port "), line
        yield f"http://127.0.0.1:{line.split()[1]}/mcp"
    finally:
        process.terminate()
        process.wait()
        process.stdout.close()


async def test_a_streamable_http_server_on_loopback(
    daemon: Daemon, model: ModelServer, workspace: Path, http_server: str
) -> None:
    servers = [{"name": "web", "url": http_server, "headers": {"X-Test": "1"}}]
    session = await open_session(daemon, workspace, mcpServers=servers, policy=ALLOW_MCP)
    said, _ = await one_call(daemon, model, session, call("mcp__web__add", a=2, b=40))

    assert said == "42"
    listed = await daemon.call("session/tools", {"sessionId": session["sessionId"]})
    assert listed["servers"][0]["transport"] == "http"
    assert listed["servers"][0]["url"] == http_server


@pytest.mark.parametrize("http_server", ["events", "json"], indirect=True)
async def test_an_http_answer_past_the_limit_fails_its_call_and_the_server_serves_on(
    daemon: Daemon, model: ModelServer, workspace: Path, http_server: str
) -> None:
    servers = [{"name": "web", "url": http_server}]
    session = await open_session(daemon, workspace, mcpServers=servers, policy=ALLOW_MCP)
    said, _ = await one_call(daemon, model, session, call("mcp__web__big", mib=2))
    assert said.startswith("x" * 1000), said[:200]  # past the SDK's own 1 MiB for an event

    said, result = await one_call(daemon, model, session, call("mcp__web__big", mib=17))
    assert result["outcome"] == "finished"
    # an event past the limit ends the stream (the server is started again for the next
    # call); a JSON answer past it fails its call by name
    assert said.startswith("error: MCP server web"), said[:200]
    said, _ = await one_call(daemon, model, session, call("mcp__web__add", a=2, b=40))
    assert said == "42"


@pytest.mark.skipif(
    not FILESYSTEM.is_file(),
    reason="@modelcontextprotocol/server-filesystem is not installed: run .ci/mcp-setup.sh",
)
async def test_the_npm_filesystem_server(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    server = reachable(FILESYSTEM, tree=FILESYSTEM.parents[4])  # with its node_modules
    servers = [{"name": "fs", "command": "node", "args": [str(server), str(workspace)]}]
    session = await open_session(daemon, workspace, mcpServers=servers, policy=ALLOW_MCP)
    path = str(workspace / "README.md")
    said, _ = await one_call(daemon, model, session, call("mcp__fs__read_text_file", path=path))

    assert said == "# demo project\n"


PROJECT_SERVER = (
    f'[[mcp]]\nname = "proj"\ncommand = {json.dumps(sys.executable)}\n'
    f"args = {json.dumps([SERVER, 'stdio'])}\n"
)


async def test_project_servers_start_only_once_approved_and_it_is_remembered(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    args = json.dumps([SERVER, "stdio"])
    (workspace / ".trellisd.toml").write_text(
        f'[[mcp]]\nname = "proj"\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n'
    )
    line = f"{sys.executable} {SERVER} stdio"
    asked = answer_approvals(daemon, ["deny", "allow"])
    session = await open_session(daemon, workspace, policy=ALLOW_MCP)
    listed = await daemon.call("session/tools", {"sessionId": session["sessionId"]})
    assert listed["servers"][0]["state"] == "awaiting approval"
    assert listed["servers"][0]["commandLine"] == line

    await turn(daemon, session, "hello")
    assert asked[0]["tool"] == "start_mcp_server"
    assert asked[0]["mcp"] == {"server": "proj", "source": "project", "start": line}
    assert not [t for t in model.requests[-1]["tools"] if t["function"]["name"].startswith("mcp")]
    await turn(daemon, session, "hello again")  # declined: not asked again in this session
    assert len(asked) == 1

    other = await open_session(daemon, workspace, policy=ALLOW_MCP)
    said, _ = await one_call(daemon, model, other, call("mcp__proj__echo", text="trusted"))
    assert said == "trusted" and len(asked) == 2
    third = await open_session(daemon, workspace, policy=ALLOW_MCP)
    said, _ = await one_call(daemon, model, third, call("mcp__proj__echo", text="again"))
    assert said == "again" and len(asked) == 2  # remembered for this root and command line

    (workspace / ".trellisd.toml").write_text(
        f'[[mcp]]\nname = "proj"\ncommand = {json.dumps(sys.executable)}\nargs = {args}\n'
        'env = {PATH = "/tmp/evil"}\n'
    )
    fourth = await open_session(daemon, workspace, policy=ALLOW_MCP)
    listed = await daemon.call("session/tools", {"sessionId": fourth["sessionId"]})
    assert listed["servers"][0]["state"] == "awaiting approval"  # a new line: a new approval


async def test_a_project_servers_approval_is_listed_and_revoked_from_the_wire(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    (workspace / ".trellisd.toml").write_text(PROJECT_SERVER)
    asked = answer_approvals(daemon, ["allow", "allow"])
    session = await open_session(daemon, workspace, policy=ALLOW_MCP)
    sid = session["sessionId"]
    said, _ = await one_call(daemon, model, session, call("mcp__proj__echo", text="trusted"))
    assert said == "trusted" and len(asked) == 1
    [server] = (await daemon.call("session/tools", {"sessionId": sid}))["servers"]
    assert server["approved"] is True and server["state"] == "running"

    grant = {"kind": "mcpServer", "target": server["commandLine"], "scope": "project"}
    await daemon.call("session/revoke", {"sessionId": sid, "grant": grant})
    [server] = (await daemon.call("session/tools", {"sessionId": sid}))["servers"]
    assert server["approved"] is False and server["state"] == "running"  # runs on till close
    again = await daemon.error("session/revoke", {"sessionId": sid, "grant": grant})
    assert again.code == -32010 and "no approval of the MCP server" in again.message
    wrong = await daemon.error(
        "session/revoke", {"sessionId": sid, "grant": {**grant, "scope": "session"}}
    )
    assert wrong.code == -32602

    other = await open_session(daemon, workspace, policy=ALLOW_MCP)
    [server] = (await daemon.call("session/tools", {"sessionId": other["sessionId"]}))["servers"]
    assert server["state"] == "awaiting approval" and server["approved"] is False
    said, _ = await one_call(daemon, model, other, call("mcp__proj__echo", text="asked"))
    assert said == "asked" and len(asked) == 2  # asked again, and started once allowed


async def test_a_bad_mcp_entry_is_refused_naming_the_field(daemon: Daemon, workspace: Path) -> None:
    error = await daemon.error(
        "session/open", {"root": str(workspace), "mcpServers": [{"name": "a__b", "url": "x"}]}
    )
    assert error.data["field"] == "mcpServers[0].name"
    error = await daemon.error(
        "session/open", {"root": str(workspace), "mcpServers": [{"name": "x"}]}
    )
    assert "needs either command" in error.message


async def test_a_config_file_server_is_offered_to_every_session(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    config = tmp_path / "home" / ".config" / "trellisd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(
        f'[[mcp]]\nname = "cfg"\ncommand = {json.dumps(sys.executable)}\n'
        f'args = [{json.dumps(SERVER)}, "stdio"]\nenv = {{ GREETING = "from the file" }}\n'
    )
    daemon = await spawn()
    answer_approvals(daemon, ["allow"])
    session = await open_session(daemon, workspace)
    said, _ = await one_call(daemon, model, session, call("mcp__cfg__echo", text="hello"))

    assert said == "hello"
    listed = await daemon.call("session/tools", {"sessionId": session["sessionId"]})
    [server] = listed["servers"]
    assert server["name"] == "cfg" and server["source"] == "config"
    assert server["state"] == "running"
