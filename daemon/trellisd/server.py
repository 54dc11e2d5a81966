"""The JSON-RPC server: pygls over stdio. The only module (with ``handlers/``) that knows pygls.

``transport`` reads and writes the frames; pygls runs JSON-RPC and the LSP lifecycle; this
module adds what an editor agent needs from them: requests with no ``params`` are served,
errors reach the client as codes and one-line messages (never tracebacks), and ``exit`` ends
the process with LSP's exit code.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import logging
import os
import signal
import sys
import uuid
from collections.abc import Callable, Generator
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
from .config import InitializationOptions
from .config_file import Settings
from .convert import structure
from .edge import end_process
from .errors import NotFound, StoreError, TrellisError
from .handlers import METHODS, Method
from .handlers.base import Deferred
from .hub import Hub
from .plans import PlanEntry
from .policy import PolicySpec
from .policy.layers import Approval, Policy
from .records import Step, ToolCall, TurnRef, TurnResult
from .services import Services
from .services.queue import Queued
from .services.seams import Notifier
from .services.settings import WindowSettings, use_window
from .tools.processes import ProcessState
from .transport import BadFrame, FrameReader, FrameWriter, loads
from .vocabulary import ANSWERS, CallStatus, Decision

WALL_KEYS = ("sandbox", "network")
"""The keys of ``initializationOptions`` that set the window's walls (``policy``)."""

