"""The JSON-RPC server: pygls over stdio. The only module (with ``handlers/``) that knows pygls.

``transport`` reads and writes the frames; pygls runs JSON-RPC and the LSP lifecycle; this
module adds what an editor agent needs from them: requests with no ``params`` are served,
errors reach the client as codes and one-line messages (never tracebacks), and ``exit`` ends
the process with LSP's exit code.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
import threading
import uuid
from collections.abc import Generator
from typing import Any, cast

import attrs
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

from . import PROTOCOL_VERSION, __version__, services, wire
from .agent.steering import Steer
from .config import InitializationOptions, ProviderSettings
from .convert import structure
from .errors import StoreError, TrellisError
from .handlers import METHODS, Method
from .records import Step, TurnRef
from .services import Services
from .transport import BadFrame, FrameReader, FrameWriter, loads
from .vocabulary import ANSWERS, Decision

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
        if "jsonrpc" in data and "id" in data and not _valid_id(data["id"]):
            raise _Unservable(
                None,
                JsonRpcException("a request id must be a string, a number or null", code=-32600),
            )
        if "jsonrpc" in data and "method" in data:
            if data.get("params", None) in (None, []):
                # Left out, null, or an empty array (Lua's `{}`): served as if empty.
                data = {**data, "params": None}
            if "id" in data and _is_notification(data["method"]):
                raise _Unservable(
                    data["id"],
                    JsonRpcException(
                        f"{data['method']} is a notification: send it without an id",
                        code=-32601,
                    ),
                )
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
        if self._shutdown and not hasattr(message, "method"):
            # An answer to the daemon's own request (an approval): still awaited.
            self._handle_response(
                message.id, getattr(message, "result", None), getattr(message, "error", None)
            )
            return
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


def _valid_id(value: Any) -> bool:
    return value is None or (isinstance(value, str | int) and not isinstance(value, bool))


def _is_notification(method: str) -> bool:
    """An LSP method that is a notification: a frame with an id for it cannot be served."""
    entry = types.METHOD_TO_TYPES.get(method)
    return entry is not None and entry[1] is None and method != types.SHUTDOWN


class _HideOptions(logging.Filter):
    """pygls logs ``InitializeParams`` whole at debug; ``initializationOptions`` holds a key."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(
            isinstance(a, types.InitializeParams) for a in record.args
        ):
            record.args = tuple(
                attrs.evolve(a, initialization_options="<not logged>")
                if isinstance(a, types.InitializeParams)
                else a
                for a in record.args
            )
        return True


