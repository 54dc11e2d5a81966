"""The JSON-RPC server: pygls over stdio. The only module (with ``handlers/``) that knows pygls.

pygls frames messages and runs the LSP lifecycle; this module adds what an editor agent
needs from it: requests with no ``params`` are served, errors reach the client as codes and
one-line messages (never tracebacks), and ``exit`` ends the process with LSP's exit code.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Generator
from functools import wraps
from typing import Any, cast

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    default_converter,
    lsp_method,
)

from . import PROTOCOL_VERSION, __version__, wire
from .agent.steering import Steer
from .config import ProviderSettings
from .daemon import Daemon, TurnRef, pid_alive
from .errors import StoreError, TrellisError
from .store import Store
from .store.records import Step
from .transport import BadFrame, FrameReader, FrameWriter, loads

log = logging.getLogger(__name__)


APPROVAL_TIMEOUT_SECONDS = float(os.environ.get("TRELLISD_APPROVAL_TIMEOUT", "300"))


class _Unservable(Exception):
    """A frame that cannot be served; answered with ``error`` when it had an id."""

    def __init__(self, msg_id: Any, error: JsonRpcException) -> None:
        super().__init__(error.message)
        self.msg_id, self.error = msg_id, error


class TrellisProtocol(LanguageServerProtocol):
    _server: TrellisServer

    def structure_message(self, data: dict[str, Any]) -> Any:
        if "jsonrpc" in data and "method" in data and "params" not in data:
            data = {**data, "params": None}  # served as if its params were empty
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if "method" in data and "id" in data:
                raise _Unservable(
                    data["id"],
                    JsonRpcException(
                        f"params of {data['method']} do not have the expected shape", code=-32602
                    ),
                ) from exc
            raise

    def handle_message(self, message: Any) -> None:
        if (
            self._shutdown
            and getattr(message, "method", types.EXIT) != types.EXIT
            and getattr(message, "id", None) is not None
        ):
            self._send_response(
                message.id,
                error=types.ResponseError(
                    code=-32600, message="the daemon is shutting down: only exit is served now"
                ),
            )
            return
        super().handle_message(message)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        result: types.InitializeResult = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {
            "trellisd": {
                "protocolVersion": PROTOCOL_VERSION,
                "provider": self._server.settings.describe(),
            }
        }
        return result

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """Unlike pygls, requests still in flight are answered; running turns stop at exit."""
        self._shutdown = True
        yield from ()

    @lsp_method(types.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        code = 0 if self._shutdown else 1
        asyncio.ensure_future(self._server.exit(code))
        yield from ()


def plain_converter() -> Any:
    """pygls's converter, but custom methods' params and results stay plain JSON values."""
    converter = default_converter()  # type: ignore[no-untyped-call]
    for cls in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        converter.register_structure_hook(cls, lambda obj, cls: cls(**obj))
    return converter


class TrellisServer(LanguageServer):
    protocol: TrellisProtocol

    def __init__(self, db_path: str, settings: ProviderSettings) -> None:
        super().__init__(
            "trellisd",
            __version__,
            protocol_cls=TrellisProtocol,
            converter_factory=plain_converter,
            text_document_sync_kind=types.TextDocumentSyncKind.None_,
        )
        self.db_path = db_path
        self.settings = settings
        self._daemon: Daemon | None = None
        self._store_error: StoreError | None = None
        self._opening: asyncio.Future[None] | None = None
        self._exiting: asyncio.Future[None] | None = None

    @property
    def daemon(self) -> Daemon:
        if self._daemon is None:
            raise self._store_error or StoreError("the store is not open yet")
        return self._daemon

    async def open_store(self) -> None:
        """Open the store once, however many requests ask for it at once."""
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open_store())
        await asyncio.shield(self._opening)

    async def _open_store(self) -> None:
        try:
            store = await asyncio.to_thread(Store, self.db_path, pid_alive)
        except StoreError as exc:
            log.error("%s", exc.message)
            self._store_error = exc
            return
        self._daemon = Daemon(store, self.settings, _WireNotifier(self))
        await self._daemon.start()

    def start_io(self, stdin: Any = None, stdout: Any = None) -> None:
        """Serve stdin until ``exit`` or end of input; either way, end like ``exit``."""
        self._stop_event = threading.Event()
        self.writer = FrameWriter(sys.stdout.fileno())
        self.protocol.set_writer(self.writer)

        async def serve() -> None:
            reader = FrameReader(sys.stdin.fileno())
            while (frame := await reader.read()) is not None:
                if isinstance(frame, BadFrame):
                    log.debug("%s", frame.message)
                    self._answer_unidentified(frame.code, frame.message)
                    continue
                try:
                    message = loads(frame.text, object_hook=self.protocol.structure_message)
                    self.protocol.handle_message(message)
                except Exception as exc:  # answered by report_server_error, never fatal
                    self.report_server_error(exc, JsonRpcException)
            log.info("end of input: the editor closed the connection")
            await self.exit(0 if self.protocol._shutdown else 1)

        asyncio.run(serve())

    async def exit(self, code: int) -> None:
        """Stop the running turns (they record ``cancelled``), answer the requests in
        flight, close the store, and end the process with ``code``."""
        if self._exiting is None:
            self._exiting = asyncio.ensure_future(self._exit(code))
        await self._exiting

    async def _exit(self, code: int) -> None:
        if self._daemon is not None:
            for running in self._daemon.running.values():
                if running.task is not None:
                    running.task.cancel()
        pending = [
            cast("asyncio.Future[Any]", f)
            for f in self.protocol._request_futures.values()
            if isinstance(f, asyncio.Future) and not f.done()
        ]
        if pending:
            await asyncio.wait(pending, timeout=3)
        await asyncio.sleep(0)  # let the last answers be written
        if self._daemon is not None:
            await asyncio.to_thread(self._daemon.close)
        await asyncio.to_thread(self.writer.close)
        logging.shutdown()
        os._exit(code)

    def report_server_error(self, error: Exception, source: Any) -> None:
        if isinstance(error, _Unservable):
            self.protocol._send_response(error.msg_id, error=error.error.to_response_error())
        elif isinstance(error, json.JSONDecodeError):
            log.warning("a frame was not JSON: %s", error)
            self._answer_unidentified(-32700, f"the frame was not JSON: {error}")
        elif isinstance(error, AttributeError):
            log.warning("a frame was not a JSON-RPC message: %s", error)
            self._answer_unidentified(
                -32600, "the frame was not a JSON-RPC request or notification"
            )
        else:
            log.error("%s", error)

    def _answer_unidentified(self, code: int, message: str) -> None:
        """An error for a frame whose id could not be read: ``id`` is null, as JSON-RPC says."""
        self.protocol._send_data(
            {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
        )


class _WireNotifier:
    def __init__(self, server: TrellisServer) -> None:
        self.server = server
        self._token_prefixes: dict[tuple[str, int], bytes] = {}

    def token(self, turn: TurnRef, step: int, text: str) -> None:
        """Serialised here, not by pygls: the text that arrives while the previous
        notification is being written goes out with it, as one ``session/token``."""
        key = (turn.run_id, step)
        prefix = self._token_prefixes.get(key)
        if prefix is None:
            if len(self._token_prefixes) > 64:
                self._token_prefixes.clear()
            params = json.dumps({**wire.turn_ref(turn), "step": step})[:-1]
            prefix = self._token_prefixes[key] = (
                b'{"jsonrpc": "2.0", "method": "session/token", "params": '
                + params.encode()
                + b', "text": '
            )
        self.server.writer.stream(key, prefix, text, b"}}")

    def step(self, turn: TurnRef, step: Step) -> None:
        self.server.protocol.notify("session/step", {**wire.turn_ref(turn), **wire.step(step)})

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> str:
        msg_id = f"approval-{uuid.uuid4().hex}"
        try:
            answer = await asyncio.wait_for(
                self.server.protocol.send_request_async(
                    "session/requestApproval", {**wire.turn_ref(turn), **request}, msg_id=msg_id
                ),
                APPROVAL_TIMEOUT_SECONDS,
            )
        except asyncio.CancelledError:
            self._withdraw(msg_id)  # the turn was cancelled while it waited
            raise
        except TimeoutError:
            self._withdraw(msg_id)
            return "timeout"
        except JsonRpcException as exc:
            log.warning("the editor could not answer an approval: %s", exc)
            return "deny"
        decision = answer.get("decision") if isinstance(answer, dict) else None
        return decision if decision in ("allow", "allowAlways", "deny") else "deny"

    def _withdraw(self, msg_id: str) -> None:
        """Tell the editor a question no longer needs an answer."""
        self.server.protocol._request_futures.pop(msg_id, None)
        self.server.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))

    def steered(self, turn: TurnRef, step: int | None, steer: Steer, delivered: bool) -> None:
        self.server.protocol.notify(
            "session/steered",
            {**wire.turn_ref(turn), "step": step, **steer.detail(), "delivered": delivered},
        )


Handler = Callable[[TrellisServer, wire.Params], Awaitable[Any]]


def method(server: TrellisServer, name: str) -> Callable[[Handler], Handler]:
    """Register ``fn`` for ``name``; a ``TrellisError`` becomes its JSON-RPC error."""

    def register(fn: Handler) -> Handler:
        @wraps(fn)
        async def handler(ls: TrellisServer, raw: Any) -> Any:
            try:
                await ls.open_store()
                return await fn(ls, wire.Params(raw))
            except TrellisError as exc:
                raise JsonRpcException(exc.message, code=exc.CODE, data=exc.data) from exc
            except (JsonRpcException, asyncio.CancelledError):
                raise
            except Exception as exc:
                log.exception("%s failed", name)
                raise JsonRpcException(
                    f"{name} failed inside trellisd: {exc}", code=-32603
                ) from exc

        server.feature(name)(handler)
        return fn

    return register


def build_server(db_path: str, settings: ProviderSettings) -> TrellisServer:
    from .handlers import register_all

    server = TrellisServer(db_path, settings)

    @server.feature(types.INITIALIZE)
    async def initialize(ls: TrellisServer, params: types.InitializeParams) -> None:
        options = params.initialization_options
        if isinstance(options, dict) and options:
            try:
                ls.settings = ls.settings.merged(options, "initializationOptions")
            except TrellisError as exc:
                raise JsonRpcException(exc.message, code=exc.CODE, data=exc.data) from exc
        await ls.open_store()
        if ls._daemon is not None:
            ls._daemon.settings = ls.settings

    register_all(server)
    return server
