"""JSON-RPC 2.0 over newline-delimited JSON, as ACP frames it: one message a line, in both
directions. The agent answers the client's requests and notifications through ``dispatch``,
and sends its own requests (``session/request_permission``, ``fs/read_text_file``) and
notifications (``session/update``) through ``request`` and ``notify``; an answer finds its
request by id, and a request the agent stops waiting on is withdrawn with ``$/cancel_request``.

    RpcError        an error answer: its ``code``, ``message`` and ``data``, as on the wire
    Connection      one client: ``serve`` reads until the client closes its end

A line that is not JSON is answered with a parse error (id null), one that is not a JSON-RPC
message with an invalid-request error, and a line longer than ``limit`` bytes is dropped
with a parse error; the connection serves on after each. What a handler raises that is not
an ``RpcError`` is an internal error on the wire, with the traceback in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)

LINE_LIMIT_BYTES = 50 * 1024 * 1024
"""The longest message read, newline included."""

Dispatch = Callable[[str, Any, bool], Awaitable[Any]]
"""``(method, params, is_notification)`` to the result of a request (ignored for a
notification); raises ``RpcError`` for an error answer."""


class RpcError(Exception):
    """An error answer, sent or received."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data

    @classmethod
    def parse_error(cls, data: Any = None) -> RpcError:
        return cls(-32700, "Parse error", data)

    @classmethod
    def invalid_request(cls, data: Any = None) -> RpcError:
        return cls(-32600, "Invalid request", data)

    @classmethod
    def method_not_found(cls, method: str) -> RpcError:
        return cls(-32601, "Method not found", {"method": method})

    @classmethod
    def invalid_params(cls, data: Any = None) -> RpcError:
        return cls(-32602, "Invalid params", data)

    @classmethod
    def internal_error(cls, data: Any = None) -> RpcError:
        return cls(-32603, "Internal error", data)

    def wire(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "data": self.data}


class Writer(Protocol):
    """The write side of the connection (an ``asyncio.StreamWriter``)."""

    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...


class Connection:
    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: Writer,
        dispatch: Dispatch,
        limit: int = LINE_LIMIT_BYTES,
    ) -> None:
        self.reader, self.writer, self.dispatch, self.limit = reader, writer, dispatch, limit
        self._next_id = 0
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._handlers: set[asyncio.Task[None]] = set()
        self._write_lock = asyncio.Lock()
        self._closed = False

    # -- to the client --

    async def request(self, method: str, params: Any) -> Any:
        """Send a request and wait for its answer: its result, or the ``RpcError`` it
        carries. ``ConnectionError`` when the client has gone."""
        self._check_open()
        ident, self._next_id = self._next_id, self._next_id + 1
        answer = self._pending[ident] = asyncio.get_running_loop().create_future()
        try:
            await self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
            return await answer
        except asyncio.CancelledError:
            unanswered = not answer.done() or answer.cancelled()  # awaited, it is cancelled too
            if unanswered and not self._closed:  # withdrawn: the client may stop asking
                asyncio.ensure_future(self._withdraw(ident))
            raise
        finally:  # answered, failed or cancelled: a late answer finds nothing
            self._pending.pop(ident, None)

    async def _withdraw(self, ident: int) -> None:
        with contextlib.suppress(Exception):  # a closed pipe: nobody is left to tell
            await self.notify("$/cancel_request", {"requestId": ident})

    async def notify(self, method: str, params: Any) -> None:
        self._check_open()
        await self._send({"jsonrpc": "2.0", "method": method, "params": params})

    # -- from the client --

    async def serve(self, first: bytes = b"") -> None:
        """Serve the client's messages until it closes its end (``first``: a line read
        already), then fail the requests still waiting on it and stop the handlers."""
        try:
            if first.strip():
                await self._take(first)
            while (line := await self._read_line()) is not None:
                if line.strip():
                    await self._take(line)
        finally:
            await self.close()

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for answer in self._pending.values():
            if not answer.done():
                answer.set_exception(ConnectionError("Connection closed"))
        handlers = list(self._handlers)
        for task in handlers:
            task.cancel()
        for task in handlers:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _read_line(self) -> bytes | None:
        """The next line, None at the end; a line over the limit is dropped (read through to
        its end without keeping it) and answered with a parse error."""
        try:
            line = await self.reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            return exc.partial or None
        except asyncio.LimitOverrunError:
            while True:
                try:
                    await self.reader.readuntil(b"\n")
                    break
                except asyncio.LimitOverrunError as over:
                    await self.reader.readexactly(over.consumed)
                except asyncio.IncompleteReadError:
                    break
            log.warning("dropped a message longer than %d bytes", self.limit)
            await self._answer(None, error=RpcError.parse_error({"limit": self.limit}))
            return b""
        if len(line) > self.limit:
            await self._answer(None, error=RpcError.parse_error({"limit": self.limit}))
            return b""
        return line

    async def _take(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError as exc:
            log.warning("a line that is not JSON: %s", exc)
            await self._answer(None, error=RpcError.parse_error({"details": str(exc)}))
            return
        if not isinstance(message, dict):
            await self._answer(None, error=RpcError.invalid_request({"details": "not an object"}))
            return
        method = message.get("method")
        if method is None and "id" in message:
            self._answered(message)
        elif not isinstance(method, str):
            error = RpcError.invalid_request({"details": "no method"})
            await self._answer(message.get("id"), error=error)
        else:
            work = (
                self._handle(message["id"], method, message.get("params"))
                if "id" in message
                else self._handle_notification(method, message.get("params"))
            )
            task = asyncio.get_running_loop().create_task(work)
            self._handlers.add(task)
            task.add_done_callback(self._handlers.discard)

    def _answered(self, message: dict[str, Any]) -> None:
        answer = self._pending.get(message["id"]) if isinstance(message["id"], int) else None
        if answer is None or answer.done():
            return
        if "result" in message:
            answer.set_result(message["result"])
        elif "error" in message:
            error = message["error"] if isinstance(message["error"], dict) else {}
            code, text = error.get("code", -32603), error.get("message", "Error")
            answer.set_exception(RpcError(code, str(text), error.get("data")))
        else:
            answer.set_result(None)

    async def _handle(self, ident: Any, method: str, params: Any) -> None:
        try:
            result = await self.dispatch(method, params, False)
        except RpcError as exc:
            await self._answer(ident, error=exc)
        except Exception as exc:
            log.exception("%s failed", method)
            await self._answer(ident, error=RpcError.internal_error({"details": str(exc)}))
        else:
            await self._answer(ident, result=result)

    async def _handle_notification(self, method: str, params: Any) -> None:
        try:
            await self.dispatch(method, params, True)
        except RpcError as exc:
            log.info("the notification %s: %s %s", method, exc.message, exc.data or "")
        except Exception:
            log.exception("the notification %s failed", method)

    async def _answer(self, ident: Any, result: Any = None, error: RpcError | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": ident}
        if error is None:
            message["result"] = result
        else:
            message["error"] = error.wire()
        try:
            await self._send(message)
        except Exception:  # a closed pipe: nobody is left to answer
            log.exception("could not answer request %r", ident)

    async def _send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        async with self._write_lock:
            self.writer.write(data)
            await self.writer.drain()

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectionError("Connection closed")