class _ClientMistakes(logging.Filter):
    """A frame the daemon cannot serve is the client's mistake, answered on the wire: it is
    logged at debug (by ``report_server_error``), not as an error with a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, _Unservable | json.JSONDecodeError | AttributeError)


for _name in ("pygls.protocol.language_server", "pygls.protocol.json_rpc"):
    logging.getLogger(_name).addFilter(_HideOptions())
frames_log = logging.getLogger(f"{__name__}.frames")
frames_log.addFilter(_ClientMistakes())


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
        self._services: Services | None = None
        self._store_error: StoreError | None = None
        self._opening: asyncio.Future[None] | None = None
        self._exiting: asyncio.Future[None] | None = None

    @property
    def services(self) -> Services:
        if self._services is None:
            raise self._store_error or StoreError("the store is not open yet")
        return self._services

    async def open_store(self) -> None:
        """Open the store once, however many requests ask for it at once."""
        if self._opening is None:
            self._opening = asyncio.ensure_future(self._open_store())
        await asyncio.shield(self._opening)

    async def _open_store(self) -> None:
        try:
            self._services = await services.start(self.db_path, self.settings, _WireNotifier(self))
        except StoreError as exc:
            log.error("%s", exc.message)
            self._store_error = exc

    def configure(self, options: InitializationOptions) -> None:
        """Lay ``initializationOptions`` over the settings, for the turns that start later."""
        self.settings = self.settings.merged(options, "initializationOptions")
        if self._services is not None:
            self._services.defaults.provider = self.settings

    def start_io(self, stdin: Any = None, stdout: Any = None) -> None:
        """Serve stdin until ``exit`` or end of input; either way, end like ``exit``.

        Frames are read and written by ``transport``; a closed stdout drops what is sent
        afterwards, so what the daemon records never depends on the editor being there.
        """
        self._stop_event = threading.Event()
        self.writer = FrameWriter(sys.stdout.fileno())
        self.protocol.set_writer(self.writer)

        async def serve() -> None:
            reader = FrameReader(sys.stdin.fileno())
            while (frame := await reader.read()) is not None:
                if isinstance(frame, BadFrame):
                    frames_log.debug("%s", frame.message)
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
        if self._services is not None:
            self._services.running.cancel_all()
        pending = [
            cast("asyncio.Future[Any]", f)
            for f in self.protocol._request_futures.values()
            if isinstance(f, asyncio.Future) and not f.done()
        ]
        if pending:
            await asyncio.wait(pending, timeout=3)
        await asyncio.sleep(0)  # let the last answers be written
        if self._services is not None:
            await self._services.close()
        await asyncio.to_thread(self.writer.close)
        logging.shutdown()
        os._exit(code)

    def report_server_error(self, error: Exception, source: Any) -> None:
        if isinstance(error, _Unservable) and error.msg_id is None:
            log.debug("answered a frame with no usable id: %s", error.error.message)
            self._answer_unidentified(error.error.code, error.error.message)
        elif isinstance(error, _Unservable):
            log.debug("answered %s: %s", error.msg_id, error.error.message)
            self.protocol._send_response(error.msg_id, error=error.error.to_response_error())
        elif isinstance(error, json.JSONDecodeError):
            log.info("a frame was not JSON: %s", error)
            self._answer_unidentified(-32700, f"the frame was not JSON: {error}")
        elif isinstance(error, AttributeError):
            log.info("a frame was not a JSON-RPC message: %s", error)
            self._answer_unidentified(
                -32600, "the frame was not a JSON-RPC request or notification"
            )
        elif isinstance(error, JsonRpcException) and error.code != -32603:
            # Already answered, and a client's to read: an unknown session, a bad param, a
            # store that cannot be written (logged once, when it was found).
            log.debug("answered %s: %s", error.code, error.message)
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

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision:
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
            return Decision.TIMEOUT
        except JsonRpcException as exc:
            log.warning("the editor could not answer an approval: %s", exc)
            return Decision.DENY
        decision = answer.get("decision") if isinstance(answer, dict) else None
        return Decision(decision) if decision in ANSWERS else Decision.DENY

    def _withdraw(self, msg_id: str) -> None:
        """Tell the editor a question no longer needs an answer."""
        self.server.protocol._request_futures.pop(msg_id, None)
        self.server.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))

    def steered(self, turn: TurnRef, step: int | None, steer: Steer, delivered: bool) -> None:
        self.server.protocol.notify(
            "session/steered",
            {**wire.turn_ref(turn), "step": step, **steer.detail(), "delivered": delivered},
        )


def serve(server: TrellisServer, method: Method[Any]) -> None:
    """Register ``method``: its params structured once, a ``TrellisError`` as its code."""

    async def handler(ls: TrellisServer, raw: Any) -> Any:
        try:
            await ls.open_store()
            return await method.serve(ls.services, wire.parse(method.params, raw))
        except TrellisError as exc:
            raise JsonRpcException(exc.message, code=exc.CODE, data=exc.data) from exc
        except (JsonRpcException, asyncio.CancelledError):
            raise
        except Exception as exc:
            log.exception("%s failed", method.name)
            raise JsonRpcException(
                f"{method.name} failed inside trellisd: {exc}", code=-32603
            ) from exc

    server.feature(method.name)(handler)


def build_server(db_path: str, settings: ProviderSettings) -> TrellisServer:
    server = TrellisServer(db_path, settings)

    @server.feature(types.INITIALIZE)
    async def initialize(ls: TrellisServer, params: types.InitializeParams) -> None:
        raw = params.initialization_options
        if isinstance(raw, dict) and raw:
            try:
                ls.configure(structure(raw, InitializationOptions, "initializationOptions"))
            except TrellisError as exc:
                raise JsonRpcException(exc.message, code=exc.CODE, data=exc.data) from exc
        await ls.open_store()

    for method in METHODS:
        serve(server, method)
    return server
