"""One live connection to an MCP server, through the official ``mcp`` SDK: the one module
that imports it.

The SDK's client must be entered and left in one task, so each connection has a task of its
own that holds it open until ``stop``. A stdio server runs under ``launcher.py`` (its own
process group, killed with the daemon even on ``kill -9``, its messages capped), inside the
session's walls (``sandbox``) unless it is the user's own and named in ``unconfinedMcp``,
with the allowed variables of the window's environment (``tools.environment``) plus its
entry's ``env``; what it
writes on stderr goes to the daemon's log, and its last lines are kept to say why it failed.

Whatever goes wrong (the server cannot start, crashes, hangs past its timeout, answers
something that is not MCP) is one ``McpFailure`` with a sentence for the model and the
user; the connection is then stopped, and the next use starts the server again.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from collections import deque
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED

from ..sandbox.bwrap import Launch, confine
from ..sandbox.walls import Walls
from ..tools.environment import KEEP_VARIABLE, server_environment
from .answers import Answer, McpFailure, RemoteTool
from .spec import McpServerSpec

log = logging.getLogger(__name__)

LAUNCHER = Path(__file__).with_name("launcher.py")
MAX_MESSAGE_BYTES = 16 * 1024 * 1024
STDERR_LINES = 20
STOP_SECONDS = 5.0
MAX_PAGES = 20  # of a tools/list answer


class McpConnection:
    """The live connection to one server. ``open`` starts it (and lists its tools);
    ``call`` calls a tool; ``stop`` ends it, its process group with it."""

    def __init__(
        self, spec: McpServerSpec, root: Path, start_timeout: float, walls: Walls | None = None
    ) -> None:
        self.spec, self.root, self.start_timeout = spec, root, start_timeout
        self.walls = walls
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._stderr: deque[str] = deque(maxlen=STDERR_LINES)
        self._stderr_done: asyncio.Event | None = None
        self._errlog: Any = None

    @property
    def live(self) -> bool:
        return self._task is not None and not self._task.done() and self._client is not None

    async def open(self) -> list[RemoteTool]:
        """Start the server and list its tools."""
        loop = asyncio.get_running_loop()
        self._ready = loop.create_future()
        self._task = asyncio.ensure_future(self._hold())
        try:
            await self._bounded(asyncio.shield(self._ready), self.start_timeout, "start")
            tools: list[RemoteTool] = await self._bounded(
                self._list(), self.start_timeout, "list its tools"
            )
            return tools
        except BaseException:
            await self.stop()
            raise

    async def _list(self) -> list[RemoteTool]:
        assert self._client is not None
        tools: list[RemoteTool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await self._client.list_tools(cursor=cursor)
            tools.extend(RemoteTool(t.name, t.description, t.input_schema) for t in page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def call(self, tool: str, arguments: dict[str, Any], timeout: float) -> Answer:
        if not self.live:
            raise McpFailure(f"MCP server {self.spec.name} is not running")
        assert self._client is not None
        result = await self._bounded(
            self._client.call_tool(tool, arguments), timeout, f"answer {tool}"
        )
        return Answer(_text(result.content, result.structured_content), bool(result.is_error))

    async def _bounded(self, work: Any, timeout: float, doing: str) -> Any:
        """``work`` raced against the server's end and ``timeout``: an ``McpFailure`` saying
        which came first, with the server's last words on stderr."""
        assert self._task is not None
        self._stderr.clear()  # what it says from now on tells why this fails
        job = asyncio.ensure_future(work)
        try:
            done, _ = await asyncio.wait(
                {job, self._task}, timeout=timeout, return_when="FIRST_COMPLETED"
            )
        except asyncio.CancelledError:
            job.cancel()
            raise
        if job in done:
            try:
                return job.result()
            except McpFailure:
                raise
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    raise McpFailure(await self._why("stopped (connection closed)")) from exc
                raise McpFailure(f"MCP server {self.spec.name}: {exc.error.message}") from exc
            except Exception as exc:  # anything the SDK or the transport raised
                raise McpFailure(await self._why(f"failed: {_cause(exc)}")) from exc
        job.cancel()
        if self._task in done:
            raise McpFailure(await self._why("stopped"))
        reason = f"did not {doing} within {timeout:g} seconds; it was stopped"
        await self.stop()
        raise McpFailure(await self._why(reason))

    async def _why(self, what: str) -> str:
        if self._task is not None and self._task.done() and not self._task.cancelled():
            error = self._task.exception()
            if error is not None:
                what = f"{what} ({_cause(error)})"
        if self._stderr_done is not None:  # its last words may still be on the way
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stderr_done.wait(), 1.0)
        said = " | ".join(self._stderr)
        told = f"MCP server {self.spec.name} {what}"
        return f"{told}; it said: {said[-1000:]}" if said else told

    async def _hold(self) -> None:
        assert self._ready is not None
        try:
            async with contextlib.AsyncExitStack() as stack:
                client = Client(await self._transport(stack), mode="legacy")
                self._client = await stack.enter_async_context(client)
                if self._errlog is not None:  # the server has its copy: ours would hide its end
                    self._errlog.close()
                if not self._ready.done():
                    self._ready.set_result(None)
                await self._until_stopped()
        except Exception as exc:
            if not self._ready.done():
                why = await self._why(f"failed to start: {_cause(exc)}")
                self._ready.set_exception(McpFailure(why))
            log.info("MCP server %s stopped: %s", self.spec.name, _cause(exc))
            raise
        finally:
            self._client = None

    async def _until_stopped(self) -> None:
        """Until ``stop``, or until a stdio server's process group has gone (its stderr
        ends when the last of them exits)."""
        waits = [asyncio.ensure_future(self._stop.wait())]
        if self._stderr_done is not None:
            waits.append(asyncio.ensure_future(self._stderr_done.wait()))
        try:
            await asyncio.wait(waits, return_when="FIRST_COMPLETED")
        finally:
            for wait in waits:
                wait.cancel()
        if not self._stop.is_set():
            raise McpFailure("exited")

    async def _transport(self, stack: contextlib.AsyncExitStack) -> Any:
        spec = self.spec
        if spec.url is not None:
            http = httpx2.AsyncClient(
                headers=spec.headers or {},
                timeout=httpx2.Timeout(30.0, read=None),
                transport=CappedTransport(MAX_MESSAGE_BYTES),
            )
            await stack.enter_async_context(http)
            # an event of an event stream is capped by the SDK, a JSON answer by the transport
            return streamable_http_client(
                spec.url, http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES
            )
        assert spec.command is not None
        cwd = self.root / spec.cwd if spec.cwd is not None else self.root
        command, env = [spec.command, *spec.args], server_environment(spec.env)
        if self.walls is not None and self.walls.confined:
            launch = await stack.enter_async_context(confine(self.walls, command, cwd, env))
            stack.callback(self._sweep, launch)
            command = launch.argv
            env = {
                **launch.env,
                KEEP_VARIABLE: ",".join(n for n in launch.env if n != KEEP_VARIABLE),
            }
        params = StdioServerParameters(
            command=sys.executable,
            args=["-I", str(LAUNCHER), str(os.getpid()), str(MAX_MESSAGE_BYTES), "--", *command],
            env=env,
            cwd=str(cwd),
            encoding_error_handler="replace",
        )
        errlog = self._watch_stderr(stack)
        return stdio_client(params, errlog=errlog)

    def _sweep(self, launch: Launch) -> None:
        """The server has stopped: remove what it left on a protected path."""
        swept = launch.sweep()
        if swept:
            log.warning(
                "MCP server %s created protected paths (%s); they were moved to %s",
                self.spec.name,
                ", ".join(swept),
                launch.moved_to or "nowhere (removed)",
            )

    def _watch_stderr(self, stack: contextlib.AsyncExitStack) -> Any:
        """A pipe for the server's stderr, read into the log and the last lines kept."""
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        writer = os.fdopen(write_end, "w")
        done = self._stderr_done = asyncio.Event()
        loop = asyncio.get_running_loop()
        pending = bytearray()

        def readable() -> None:
            try:
                data = os.read(read_end, 65536)
            except BlockingIOError:
                return
            if not data:
                loop.remove_reader(read_end)
                os.close(read_end)
                self._said(bytes(pending))
                done.set()
                return
            pending.extend(data)
            *lines, rest = bytes(pending).split(b"\n")
            pending[:] = rest[-4096:]
            for line in lines:
                self._said(line)

        loop.add_reader(read_end, readable)
        stack.callback(writer.close)  # if the server never started
        self._errlog = writer
        return writer

    def _said(self, line: bytes) -> None:
        text = line.decode("utf-8", "replace").strip()[:500]
        if text:
            self._stderr.append(text)
            log.info("MCP server %s: %s", self.spec.name, text)

    async def stop(self) -> None:
        """End the connection; a stdio server's process group is killed if it lingers."""
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        try:
            await asyncio.wait_for(asyncio.shield(task), STOP_SECONDS)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except Exception:  # it ended with an error: already logged
            pass


