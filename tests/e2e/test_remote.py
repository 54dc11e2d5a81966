"""trellisd on another machine, over SSH: an OpenSSH server the test starts on 127.0.0.1 (its
own host key, its own client key, its own ``sshd_config``) stands for the remote machine, and
the editor's window is ``trellisd --remote 127.0.0.1``, which runs ``ssh`` for it. The remote
``trellisd`` is this checkout's, in an environment of the test's own (its home, its runtime
folder, the shared daemon on), and the model settings reach it from the window's environment
as ``--remote`` forwards them; the key is on the remote command line (as a remote machine's
own setting would be).

The tests that need the server are skipped, saying why, without ``/usr/sbin/sshd``
(``.ci/ssh-setup.sh`` installs it)."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import ClientServerConfig

from tests.e2e.conftest import Pipes
from tests.fixtures.driver import (
    LONG,
    TEST_KEY,
    Daemon,
    answer_approvals,
    client_factory,
    held_after,
    open_session,
    tokens,
    turn,
)
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import SAFETY_NET, alive, eventually

SSHD = "/usr/sbin/sshd"
TRELLISD = str(Path(sys.executable).parent / "trellisd")


class Sshd:
    """An sshd of the test's own on 127.0.0.1: the remote machine."""

    def __init__(self, folder: Path) -> None:
        folder.mkdir()
        self.folder = folder
        for name in ("host_key", "client_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", folder / name],
                check=True,
            )
        (folder / "authorized_keys").write_text((folder / "client_key.pub").read_text())
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        config = folder / "sshd_config"
        config.write_text(
            f"Port {self.port}\n"
            "ListenAddress 127.0.0.1\n"
            f"HostKey {folder / 'host_key'}\n"
            f"AuthorizedKeysFile {folder / 'authorized_keys'}\n"
            f"PidFile {folder / 'sshd.pid'}\n"
            "UsePAM no\n"
            "StrictModes no\n"
            "PermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\n"
        )
        if os.geteuid() == 0:
            os.makedirs("/run/sshd", exist_ok=True)  # its privilege separation folder
        self.log: list[str] = []
        self.listening = threading.Event()
        self.process = subprocess.Popen(
            [SSHD, "-f", str(config), "-D", "-e"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read_log, daemon=True)
        self._reader.start()

    def _read_log(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            if "Server listening on" in line:
                self.listening.set()
        self.listening.set()  # it ended: the test says so

    def ssh(self, port: bool = True, trust: bool = True) -> str:
        """TRELLISD_SSH: the client with this server's port (unless ``port`` is False), key
        and a known-hosts file of the test's own where its host key is taken on first use
        (unless ``trust`` is False), and none of the person's ssh configuration."""
        known = self.folder / "known_hosts"
        return shlex.join(
            [
                "ssh",
                *(["-p", str(self.port)] if port else []),
                "-F",
                "/dev/null",
                "-i",
                str(self.folder / "client_key"),
                "-o",
                "IdentitiesOnly=yes",
                "-o",
                f"UserKnownHostsFile={known}",
                *(["-o", "StrictHostKeyChecking=accept-new"] if trust else []),
                "-l",
                getpass.getuser(),
            ]
        )

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(SAFETY_NET)
        self._reader.join(SAFETY_NET)
        assert self.process.stderr is not None
        self.process.stderr.close()


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    if not os.path.exists(SSHD) or not shutil.which("ssh") or not shutil.which("ssh-keygen"):
        pytest.skip(f"needs OpenSSH's server at {SSHD} and its client (bash .ci/ssh-setup.sh)")
    if os.geteuid() != 0 and not os.path.isdir("/run/sshd"):
        pytest.skip("sshd needs its folder /run/sshd, which only root can make (.ci/ssh-setup.sh)")
    server = Sshd(tmp_path / "sshd")
    if not server.listening.wait(SAFETY_NET) or server.process.poll() is not None:
        server.stop()
        pytest.fail("sshd did not start:\n" + "".join(server.log))
    yield server
    server.stop()


class Remote:
    """Editor windows whose daemon is on the "remote machine" (``sshd``): each a
    ``trellisd --remote`` process, driven over its stdio as an editor would."""

    def __init__(self, sshd: Sshd, model: ModelServer, tmp_path: Path, runtime: Path) -> None:
        self.sshd, self.model = sshd, model
        self.runtime = runtime  # the remote machine's runtime folder
        self.remote_env = hermetic_env(
            tmp_path / "remote-home",
            TRELLISD_SHARED="1",
            XDG_RUNTIME_DIR=str(self.runtime),
            TRELLISD_API_KEY=TEST_KEY,
        )
        self.db = tmp_path / "remote-store" / "trellisd.db"
        self.windows: list[Daemon] = []

    def remote_trellisd(self) -> str:
        """The remote command: the checkout's trellisd in the remote machine's environment
        (its home, folders and runtime folder are the test's)."""
        names = ("HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME")
        names += ("XDG_RUNTIME_DIR", "TRELLISD_SHARED", "TRELLISD_API_KEY")
        return shlex.join(["env", *(f"{n}={self.remote_env[n]}" for n in names), TRELLISD])

    def window_env(self) -> dict[str, str]:
        """The window's machine: the model settings are its (``--remote`` forwards them),
        the key is not."""
        return hermetic_env(
            self.sshd.folder / "local-home",
            TRELLISD_SSH=self.sshd.ssh(),
            TRELLISD_PROVIDER="openai",
            TRELLISD_BASE_URL=self.model.url,
            TRELLISD_MODEL="test-model",
        )

    def command(self, *args: str) -> list[str]:
        """``trellisd [args] --remote 127.0.0.1 ... --db <the remote store>``."""
        remote = ["--remote", "127.0.0.1", "--remote-trellisd", self.remote_trellisd()]
        return [TRELLISD, *args, *remote, "--db", str(self.db)]

    def plain_ssh(self) -> list[str]:
        """``ssh HOST trellisd`` as the editor's command: the model settings on the remote
        command line, as a user would write them."""
        settings = [
            "TRELLISD_PROVIDER=openai",
            f"TRELLISD_BASE_URL={self.model.url}",
            "TRELLISD_MODEL=test-model",
        ]
        remote = ["env", *settings, *shlex.split(self.remote_trellisd()), "--db", str(self.db)]
        return [*shlex.split(self.sshd.ssh()), "-T", "-o", "BatchMode=yes", "127.0.0.1", *remote]

    async def open(self, plain_ssh: bool = False) -> Daemon:
        """A new window over SSH, initialized: ``trellisd --remote``, or ``ssh`` itself."""
        config = ClientServerConfig(
            server_command=self.plain_ssh() if plain_ssh else self.command(),
            client_factory=client_factory,
            server_env=self.window_env(),
        )
        client = await config.start()
        window = Daemon(client, self.db)
        self.windows.append(window)
        result = await client.initialize_session(
            types.InitializeParams(capabilities=types.ClientCapabilities())
        )
        assert result.capabilities.experimental["trellisd"]["daemon"]["shared"] is True
        return window

    def status(self) -> str:
        """What ``trellisd status`` on the remote machine says of the remote store's shared
        daemons (it lists every daemon of the user's it finds)."""
        listed = subprocess.run(
            [TRELLISD, "status"], env=self.remote_env, capture_output=True, text=True, check=True
        ).stdout
        mine, store = [], ""
        for line in listed.splitlines():
            if not line.startswith(" "):
                store = line
            if store == str(self.db):
                mine.append(line)
        return "\n".join(mine)

    def daemon_pids(self) -> list[int]:
        """The pids of the remote store's shared daemons."""
        return [int(pid) for pid in re.findall(r"  daemon   pid (\d+),", self.status())]

    async def close(self) -> None:
        for window in self.windows:
            if window.process.returncode is None:
                await window.client.shutdown_session()
                await asyncio.wait_for(window.process.wait(), SAFETY_NET)
            await window.client.stop()
        pids = self.daemon_pids()
        for pid in pids:
            os.kill(pid, signal.SIGTERM)
        for pid in pids:
            await eventually(lambda pid=pid: not alive(pid), f"the shared daemon {pid} exits")


@pytest_asyncio.fixture
async def remote(
    sshd: Sshd, model: ModelServer, tmp_path: Path, runtime: Path
) -> AsyncIterator[Remote]:
    group = Remote(sshd, model, tmp_path, runtime)
    yield group
    for log in (group.runtime / "trellisd").glob("*.log"):
        sys.stderr.write(log.read_text())  # shown when the test fails
    sys.stderr.write("".join(sshd.log))
    await group.close()


async def test_ssh_itself_as_the_daemon_command_carries_a_session(
    remote: Remote, model: ModelServer, workspace: Path
) -> None:
    window = await remote.open(plain_ssh=True)
    session = await open_session(window, workspace)
    model.reply("plain ssh works", pieces=3)
    result = await turn(window, session, "hello")
    assert result["outcome"] == "finished"
    assert "".join(t["text"] for t in window.tokens) == "plain ssh works"


async def test_an_acp_client_is_served_over_ssh(
    remote: Remote, model: ModelServer, workspace: Path
) -> None:
    agent = await asyncio.create_subprocess_exec(
        *remote.command("acp"),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=remote.window_env(),
    )
    assert agent.stdin is not None and agent.stdout is not None
    updates: list[dict[str, Any]] = []

    async def call(msg_id: int, method: str, params: dict[str, Any]) -> Any:
        line = {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}
        agent.stdin.write(json.dumps(line).encode() + b"\n")
        while True:
            message = json.loads(await asyncio.wait_for(agent.stdout.readline(), SAFETY_NET))
            if message.get("id") == msg_id:
                assert "error" not in message, message
                return message["result"]
            if message.get("method") == "session/update":
                updates.append(message["params"]["update"])

    initialized = await call(0, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    assert initialized["protocolVersion"] == 1
    new = await call(1, "session/new", {"cwd": str(workspace), "mcpServers": []})
    model.reply("an answer from afar", pieces=4)
    prompt = [{"type": "text", "text": "hello"}]
    done = await call(2, "session/prompt", {"sessionId": new["sessionId"], "prompt": prompt})
    assert done["stopReason"] == "end_turn"
    chunks = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_message_chunk"]
    assert "".join(chunks) == "an answer from afar"
    agent.stdin.close()
    assert await asyncio.wait_for(agent.wait(), SAFETY_NET) == 0


def sshd_sessions(sshd: Sshd) -> list[int]:
    """The processes sshd started for its connections (its listener's descendants that are
    sshd)."""
    found, todo = [], [sshd.process.pid]
    while todo:
        pid = todo.pop()
        with contextlib.suppress(FileNotFoundError):
            children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
            todo += [int(child) for child in children]
            if pid != sshd.process.pid and Path(f"/proc/{pid}/comm").read_text().strip() == "sshd":
                found.append(pid)
    return found


async def test_a_link_that_stops_answering_is_noticed_and_said_in_one_line(
    remote: Remote, model: ModelServer
) -> None:
    # Keep-alives each second, one unanswered is enough: noticed in about two seconds.
    quick = ["--ssh-option", "ServerAliveInterval=1", "--ssh-option", "ServerAliveCountMax=1"]
    remote_trellisd = ["--remote-trellisd", remote.remote_trellisd()]
    window = await Pipes.start(
        remote.db,
        model,
        "--remote",
        "127.0.0.1",
        *remote_trellisd,
        *quick,
        env={"TRELLISD_SSH": remote.sshd.ssh()},
    )
    await window.initialize()  # the link works
    frozen = sshd_sessions(remote.sshd)
    assert frozen
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)  # the remote machine stops answering
    try:
        code, err = await window.stderr_after_exit()
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
    assert code == 1
    assert err.splitlines() == [
        "trellisd: the ssh connection to 127.0.0.1 failed:"
        " Timeout, server 127.0.0.1 not responding."
    ]
    # The remote side then sees the connection gone, and its window detaches.
    await eventually(
        lambda: "  windows  0" in remote.status().splitlines(), "the remote window detaches"
    )


def ssh_client_of(window: Daemon) -> int:
    """The pid of the ssh client that ``trellisd --remote`` started for ``window``."""
    pid = window.process.pid
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


async def test_a_whole_session_over_ssh_streams_its_tokens_and_reopens(
    remote: Remote, model: ModelServer, workspace: Path
) -> None:
    # The workspace is a folder of the remote machine (here: the same one).
    window = await remote.open()
    session = await open_session(window, workspace)
    model.reply("hello from the other machine", pieces=5)
    result = await turn(window, session, "say hello")

    assert result["outcome"] == "finished"
    assert "".join(t["text"] for t in window.tokens) == "hello from the other machine"
    assert model.headers[-1]["authorization"] == f"Bearer {TEST_KEY}"
    assert model.requests[-1]["model"] == "test-model"  # forwarded from the window's side
    assert remote.db.exists()

    await window.client.shutdown_session()
    await asyncio.wait_for(window.process.wait(), SAFETY_NET)
    assert window.process.returncode == 0

    again = await remote.open()
    reopened = await again.call("session/reopen", {"sessionId": session["sessionId"]})
    assert [t["reply"] for t in reopened["history"]] == ["hello from the other machine"]
    assert "running" not in reopened


async def test_a_turn_runs_on_when_the_connection_drops_and_the_next_one_finds_it(
    remote: Remote, model: ModelServer, workspace: Path
) -> None:
    window = await remote.open()
    session = await open_session(window, workspace)
    held = held_after(model, 3)
    asyncio.ensure_future(turn(window, session, "keep going without me"))
    await tokens(window, 3)
    assert "  windows  1: pid" in remote.status()

    os.kill(ssh_client_of(window), signal.SIGKILL)  # the link is gone, mid-turn
    code = await asyncio.wait_for(window.process.wait(), SAFETY_NET)
    assert code == 1
    # On the remote side the window's forwarder ends with the SSH session; the shared
    # daemon, in a session of its own, does not, and the turn goes on.
    await eventually(
        lambda: "  windows  0" in remote.status().splitlines(), "the remote window detaches"
    )
    running = f"  turns    1 running: {session['sessionId']}/"
    assert running in remote.status()
    assert not held.dropped.is_set()

    again = await remote.open()
    reopened = await again.call("session/reopen", {"sessionId": session["sessionId"]})
    assert reopened["running"]["text"] == " ".join(LONG.split()[:3]) + " "
    held.release()
    await eventually(
        lambda: any(m.get("method") == "session/turnEnded" for m in again.protocol.received),
        "the turn ends in the window that reconnected",
    )
    history = (await again.call("session/history", {"sessionId": session["sessionId"]}))["turns"]
    assert history[-1]["outcome"] == "finished" and history[-1]["reply"] == LONG


async def test_an_approval_is_asked_and_answered_over_ssh(
    remote: Remote, model: ModelServer, workspace: Path
) -> None:
    window = await remote.open()
    asked = answer_approvals(window, ["allow"])
    session = await open_session(window, workspace, policy={"approval": "ask"})
    model.reply(
        "", tool_calls=[{"name": "write_file", "arguments": {"path": "far.txt", "content": "x"}}]
    )
    model.reply("Written.")
    result = await turn(window, session, "write it")

    assert result["outcome"] == "finished"
    assert [a["tool"] for a in asked] == ["write_file"]
    assert (workspace / "far.txt").read_text() == "x"


async def test_a_host_that_cannot_be_reached_is_said_in_one_line(
    sshd: Sshd, tmp_path: Path
) -> None:
    env = hermetic_env(tmp_path / "home", TRELLISD_SSH=sshd.ssh(port=False))
    refused = await asyncio.create_subprocess_exec(
        TRELLISD,
        "--remote",
        "127.0.0.1",
        "--ssh-option",
        "Port=1",  # nothing listens there
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(refused.communicate(), SAFETY_NET)
    assert refused.returncode == 1 and out == b""
    assert err.decode().splitlines() == [
        "trellisd: the ssh connection to 127.0.0.1 failed:"
        " ssh: connect to host 127.0.0.1 port 1: Connection refused"
    ]

    # A host key never seen: BatchMode asks no question on the editor's pipes.
    unknown_key = await asyncio.create_subprocess_exec(
        TRELLISD,
        "acp",
        "--remote",
        "127.0.0.1",
        "--ssh-option",
        f"Port={sshd.port}",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**env, "TRELLISD_SSH": sshd.ssh(port=False, trust=False)},
    )
    out, err = await asyncio.wait_for(unknown_key.communicate(), SAFETY_NET)
    assert unknown_key.returncode == 1 and out == b""
    lines = err.decode().splitlines()
    assert len(lines) == 1 and "Host key verification failed" in lines[0], lines


async def test_no_ssh_client_is_said_in_one_line(tmp_path: Path) -> None:
    env = hermetic_env(tmp_path / "home", TRELLISD_SSH=str(tmp_path / "no-ssh-here"))
    missing = await asyncio.create_subprocess_exec(
        TRELLISD,
        "--remote",
        "host",
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    _, err = await asyncio.wait_for(missing.communicate(), SAFETY_NET)
    assert missing.returncode == 2
    assert err.decode().splitlines() == [
        f"trellisd: --remote needs the ssh client, and {str(tmp_path / 'no-ssh-here')!r} is not"
        " found (install OpenSSH's client, or name it in TRELLISD_SSH)"
    ]


def test_the_remote_command_is_quoted_for_the_remote_shell() -> None:
    from trellisd import remote as remote_module
    from trellisd.cli import parser

    args = parser().parse_args(
        ["acp", "--remote", "box", "--remote-trellisd", "~/venv/bin/trellisd", "--db", "~/my db"]
    )
    env = {"TRELLISD_MODEL": "a model; rm -rf /", "TRELLISD_API_KEY": "sk-secret", "SSH": "x"}
    argv = remote_module.ssh_argv(remote_module.remote_from_args(args, env))
    options = "-T -e none -o BatchMode=yes -o ServerAliveInterval=15 -o ServerAliveCountMax=3"
    assert " ".join(argv).startswith(f"ssh {options} -- box ")
    assert argv[-3:-1] == ["--", "box"]
    assert shlex.split(argv[-1]) == [
        "env",
        "TRELLISD_MODEL=a model; rm -rf /",
        "~/venv/bin/trellisd",
        "acp",
        "--db",
        "~/my db",  # the remote machine's ~, expanded by the remote trellisd
        "--log-level",
        "warning",
    ]
    assert "sk-secret" not in " ".join(argv)


def test_remote_is_refused_for_a_command_that_serves_no_window(tmp_path: Path) -> None:
    refused = subprocess.run(
        [TRELLISD, "--remote", "box", "status"],
        env=hermetic_env(tmp_path / "home"),
        capture_output=True,
        text=True,
        timeout=SAFETY_NET,
    )
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.splitlines() == [
        "trellisd: --remote serves an editor's window (serve, acp); run status on box itself:"
        " ssh box trellisd status"
    ]
