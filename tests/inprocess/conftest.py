"""The in-process harness: the real ``trellisd`` server (pygls, the native protocol, its frame
reader and writer) served in the test's own event loop, talking to the same pytest-lsp client
as the subprocess tests over a pair of OS pipes, with a model server on 127.0.0.1 streaming
real SSE bytes and a real SQLite file. Every message the daemon sends is checked against
protocol/schema.json, as in ``tests/e2e``.

What a turn, a change set, a policy, a budget, paging, pins, titles, the context window, steer
and cancel do is tested here: no process is started, so a test costs what its logic costs.
What needs a process (framing on real pipes, start and exit, crashes, processes sharing a
store, the shared daemon, older builds) is tested in ``tests/e2e``.

    spawn    daemons over one store, each a ``server.Daemon`` with one window, in an environment
             of the test's own with ``env`` over it; a daemon ends as an editor ends it, with
             ``shutdown`` and ``exit``
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.io_ import run_async
from pytest_lsp import LanguageClient

from tests.fixtures.driver import TEST_KEY, Daemon, DaemonFactory, client_factory
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer
from trellisd import server
from trellisd.cli import environment_settings
from trellisd.config_file import Settings
from trellisd.transport import FrameReader, FrameWriter

log = logging.getLogger(__name__)


class Served:
    """One daemon served in this process with one window on a pair of pipes: what the client
    holds where it would hold a process (``pid``, ``returncode``, ``wait``, ``terminate``), so
    that ``shutdown_session`` returns once the daemon has exited, as it does for a process."""

    def __init__(self, daemon: server.Daemon) -> None:
        self.daemon = daemon
        self.pid = os.getpid()
        self.returncode: int | None = None
        self._exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._serving: asyncio.Task[int] | None = None
        self._to_server: asyncio.WriteTransport | None = None
        self._input: int | None = None  # the window's end of the pipe to the server
        self._output: int | None = None
        daemon.end = self._end

    def _end(self, code: int) -> None:
        """The daemon's ``end``: where a process would exit with ``code``, closing its ends of
        the pipes (the daemon has written all it had to)."""
        self.returncode = code
        if not self._exited.done():
            self._exited.set_result(code)
        self._close_pipes()

    def _close_pipes(self) -> None:
        """The client's end to write and the server's end to write: each side reads to the
        end of input. The server's end to read is closed once it has read to that end."""
        self.terminate()
        if self._output is not None:
            os.close(self._output)
            self._output = None

    async def wait(self) -> int:
        return await asyncio.shield(self._exited)

    def terminate(self) -> None:
        """What the client does on a fatal error: the window's input ends."""
        if self._to_server is not None:
            self._to_server.close()

    async def connect(self, client: LanguageClient, settings: Settings) -> None:
        loop = asyncio.get_running_loop()
        to_server_r, to_server_w = os.pipe()
        to_client_r, to_client_w = os.pipe()
        self._input, self._output = to_server_r, to_client_w
        window = server.window(self.daemon, settings, FrameWriter(to_client_w), "the test")

        async def serve() -> int:
            code = await self.daemon.serve_window(window, FrameReader(to_server_r))
            self.daemon.hub.attach(window)  # its writer is flushed at exit
            await self.daemon.exit(code)
            return code

        self._serving = asyncio.ensure_future(serve())
        reader = asyncio.StreamReader()
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(to_client_r, "rb", 0)
        )
        transport, protocol = await loop.connect_write_pipe(
            asyncio.streams.FlowControlMixin, os.fdopen(to_server_w, "wb", 0)
        )
        self._to_server = transport
        client.protocol.set_writer(asyncio.StreamWriter(transport, protocol, None, loop))
        client._server = self  # type: ignore[assignment]
        client._async_tasks.append(
            asyncio.ensure_future(
                run_async(
                    stop_event=client._stop_event,
                    reader=reader,
                    protocol=client.protocol,
                    logger=log,
                    error_handler=client.report_server_error,
                )
            )
        )

    async def close(self) -> None:
        """End of input for the window (the daemon exits, if it has not), then of output."""
        self.terminate()
        if self._serving is not None:
            await self._serving
        self._close_pipes()
        if self._input is not None:
            os.close(self._input)
            self._input = None


@pytest_asyncio.fixture
async def spawn(
    tmp_path: Path, model: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[DaemonFactory]:
    """Start daemons over one store (``db``) in this process, talking to the test's model
    server, in an environment of the test's own (``hermetic_env``, set in ``os.environ`` for
    the test: the daemon's settings, tools and prices read it as a process would)."""
    started: list[tuple[Daemon, Served]] = []

    async def start(
        db: Path | None = None,
        env: dict[str, str] | None = None,
        options: dict[str, Any] | None = None,
        initialize: bool = True,
    ) -> Daemon:
        db = db or tmp_path / "store" / "trellisd.db"
        db.parent.mkdir(parents=True, exist_ok=True)
        environment = hermetic_env(
            tmp_path / "home",
            **{
                "TRELLISD_PROVIDER": "openai",
                "TRELLISD_BASE_URL": model.url,
                "TRELLISD_API_KEY": TEST_KEY,
                "TRELLISD_MODEL": "test-model",
                **(env or {}),
            },
        )
        for name in set(os.environ) - set(environment):
            monkeypatch.delenv(name)
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        settings = environment_settings(os.environ)  # as the CLI reads them, once
        client = client_factory()
        served = Served(server.Daemon(str(db), settings))
        await served.connect(client, settings)
        daemon = Daemon(client, db)
        started.append((daemon, served))
        if initialize:
            await client.initialize_session(
                types.InitializeParams(
                    capabilities=types.ClientCapabilities(), initialization_options=options
                )
            )
        return daemon

    yield start
    for daemon, served in started:
        try:
            daemon.check_sent()
        finally:
            if served.returncode is None:
                await daemon.client.shutdown_session()
            await served.close()
            await daemon.client.stop()


@pytest_asyncio.fixture
async def daemon(spawn: DaemonFactory) -> Daemon:
    return await spawn()
