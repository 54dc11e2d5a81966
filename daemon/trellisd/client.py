"""A small JSON-RPC client for a ``trellisd`` subprocess: what ``trellisd demo`` and the
benchmarks drive the daemon with, exactly as an editor would (Content-Length framing over
the child's stdin and stdout).

The daemon's own requests (``session/requestApproval``) go to ``on_request``, whose return
value is the answer; when the daemon withdraws one (``$/cancelRequest``) before it is
answered, the handler is cancelled and no answer is sent, as an editor closes its prompt."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any


class DaemonError(Exception):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(f"{error.get('message')} (code {error.get('code')})")
        self.code = error.get("code")
        self.data = error.get("data")


class DaemonClient:
    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self.on_notification: Callable[[str, dict[str, Any]], None] = lambda m, p: None
        self.on_request: Callable[[str, dict[str, Any]], Awaitable[Any]] | None = None
        self._answering: dict[Any, asyncio.Task[None]] = {}
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def spawn(cls, *args: str, env: Mapping[str, str] | None = None) -> DaemonClient:
        """``trellisd`` with ``args``, in ``env`` (the whole environment; None: this
        process's)."""
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "trellisd",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=None if env is None else dict(env),
            limit=2**24,
        )
        return cls(process)

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        while True:
            length = 0
            while True:
                line = await stdout.readline()
                if not line:
                    for future in self._pending.values():
                        if not future.done():
                            future.set_exception(ConnectionError("the daemon exited"))
                    return
                if line in (b"\r\n", b"\n"):
                    break
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            message = json.loads(await stdout.readexactly(length))
            if "method" in message and "id" in message:
                self._answering[message["id"]] = asyncio.create_task(self._answer(message))
            elif "method" in message:
                params = message.get("params") or {}
                if message["method"] == "$/cancelRequest" and params.get("id") in self._answering:
                    self._answering.pop(params["id"]).cancel()
                self.on_notification(message["method"], params)
            elif "id" in message and message["id"] in self._pending:
                future = self._pending.pop(message["id"])
                if "error" in message:
                    future.set_exception(DaemonError(message["error"]))
                else:
                    future.set_result(message.get("result"))

    async def _answer(self, request: dict[str, Any]) -> None:
        msg_id = request["id"]
        answer: dict[str, Any]
        if self.on_request is None:
            answer = {"error": {"code": -32601, "message": f"{request['method']} is not served"}}
        else:
            try:
                answer = {
                    "result": await self.on_request(request["method"], request.get("params") or {})
                }
            except Exception as exc:
                answer = {"error": {"code": -32603, "message": f"the client failed: {exc}"}}
        self._answering.pop(msg_id, None)
        self._send({"jsonrpc": "2.0", "id": msg_id, **answer})

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def request(self, method: str, params: dict[str, Any] | None = None) -> Any:
        msg_id = next(self._ids)
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        self._send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}})
        return await future

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params or {}})

    async def initialize(self, options: dict[str, Any] | None = None) -> Any:
        result = await self.request(
            "initialize",
            {
                "processId": os.getpid(),
                "rootUri": None,
                "capabilities": {},
                "initializationOptions": options or {},
            },
        )
        self.notify("initialized")
        return result

    async def close(self) -> int:
        try:
            await self.request("shutdown")
            self.notify("exit")
        except ConnectionError:
            pass
        code = await self.process.wait()
        self._reader.cancel()
        for task in self._answering.values():
            task.cancel()
        return code