def _text(content: list[Any], structured: Any) -> str:
    """The content of a tool's answer as text for the model."""
    parts: list[str] = []
    for item in content:
        kind = getattr(item, "type", None)
        if kind == "text":
            parts.append(str(item.text))
        elif kind in ("image", "audio"):
            parts.append(
                f"[{kind}: {getattr(item, 'mime_type', '?')}, {len(item.data)} base64 characters]"
            )
        elif kind == "resource_link":
            parts.append(f"[resource: {item.uri}]")
        elif kind == "resource":
            resource = item.resource
            parts.append(str(getattr(resource, "text", None) or f"[resource: {resource.uri}]"))
        else:
            parts.append(f"[{kind} content]")
    if not parts and structured is not None:
        parts.append(json.dumps(structured, ensure_ascii=False))
    return "\n".join(parts)


class TooLong(httpx2.StreamError):
    """An HTTP MCP server's answer passed the limit: read no further."""


class _CappedBody(httpx2.AsyncByteStream):
    def __init__(self, body: httpx2.AsyncByteStream, limit: int) -> None:
        self.body, self.limit = body, limit

    async def __aiter__(self) -> Any:
        read = 0
        async for chunk in self.body:
            read += len(chunk)
            if read > self.limit:
                raise TooLong(f"the MCP server sent an answer longer than {self.limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self.body.aclose()


class CappedTransport(httpx2.AsyncBaseTransport):
    """HTTP to an MCP server, where an answer that is not an event stream (a JSON answer,
    read whole) fails once it passes ``limit`` bytes, as a stdio server's line does: a hostile
    server cannot make the daemon hold an answer of any size."""

    def __init__(self, limit: int) -> None:
        self.inner, self.limit = httpx2.AsyncHTTPTransport(), limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
            return response
        body = response.stream
        assert isinstance(body, httpx2.AsyncByteStream)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=_CappedBody(body, self.limit),
            extensions=response.extensions,
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


def _cause(exc: BaseException) -> str:
    """The innermost reason of an exception (a task group's first)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return str(exc) or type(exc).__name__
