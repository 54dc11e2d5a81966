"""MCP servers and the daemon's process: servers, and what they started, stop with the
session and on kill -9 of the daemon; ``trellisd config`` refuses a config file server the client
could not start."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.driver import UNWALLED_MCP, call, one_call, open_session, stdio
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import SAFETY_NET, alive, eventually


def ps_pids() -> set[int]:
    """The processes ``ps`` sees now."""
    out = subprocess.run(["ps", "-e", "-o", "pid="], capture_output=True, text=True, check=True)
    return {int(p) for p in out.stdout.split()}


async def test_servers_stop_with_the_session_and_on_kill_9_of_the_daemon(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    session = await open_session(daemon, workspace, mcpServers=[stdio()], policy=UNWALLED_MCP)
    first, _ = await one_call(daemon, model, session, call("mcp__t__pid"))
    await daemon.call("session/close", {"sessionId": session["sessionId"]})
    await eventually(lambda: int(first) not in ps_pids(), "the server stops with its session")

    session = await open_session(daemon, workspace, mcpServers=[stdio()], policy=UNWALLED_MCP)
    second, _ = await one_call(daemon, model, session, call("mcp__t__pid"))
    assert int(second) in ps_pids()
    os.kill(daemon.process.pid, signal.SIGKILL)
    await daemon.process.wait()  # reaped: the fixture does not ask a dead daemon to shut down
    await eventually(
        lambda: int(second) not in ps_pids(), "the server dies with its daemon, even on kill -9"
    )


async def test_what_a_server_started_stops_with_the_session_and_on_kill_9_of_the_daemon(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    servers = [stdio("t", "--children")]
    session = await open_session(daemon, workspace, mcpServers=servers, policy=UNWALLED_MCP)
    said, _ = await one_call(daemon, model, session, call("mcp__t__children"))
    first = [int(pid) for pid in said.split()]
    assert all(alive(pid) for pid in first)  # one in the server's group, one setsid
    await daemon.call("session/close", {"sessionId": session["sessionId"]})
    await eventually(
        lambda: not any(alive(pid) for pid in first), "what the server started stops with it"
    )

    session = await open_session(daemon, workspace, mcpServers=servers, policy=UNWALLED_MCP)
    said, _ = await one_call(daemon, model, session, call("mcp__t__children"))
    second = [int(pid) for pid in said.split()]
    assert all(alive(pid) for pid in second)
    os.kill(daemon.process.pid, signal.SIGKILL)
    await daemon.process.wait()  # reaped: the fixture does not ask a dead daemon to shut down
    await eventually(
        lambda: not any(alive(pid) for pid in second),
        "what the server started dies with the daemon, even on kill -9",
    )


async def test_a_config_file_server_the_client_cannot_start_is_refused_at_start(
    tmp_path: Path,
) -> None:
    config = tmp_path / "home" / ".config" / "trellisd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('[[mcp]]\nname = "two__parts"\ncommand = "x"\n')
    done = subprocess.run(
        [sys.executable, "-m", "trellisd", "config"],
        env=hermetic_env(tmp_path / "home"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
    )
    assert done.returncode == 2
    assert f"{config}:2: mcp[0].name" in done.stderr, done.stderr