log = logging.getLogger(__name__)


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

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: Any | None = None
    ) -> None:
        if isinstance(result, Deferred):
            result = result.complete()
        super()._send_response(msg_id, result, error)

    @lsp_method(types.INITIALIZE)
    def lsp_initialize(
        self, params: types.InitializeParams
    ) -> Generator[Any, Any, types.InitializeResult]:
        result: types.InitializeResult = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {
            "trellisd": {
                "protocolVersion": PROTOCOL_VERSION,
                "provider": self._server.settings.describe(),
                "daemon": {"pid": os.getpid(), "shared": self._server.daemon.shared},
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


@functools.cache
def plain_converter() -> Any:
    """pygls's converter, but custom methods' params and results stay plain JSON values.
    Built once (it takes milliseconds) and shared by every window."""
    converter = default_converter()  # type: ignore[no-untyped-call]
    for cls in (JsonRPCRequestMessage, JsonRPCNotification, JsonRPCResponseMessage):
        converter.register_structure_hook(cls, lambda obj, cls: cls(**obj))
    return converter


class Daemon:
    """One store's services and the windows attached to them (``hub``): one window (stdin and
    stdout) in standalone mode, any number over the shared daemon's socket. A turn belongs to
    the daemon, not to the window that started it; in standalone mode the daemon ends with its
    one window. ``end`` ends the process with a code, once the daemon has exited."""

    def __init__(
        self,
        db_path: str,
        settings: Settings,
        shared: bool = False,
        end: Callable[[int], object] | None = None,
    ) -> None:
        self.db_path = db_path
        self.settings = settings
        self.shared = shared
        self.hub = Hub(settings.daemon.approval_timeout)
        self.hub.on_change = self._changed
        self.end = end
        # Called when a window leaves or a turn ends (the shared daemon's idle exit).
        self.on_change: Callable[[], None] | None = None
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
            notifier = self.hub.notifier
            self._services = await services.start(
                self.db_path, self.settings, notifier, asker=notifier
            )
            self._services.running.on_end = self._changed
            self.hub.running = self._services.running
        except StoreError as exc:
            log.error("%s", exc.message)
            self._store_error = exc

    def running_turns(self) -> int:
        return 0 if self._services is None else len(self._services.running)

    def running_sessions(self) -> list[dict[str, str]]:
        if self._services is None:
            return []
        return [wire.turn_ref(r.ref) for r in self._services.running]

    def idle(self) -> bool:
        return not self.hub.windows and not self.running_turns()

    def _changed(self) -> None:
        if self.on_change is not None:
            self.on_change()

    def live(self, session_id: str) -> dict[str, Any] | None:
        """The session's running turn as a window that reopens it draws it (its snapshot, as
        an ACP client joining it gets): its ids, its prompt, its step and the text of that
        step streamed so far, and the calls of steps not committed yet."""
        live = None if self._services is None else self._services.running.snapshot(session_id)
        if live is None:
            return None
        return {
            **wire.turn_ref(live.ref),
            "prompt": live.prompt,
            "step": live.step,
            "text": live.text,
            "thought": live.thought,
            "calls": [{**wire.live_call(call), "output": output} for call, output in live.calls],
        }

    async def serve_window(self, window: TrellisServer, reader: FrameReader) -> int:
        """Serve one window's frames until it sends ``exit`` or its input ends; the exit code
        LSP gives that end. Its requests run in its own settings."""
        self.hub.attach(window)
        use_window(window.defaults)
        try:
            return await window.serve(reader)
        finally:
            self.hub.detach(window)

    @property
    def exiting(self) -> bool:
        return self._exiting is not None

    async def exit(self, code: int) -> None:
        """Stop the running turns (they record ``cancelled``), answer the requests in
        flight, close the store, and end the process with ``code``."""
        if self._exiting is None:
            self._exiting = asyncio.ensure_future(self._exit(code))
        await self._exiting

    async def _exit(self, code: int) -> None:
        if self._services is not None:
            self._services.queues.drop_all("dropped as the daemon exited")
            self._services.running.cancel_all()
        pending = [
            cast("asyncio.Future[Any]", f)
            for window in self.hub.windows
            if isinstance(window, TrellisServer)
            for f in window.protocol._request_futures.values()
            if isinstance(f, asyncio.Future) and not f.done()
        ]
        if self._services is not None:  # a turn whose window left records its end too
            pending += [r.task for r in self._services.running if r.task is not None]
        if pending:
            await asyncio.wait(pending, timeout=3)
        await asyncio.sleep(0)  # let the last answers be written
        if self._services is not None:
            await self._services.close()
        for window in list(self.hub.windows):
            await window.close()
        logging.shutdown()
        if self.end is not None:
            self.end(code)


class TrellisServer(LanguageServer):
    """One window: a connection from an editor, with its own settings."""

    protocol: TrellisProtocol

    def __init__(self, daemon: Daemon, settings: Settings, writer: FrameWriter, peer: str) -> None:
        super().__init__(
            "trellisd",
            __version__,
            protocol_cls=TrellisProtocol,
            converter_factory=plain_converter,
            text_document_sync_kind=types.TextDocumentSyncKind.None_,
        )
        self.daemon = daemon
        self.settings = settings.provider
        self.defaults = WindowSettings(settings.provider, settings)
        self.peer = peer
        self.writer = writer
        self.protocol.set_writer(writer)
        self.pid: int | None = None  # the forwarder's, for a window of the shared daemon
        self._notifier = _WindowNotifier(self)
        self._reading: asyncio.Task[None] | None = None
        self._exit_code: int | None = None

    @property
    def notifier(self) -> Notifier:
        return self._notifier

    @property
    def services(self) -> Services:
        return self.daemon.services

    async def open_store(self) -> None:
        await self.daemon.open_store()

    def configure(self, options: InitializationOptions, walls: PolicySpec | None = None) -> None:
        """Lay ``initializationOptions`` over the window's settings, for the turns it starts
        later; its ``sandbox`` and ``network`` over the window's default policy."""
        self.settings = self.settings.merged(options, "initializationOptions")
        self.defaults.provider = self.settings
        if walls is not None:
            base = self.defaults.base
            policy = base.policy.stacked(Policy.of(walls))
            self.defaults.base = dataclasses.replace(base, policy=policy)

    async def serve(self, reader: FrameReader) -> int:
        self._reading = asyncio.ensure_future(self._read(reader))
        with contextlib.suppress(asyncio.CancelledError):
            await self._reading
        reader.close()
        if self._exit_code is None:
            log.info("end of input: %s closed the connection", self.peer)
            return 0 if self.protocol._shutdown else 1
        return self._exit_code

    async def _read(self, reader: FrameReader) -> None:
        while (frame := await reader.read()) is not None:
            if isinstance(frame, BadFrame):
                frames_log.debug("%s", frame.message)
                self._answer_unidentified(frame.code, frame.message)
                continue
            try:
                message = loads(frame.text, object_hook=self.protocol.structure_message)
                self.protocol.handle_message(message)
            except RecursionError:
                log.info("a frame nested too deep to be read")
                self._answer_unidentified(
                    -32700, "the frame nests arrays and objects too deep to be read"
                )
            except Exception as exc:  # answered by report_server_error, never fatal
                self.report_server_error(exc, JsonRpcException)

    async def exit(self, code: int) -> None:
        """LSP ``exit``: the window ends with ``code``; in standalone mode so does the
        daemon."""
        if not self.daemon.shared:
            await self.daemon.exit(code)
            return
        self._exit_code = code
        if self._reading is not None:
            self._reading.cancel()

    async def close(self, final: bytes = b"") -> None:
        """Write what is queued and then ``final`` (the end of a shared daemon's window), and
        stop writing."""
        await asyncio.to_thread(self.writer.close, 5.0, final)

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision:
        """``session/requestApproval``; withdrawn with ``$/cancelRequest`` when cancelled while
        the window is still attached."""
        msg_id = f"approval-{uuid.uuid4().hex}"
        answer = self.protocol.send_request_async(
            "session/requestApproval", {**wire.turn_ref(turn), **request}, msg_id=msg_id
        )
        try:
            result = await answer
        except asyncio.CancelledError:
            self.protocol._request_futures.pop(msg_id, None)
            if self in self.daemon.hub.windows:
                self.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
            raise
        decision = result.get("decision") if isinstance(result, dict) else None
        return Decision(decision) if decision in ANSWERS else Decision.DENY

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


_token_prefixes: dict[tuple[str, str, int], bytes] = {}
"""The start of a step's ``session/token`` (and ``session/thought``) frames, made once for
every window."""


def _token_prefix(turn: TurnRef, step: int, method: str = "session/token") -> bytes:
    key = (method, turn.run_id, step)
    prefix = _token_prefixes.get(key)
    if prefix is None:
        if len(_token_prefixes) > 64:
            _token_prefixes.clear()
        params = json.dumps({**wire.turn_ref(turn), "step": step})[:-1]
        prefix = _token_prefixes[key] = (
            b'{"jsonrpc": "2.0", "method": "'
            + method.encode()
            + b'", "params": '
            + params.encode()
            + b', "text": '
        )
    return prefix


class _WindowNotifier:
    """What happens in the turns a native window follows, as its notifications."""

    def __init__(self, window: TrellisServer) -> None:
        self.window = window

    def token(self, turn: TurnRef, step: int, text: str) -> None:
        """Serialised here, not by pygls: the text that arrives while the previous
        notification is being written goes out with it, as one ``session/token``."""
        self.window.writer.stream((turn.run_id, step), _token_prefix(turn, step), text, b"}}")

    def thought(self, turn: TurnRef, step: int, text: str) -> None:
        """As ``token``: reasoning that arrives while the previous piece is being written goes
        out with it, as one ``session/thought``."""
        prefix = _token_prefix(turn, step, "session/thought")
        self.window.writer.stream(("thought", turn.run_id, step), prefix, text, b"}}")

    def usage(self, turn: TurnRef, figures: dict[str, Any]) -> None:
        self.window.protocol.notify(
            "session/usage", {"sessionId": turn.session_id, "turnId": turn.turn_id, **figures}
        )

    def plan(self, turn: TurnRef, step: int, entries: tuple[PlanEntry, ...]) -> None:
        plan = [e.to_wire() for e in entries]
        self.window.protocol.notify(
            "session/plan", {**wire.turn_ref(turn), "step": step, "entries": plan}
        )

    def forked(self, origin_id: str, fork_id: str) -> None:
        """The hub makes the window follow the fork."""

    def step(self, turn: TurnRef, step: Step) -> None:
        self.window.protocol.notify("session/step", {**wire.turn_ref(turn), **wire.step(step)})

    def tool_call(self, turn: TurnRef, step: int, call: ToolCall, status: CallStatus) -> None:
        self.window.protocol.notify(
            "session/toolCall", wire.tool_call(turn, step, call, status.value)
        )

    def child_started(
        self, turn: TurnRef, step: int, call: ToolCall, child_session_id: str
    ) -> None:
        started = wire.tool_call(turn, step, call, CallStatus.RUNNING.value)
        self.window.protocol.notify(
            "session/toolCall", {**started, "childSessionId": child_session_id}
        )

    def tool_output(self, turn: TurnRef, step: int, call: ToolCall, text: str) -> None:
        self.window.protocol.notify("session/toolOutput", wire.tool_output(turn, step, call, text))

    def process_output(self, session_id: str, process_id: str, text: str) -> None:
        params = {"sessionId": session_id, "processId": process_id, "text": text}
        self.window.protocol.notify("session/processOutput", params)

    def process_exited(self, state: ProcessState) -> None:
        self.window.protocol.notify("session/processExited", wire.process_exited(state))

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision:
        return await self.window.ask_approval(turn, request)

    def queued(self, entry: Queued, position: int) -> None:
        self.window.protocol.notify("session/queued", wire.queued(entry, position))

    def dequeued(self, entry: Queued, reason: str) -> None:
        params = {"sessionId": entry.session_id, "queueId": entry.queue_id, "reason": reason}
        self.window.protocol.notify("session/dequeued", params)

    def mode_changed(self, session_id: str, approval: Approval) -> None:
        params = {"sessionId": session_id, "approval": approval}
        self.window.protocol.notify("session/modeChanged", params)

    def turn_ended(self, turn: TurnRef, result: TurnResult) -> None:
        self.window.protocol.notify("session/turnEnded", wire.turn_ended(turn, result))

    def steered(self, turn: TurnRef, step: int | None, steer: Steer, delivered: bool) -> None:
        self.window.protocol.notify(
            "session/steered",
            {**wire.turn_ref(turn), "step": step, **steer.detail(), "delivered": delivered},
        )


def serve(server: TrellisServer, method: Method[Any]) -> None:
    """Register ``method``: its params structured once, a ``TrellisError`` as its code, and
    the window following the session the method says it follows."""

    async def handler(ls: TrellisServer, raw: Any) -> Any:
        session_id: str | None = None
        try:
            await ls.open_store()
            params = wire.parse(method.params, raw)
            session_id = getattr(params, "session_id", None)
            if method.follow == "before" and session_id is not None:
                ls.daemon.hub.follow(ls, session_id)
            result = await method.serve(ls.services, params)
        except TrellisError as exc:
            if method.follow == "before" and session_id is not None and isinstance(exc, NotFound):
                ls.daemon.hub.unfollow(ls, session_id)
            raise JsonRpcException(exc.message, code=exc.CODE, data=exc.data) from exc
        except (JsonRpcException, asyncio.CancelledError):
            raise
        except Exception as exc:
            log.exception("%s failed", method.name)
            raise JsonRpcException(
                f"{method.name} failed inside trellisd: {exc}", code=-32603
            ) from exc
        if method.follow in ("answer", "live") and isinstance(result, dict):
            return Deferred(functools.partial(_followed, ls, method, result))
        if method.follow == "leave" and session_id is not None:
            ls.daemon.hub.unfollow(ls, session_id)
        if method.follow == "forget" and session_id is not None:
            ls.daemon.hub.forget(session_id)
        return result

    server.feature(method.name)(handler)


def _followed(window: TrellisServer, method: Method[Any], result: dict[str, Any]) -> Any:
    """The answer of a method that makes the window follow its session, completed as it is
    written: from this instant on the window gets the session's notifications."""
    session_id = result.get("sessionId")
    if not isinstance(session_id, str):
        return result
    window.daemon.hub.follow(window, session_id)
    if method.follow == "live":
        live = window.daemon.live(session_id)
        if live is not None:
            return {**result, "running": live}
    return result


def register(server: TrellisServer) -> TrellisServer:
    @server.feature(types.INITIALIZE)
    async def initialize(ls: TrellisServer, params: types.InitializeParams) -> None:
        raw = params.initialization_options
        if isinstance(raw, dict) and raw:
            walls = {key: raw[key] for key in WALL_KEYS if key in raw}
            rest = {key: value for key, value in raw.items() if key not in WALL_KEYS}
            where = "initializationOptions"
            try:
                ls.configure(
                    structure(rest, InitializationOptions, where),
                    structure(walls, PolicySpec, where) if walls else None,
                )
            except TrellisError as exc:
                raise JsonRpcException(exc.message, code=exc.CODE, data=exc.data) from exc
        await ls.open_store()

    for method in METHODS:
        serve(server, method)
    return server


def window(daemon: Daemon, settings: Settings, writer: FrameWriter, peer: str) -> TrellisServer:
    """A window of ``daemon``: an editor's connection, served with ``settings``."""
    return register(TrellisServer(daemon, settings, writer, peer))


def serve_stdio(db_path: str, settings: Settings) -> None:
    """Standalone mode: one daemon, one window on stdin and stdout, until ``exit`` or the end
    of input; either way, end like ``exit``. A closed stdout drops what is sent afterwards,
    so what the daemon records never depends on the editor being there."""
    daemon = Daemon(db_path, settings, end=end_process)

    async def run() -> None:
        editor = window(daemon, settings, FrameWriter(sys.stdout.fileno()), "the editor")
        code = await daemon.serve_window(editor, FrameReader(sys.stdin.fileno()))
        daemon.hub.attach(editor)  # its writer is flushed at exit
        await daemon.exit(code)

    def interrupted() -> None:
        # Ctrl-C in a terminal ends the daemon as ``exit`` does, with the shell's code for
        # it: running turns record ``cancelled`` and the store is closed. A second Ctrl-C
        # while that is under way ends the process at once.
        if daemon.exiting:
            end_process(130)
        asyncio.ensure_future(daemon.exit(130))

    with asyncio.Runner() as runner:
        # Ours before the runner's own, which would cancel the serving task and end with 1.
        runner.get_loop().add_signal_handler(signal.SIGINT, interrupted)
        runner.run(run())
