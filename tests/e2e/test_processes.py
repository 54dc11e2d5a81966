"""No process a turn started (``start_process``) outlives its daemon, even one killed with
SIGKILL: inside the walls and outside them, with the children the program started, one that
left its session with ``setsid`` too, and the holder of the session's loopback."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.driver import call, open_session, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import alive, eventually
from tests.inprocess.test_loopbacks import in_network

# Starts a child in a session of its own, then waits; both carry the token in their argv.
FAMILY = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]],"
    " start_new_session=True)\n"
    "print('started', flush=True)\n"
    "time.sleep(300)\n"
)


def running(token: str) -> list[int]:
    """The processes whose command line holds ``token`` (``ps`` as a test reads it), the
    guard's and bubblewrap's (which name the program) among them."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if token.encode() in Path(f"/proc/{name}/cmdline").read_bytes() and alive(int(name)):
                found.append(int(name))
        except OSError:
            continue
    return found


def programs(token: str) -> list[int]:
    """Of those, the program and its child: the ones run by ``-c``."""
    return [p for p in running(token) if _argv(p)[1:2] == [b"-c"]]


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


@pytest.mark.parametrize("sandbox", ["workspace-write", "off"])
async def test_no_process_outlives_a_daemon_killed_with_sigkill(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, sandbox: str
) -> None:
    daemon = await spawn()
    policy = {
        "layers": [{"name": "editor", "allowRead": ["**"], "allowExec": ["*"]}],
        "approval": "all",
        "sandbox": sandbox,
    }
    session = await open_session(daemon, workspace, policy=policy)
    token = f"outlives-{sandbox}-{os.getpid()}"
    argv = [sys.executable, "-c", FAMILY, token]
    model.reply("", tool_calls=[call("start_process", argv=argv)])
    model.reply("Started.")
    assert (await turn(daemon, session, "start it"))["outcome"] == "finished"
    await eventually(lambda: len(programs(token)) == 2, "the program and its child run")
    [listed] = (await daemon.call("session/processes", {"sessionId": session["sessionId"]}))[
        "processes"
    ]
    assert listed["running"] is True
    network = os.readlink(f"/proc/{programs(token)[0]}/ns/net")
    if sandbox != "off":  # the session's loopback, held for it apart from the program
        assert network != os.readlink("/proc/self/ns/net")
        assert set(in_network(network)) - set(running(token))  # the holder

    os.kill(daemon.process.pid, signal.SIGKILL)
    await daemon.process.wait()  # reaped: the harness does not ask a dead daemon to shut down
    await eventually(lambda: not running(token), "nothing the process started is left")
    if sandbox != "off":
        await eventually(lambda: not in_network(network), "nothing is left in its loopback")
