"""``trellisd acp`` as a subprocess over real pipes, driven by the official ACP SDKs as an
editor would, with the model server on 127.0.0.1 streaming real SSE bytes. Every line the
agent writes is kept and checked against the ACP v1 JSON schema the SDK ships.

Each test runs both ways: ``standalone`` (``TRELLISD_SHARED=0``, the agent serves in its own
process) and ``shared`` (the agent attaches to the store's shared daemon, which a runtime
folder of the test's own holds; the daemon's log is read as the agent's)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from acp import connect_to_agent, schema
from acp.client.connection import ClientSideConnection

from tests import acp_schema
from tests.e2e.conftest import TEST_KEY
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer
from tests.fixtures.terminals import Terminals
from tests.fixtures.waits import alive, eventually
from trellisd.rendezvous import Place

if not acp_schema.available():
    pytest.skip(acp_schema.MISSING, allow_module_level=True)


class Editor:
    """The client side of the test: the updates it was sent, and its answers to permission
    requests (``answers``, taken in order; a request with none left waits for one)."""

    def __init__(self) -> None:
        self.updates: list[tuple[str, Any]] = []
        self.asked: list[schema.RequestPermissionRequest] = []
        self.answers: asyncio.Queue[str] = asyncio.Queue()
        self.changed = asyncio.Event()
        self.buffers: dict[str, str] = {}  # unsaved text, by absolute path
        self.written: list[tuple[str, str]] = []
        self.terminals = Terminals()  # used when initialized with ``terminal``

    def of_kind(self, kind: str, session_id: str | None = None) -> list[Any]:
        return [
            u
            for s, u in self.updates
            if u.session_update == kind and (session_id is None or s == session_id)
        ]

    def text(self, session_id: str, kind: str = "agent_message_chunk") -> str:
        return "".join(u.content.text for u in self.of_kind(kind, session_id))

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        self.updates.append((session_id, update))
        self.changed.set()

    async def request_permission(
        self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
    ) -> schema.RequestPermissionResponse:
        self.asked.append(
            schema.RequestPermissionRequest(
                session_id=session_id, tool_call=tool_call, options=options
            )
        )
        self.changed.set()
        option = await self.answers.get()
        if option == "cancelled":
            return schema.RequestPermissionResponse(
                outcome=schema.DeniedOutcome(outcome="cancelled")
            )
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id=option)
        )

    async def read_text_file(
        self,
        session_id: str,
        path: str,
        line: int | None = None,
        limit: int | None = None,
        **kwargs: Any,
    ) -> schema.ReadTextFileResponse:
        if path in self.buffers:
            return schema.ReadTextFileResponse(content=self.buffers[path])
        return schema.ReadTextFileResponse(content=Path(path).read_text())

    async def write_text_file(
        self, session_id: str, path: str, content: str, **kwargs: Any
    ) -> schema.WriteTextFileResponse:
        """As an editor does: the buffer takes the text, and is saved."""
        self.written.append((path, content))
        self.buffers.pop(path, None)
        Path(path).write_text(content)
        return schema.WriteTextFileResponse()

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[Any] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **kwargs: Any,
    ) -> schema.CreateTerminalResponse:
        variables = {v.name: v.value for v in env or []}
        limit = output_byte_limit or 1024 * 1024
        made = await self.terminals.create(command, args or [], variables, cwd, limit)
        self.changed.set()
        return schema.CreateTerminalResponse(terminal_id=made)

    async def terminal_output(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.TerminalOutputResponse:
        text, cut, status = self.terminals.output(terminal_id)
        ended = None if status is None else schema.TerminalExitStatus(**_exit(status))
        return schema.TerminalOutputResponse(output=text, truncated=cut, exit_status=ended)

    async def wait_for_terminal_exit(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.WaitForTerminalExitResponse:
        status = await self.terminals.wait_for_exit(terminal_id)
        return schema.WaitForTerminalExitResponse(**_exit(status))

    async def kill_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.KillTerminalResponse:
        self.terminals.kill(terminal_id)
        return schema.KillTerminalResponse()

    async def release_terminal(
        self, session_id: str, terminal_id: str, **kwargs: Any
    ) -> schema.ReleaseTerminalResponse:
        self.terminals.release(terminal_id)
        self.changed.set()
        return schema.ReleaseTerminalResponse()

    def on_connect(self, conn: Any) -> None:
        pass


def _exit(status: dict[str, Any]) -> dict[str, Any]:
    return {"exit_code": status["exitCode"], "signal": status["signal"]}


class Agent:
    """One ``trellisd acp`` process and the SDK connection to it."""

    def __init__(
        self, process: asyncio.subprocess.Process, db: Path, log: Path | None = None
    ) -> None:
        self.process, self.db = process, db
        self.editor = Editor()
        self.sent: list[dict[str, Any]] = []
        self.log: list[str] = []  # what the agent wrote on stderr
        self._reader = asyncio.StreamReader(limit=50 * 1024 * 1024)
        self._pump = asyncio.ensure_future(self._tap())
        self._log_pump = asyncio.ensure_future(self._tap_log(process.stderr))
        self._tail: asyncio.subprocess.Process | None = None
        if log is not None:  # the shared daemon's log, as it grows
            self._daemon_log = asyncio.ensure_future(self._tap_daemon_log(log))
        assert process.stdin is not None
        self.conn: ClientSideConnection = connect_to_agent(
            self.editor, process.stdin, self._reader, use_unstable_protocol=True
        )

    async def _tap(self) -> None:
        assert self.process.stdout is not None
        while line := await self.process.stdout.readline():
            self.sent.append(json.loads(line))
            self._reader.feed_data(line)
            self.editor.changed.set()
        self._reader.feed_eof()

    async def _tap_log(self, stream: asyncio.StreamReader | None) -> None:
        assert stream is not None
        while line := await stream.readline():
            self.log.append(line.decode("utf-8", "replace"))
            self.editor.changed.set()

    async def _tap_daemon_log(self, log: Path) -> None:
        self._tail = await asyncio.create_subprocess_exec(
            "tail",
            "-n",
            "+1",
            "-F",
            str(log),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        await self._tap_log(self._tail.stdout)

    async def wait_for(self, check: Callable[[], Any], what: str) -> Any:
        """Wait until ``check`` holds, re-checked whenever the editor is sent something."""
        from tests.fixtures.waits import SAFETY_NET

        async def poll() -> Any:
            while True:
                self.editor.changed.clear()
                value = check()
                if value:
                    return value
                await self.editor.changed.wait()

        try:
            return await asyncio.wait_for(poll(), SAFETY_NET)
        except TimeoutError:
            raise AssertionError(f"{what}: never so") from None

    async def initialize(
        self, fs: bool = False, terminal: bool = False
    ) -> schema.InitializeResponse:
        files = schema.FileSystemCapabilities(read_text_file=fs, write_text_file=fs)
        return await self.conn.initialize(
            protocol_version=1,
            client_capabilities=schema.ClientCapabilities(fs=files, terminal=terminal),
            client_info=schema.Implementation(name="pytest", version="1"),
        )

    def check_sent(self) -> None:
        for message in self.sent:
            acp_schema.check(message)

    async def stop(self) -> None:
        await self.conn.close()
        if self.process.returncode is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            await self.process.wait()
        await self._pump
        await self._log_pump
        await self.editor.terminals.close()
        tail, self._tail = self._tail, None
        if tail is not None:
            tail.kill()
            await tail.wait()
            await self._daemon_log


AgentFactory = Callable[..., Awaitable[Agent]]


NATIVE_WINDOWS = "native windows"


@pytest.fixture(params=["standalone", "shared"])
def acp_mode(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """The environment that makes ``trellisd acp`` serve in its own process, or attach to
    the store's shared daemon in a runtime folder of the test's own (stopped at the end), or
    (``native windows``, chosen by a module's ``pytestmark``) attach to the shared daemon of
    the native windows of ``tests/e2e/conftest.py``'s ``windows``."""
    if request.param == NATIVE_WINDOWS:
        runtime = request.getfixturevalue("runtime")
        yield {"TRELLISD_SHARED": "1", "XDG_RUNTIME_DIR": str(runtime)}
        return
    if request.param == "standalone":
        yield {"TRELLISD_SHARED": "0"}
        return
    runtime = Path(tempfile.mkdtemp(prefix="rt", dir="/tmp"))
    yield {"TRELLISD_SHARED": "1", "XDG_RUNTIME_DIR": str(runtime)}
    for lock in (runtime / "trellisd").glob("*.pid"):
        pid = int(lock.read_text().strip() or 0)
        if pid and alive(pid):
            os.kill(pid, signal.SIGTERM)
    shutil.rmtree(runtime, ignore_errors=True)


def daemon_pids(mode: dict[str, str]) -> list[int]:
    """The shared daemons running in ``mode``'s runtime folder."""
    if "XDG_RUNTIME_DIR" not in mode:
        return []
    locks = (Path(mode["XDG_RUNTIME_DIR"]) / "trellisd").glob("*.pid")
    return [int(p) for lock in locks if (p := lock.read_text().strip()) and alive(int(p))]


def agent_env(home: Path, server: ModelServer, **extra: str) -> dict[str, str]:
    """The agent's environment: the test's model server, unless ``extra`` names another."""
    chosen = {
        "TRELLISD_PROVIDER": "openai",
        "TRELLISD_BASE_URL": server.url,
        "TRELLISD_API_KEY": TEST_KEY,
        "TRELLISD_MODEL": "test-model",
        "TRELLISD_LOG": "info",
    }
    return hermetic_env(home, **{**chosen, **extra})


@pytest_asyncio.fixture
async def spawn_acp(
    tmp_path: Path,
    model: ModelServer,
    acp_mode: dict[str, str],
) -> AsyncIterator[AgentFactory]:
    """Start ``trellisd acp`` processes over one store, initialized."""
    started: list[Agent] = []

    async def start(
        db: Path | None = None,
        initialize: bool = True,
        fs: bool = False,
        terminal: bool = False,
        **env: str,
    ) -> Agent:
        db = db or tmp_path / "store" / "trellisd.db"
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "trellisd",
            "acp",
            "--db",
            str(db),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=agent_env(tmp_path / "home", model, **{**acp_mode, **env}),
        )
        runtime = acp_mode.get("XDG_RUNTIME_DIR")
        log = Path(Place(str(db), {"XDG_RUNTIME_DIR": runtime}).log) if runtime else None
        agent = Agent(process, db, log)
        started.append(agent)
        if initialize:
            await agent.initialize(fs, terminal)
        return agent

    yield start
    pids = daemon_pids(acp_mode)
    for agent in started:
        try:
            agent.check_sent()
        finally:
            await agent.stop()
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
        await eventually(lambda pid=pid: not alive(pid), f"the shared daemon {pid} exits")
