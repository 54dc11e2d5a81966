"""The daemon as a subprocess over real pipes, driven by pytest-lsp as an editor would, with a
model server on 127.0.0.1 streaming real SSE bytes. Every message the daemon sends is checked
against protocol/schema.json."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import register_lsp_features
from pytest_lsp.protocol import LanguageClientProtocol

from tests import protocol_schema
from tests.fixtures.environment import hermetic_env
from tests.fixtures.model_server import ModelServer, split_words
from trellisd.server import plain_converter

TEST_KEY = "sk-test-4f1c9a0e-never-printed"


class RecordingProtocol(LanguageClientProtocol):
    """Keeps every message the daemon sends, as raw JSON."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.received: list[dict[str, Any]] = []

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" in data:
            self.received.append(data)
        return super().structure_message(data)


class Daemon:
    """One daemon process and the client talking to it."""

    def __init__(self, client: LanguageClient, db: Path) -> None:
        self.client = client
        self.db = db
        self.tokens: list[dict[str, Any]] = []
        self.steps: list[dict[str, Any]] = []
        self.usages: list[dict[str, Any]] = []
        client.feature("session/token")(lambda ls, params: self.tokens.append(params))
        client.feature("session/step")(lambda ls, params: self.steps.append(params))
        client.feature("session/steered")(lambda ls, params: None)
        client.feature("session/usage")(lambda ls, params: self.usages.append(params))

    def pieces(self) -> int:
        """How many of the model's pieces (words) the editor has been sent; the daemon joins
        pieces that arrive while it writes into one ``session/token``."""
        streamed: dict[tuple[str, int], str] = {}
        for t in self.tokens:
            key = (t["runId"], t["step"])
            streamed[key] = streamed.get(key, "") + t["text"]
        return sum(len(split_words(text)) for text in streamed.values())

    @property
    def protocol(self) -> RecordingProtocol:
        protocol: RecordingProtocol = self.client.protocol  # type: ignore[assignment]
        return protocol

    async def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """A request whose result is checked against the schema."""
        result = await self.protocol.send_request_async(method, params)
        protocol_schema.check("requests", method, "result", result)
        return result

    async def error(self, method: str, params: Any) -> JsonRpcException:
        """A request that must fail; its error is checked against the schema."""
        with pytest.raises(JsonRpcException) as caught:
            await self.protocol.send_request_async(method, params)
        exc = caught.value
        protocol_schema.check_error({"code": exc.code, "message": exc.message, "data": exc.data})
        assert "Traceback" not in exc.message and "Traceback" not in str(exc.data)
        return exc

    def check_sent(self) -> None:
        """Every notification the daemon sent matches the schema."""
        for message in self.protocol.received:
            if "method" in message and "id" not in message:
                protocol_schema.check(
                    "notifications", message["method"], "params", message.get("params")
                )

    @property
    def process(self) -> Any:
        return self.client._server


def _client_factory() -> LanguageClient:
    client = LanguageClient(converter_factory=plain_converter, protocol_cls=RecordingProtocol)
    register_lsp_features(client)
    return client


@pytest.fixture
def model() -> Iterator[ModelServer]:
    with ModelServer() as server:
        yield server


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "workspace"
    folder.mkdir()
    (folder / "README.md").write_text("# demo project\n")
    return folder


DaemonFactory = Callable[..., Awaitable[Daemon]]


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
            client_factory=_client_factory,
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
