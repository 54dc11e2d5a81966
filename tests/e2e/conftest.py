"""The one subprocess harness: the daemon as a process over real pipes, driven as an editor
would, with a model server on 127.0.0.1 streaming real SSE bytes. It serves what needs a
process: the framing on real pipes, start, exit and shutdown, crashes and recovery after a
kill, processes sharing a store, the shared daemon and its socket, older builds, floods.

    spawn     daemons over one store, each driven by pytest-lsp (``tests.fixtures.driver``);
              every message a daemon sends is checked against protocol/schema.json
    Pipes     a bare daemon process whose pipes the test holds itself: for raw frames, an
              editor that dies, and what the daemon writes on stderr
    windows   editor windows of one user on the store's shared daemon, each a forwarder
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pytest_lsp import ClientServerConfig

from tests.fixtures.driver import TEST_KEY, Daemon, DaemonFactory, client_factory
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import alive, eventually

__all__ = ["TEST_KEY", "Daemon", "DaemonFactory", "Pipes", "Windows", "without_override"]


@pytest_asyncio.fixture
async def spawn(tmp_path: Path, model: ModelServer) -> AsyncIterator[DaemonFactory]:
    """Start daemons over one store (``db``), talking to the test's model server, in an
    environment of the test's own (``hermetic_env``); ``wrapper``: a command that runs the
    daemon (``setpriv ...``)."""
    started: list[Daemon] = []

    async def start(
        db: Path | None = None,
        env: dict[str, str] | None = None,
        options: dict[str, Any] | None = None,
        initialize: bool = True,
        wrapper: list[str] | None = None,
    ) -> Daemon:
        db = db or tmp_path / "store" / "trellisd.db"
        server_env = hermetic_env(
            tmp_path / "home",
            **{
                "TRELLISD_PROVIDER": "openai",
                "TRELLISD_BASE_URL": model.url,
                "TRELLISD_API_KEY": TEST_KEY,
                "TRELLISD_MODEL": "test-model",
                **(env or {}),
            },
        )
        config = ClientServerConfig(
            server_command=[*(wrapper or []), sys.executable, "-m", "trellisd", "--db", str(db)],
            client_factory=client_factory,
            server_env=server_env,
        )
        client = await config.start()
        daemon = Daemon(client, db)
        started.append(daemon)
        if initialize:
            await client.initialize_session(
                types.InitializeParams(
                    capabilities=types.ClientCapabilities(), initialization_options=options
                )
            )
        return daemon

    yield start
    for daemon in started:
        try:
            daemon.check_sent()
        finally:
            if daemon.process is not None and daemon.process.returncode is None:
                await daemon.client.shutdown_session()
            await daemon.client.stop()


@pytest_asyncio.fixture
async def daemon(spawn: DaemonFactory) -> Daemon:
    return await spawn()


class Pipes:
    """Frames written to the daemon's stdin, frames read from its stdout, stderr kept whole."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.notifications: list[dict[str, Any]] = []
        self._next_id = 0

    @classmethod
    async def start(
        cls, db: Path, model: ModelServer, *args: str, env: dict[str, str] | None = None
    ) -> Pipes:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "trellisd",
            "--db",
            str(db),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=hermetic_env(
                db.parent / "home",
                TRELLISD_PROVIDER="openai",
                TRELLISD_BASE_URL=model.url,
                TRELLISD_API_KEY=TEST_KEY,
                TRELLISD_MODEL="test-model",
                **(env or {}),
            ),
        )
        return cls(process)

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, method: str, params: Any = None) -> int:
        self._next_id += 1
        self.send({"id": self._next_id, "method": method, "params": params})
        return self._next_id

    async def read(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        length = 0
        while (line := await self.process.stdout.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            if name.lower() == "content-length":
                length = int(value)
        if not length:
            raise EOFError("the daemon closed stdout")
        message: dict[str, Any] = json.loads(await self.process.stdout.readexactly(length))
        return message

    async def answer(self, msg_id: int) -> dict[str, Any]:
        """Read until the answer to ``msg_id``; notifications on the way are kept."""
        while True:
            message = await self.read()
            if message.get("id") == msg_id and "method" not in message:
                return message
            self.notifications.append(message)

    async def call(self, method: str, params: Any = None) -> Any:
        answer = await asyncio.wait_for(self.answer(self.request(method, params)), 30)
        assert "error" not in answer, answer
        return answer["result"]

    async def initialize(self, options: dict[str, Any] | None = None) -> None:
        await self.call("initialize", {"capabilities": {}, "initializationOptions": options})

    def hang_up(self) -> None:
        """What the editor's death does: its ends of stdin and stdout close."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        transport: Any = self.process._transport  # type: ignore[attr-defined]
        transport.get_pipe_transport(1).close()

    async def stderr_after_exit(self) -> tuple[int, str]:
        """Wait for the process to end; its exit code and all it wrote on stderr."""
        assert self.process.stderr is not None
        err = await asyncio.wait_for(self.process.stderr.read(), 60)
        code = await asyncio.wait_for(self.process.wait(), 60)
        return code, err.decode()

    async def stop(self) -> tuple[int, str]:
        self.request("shutdown")
        self.send({"method": "exit"})
        assert self.process.stdin is not None
        self.process.stdin.close()
        return await self.stderr_after_exit()


@pytest.fixture
def runtime() -> Iterator[Path]:
    """A runtime folder of the test's own, short enough for a socket path."""
    folder = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


class Windows:
    """Editor windows of one user, each a ``trellisd`` forwarder, on one store."""

    def __init__(self, spawn: DaemonFactory, runtime: Path, db: Path) -> None:
        self.spawn, self.runtime, self.db = spawn, runtime, db
        self.daemon_pids: set[int] = set()
        self.opened: list[Daemon] = []

    def env(self, **extra: str) -> dict[str, str]:
        return {"TRELLISD_SHARED": "1", "XDG_RUNTIME_DIR": str(self.runtime), **extra}

    async def open(self, **env: str) -> tuple[Daemon, dict[str, Any]]:
        """A new window: its forwarder started and initialized; the daemon's own facts."""
        window = await self.spawn(db=self.db, env=self.env(**env), initialize=False)
        self.opened.append(window)
        result = await window.client.initialize_session(
            types.InitializeParams(capabilities=types.ClientCapabilities())
        )
        facts = result.capabilities.experimental["trellisd"]
        self.daemon_pids.add(facts["daemon"]["pid"])
        return window, facts

    async def close(self) -> None:
        """Every window still open ends as an editor ends it, then every daemon stops."""
        for window in self.opened:
            if window.process.returncode is None:
                await window.client.shutdown_session()
                await window.process.wait()
        for pid in self.daemon_pids:
            if alive(pid):
                os.kill(pid, signal.SIGTERM)


@pytest_asyncio.fixture
async def windows(
    spawn: DaemonFactory,
    runtime: Path,
    tmp_path: Path,
) -> AsyncIterator[Windows]:
    group = Windows(spawn, runtime, tmp_path / "store" / "trellisd.db")
    yield group
    for log in (runtime / "trellisd").glob("*.log"):
        sys.stderr.write(log.read_text())  # shown when the test fails
    await group.close()
    for pid in group.daemon_pids:
        await eventually(lambda pid=pid: not alive(pid), f"the shared daemon {pid} exits")


def without_override() -> list[str]:
    """A command that runs the daemon as a user the folder's mode applies to: root loses the
    capabilities that let it write any folder whatever its mode; anyone else already is one."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv to run the daemon without root's file capabilities")
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search"]
