"""An ACP client as a window of the shared daemon: ``trellisd acp`` forwards the client's lines
over the daemon's socket, and the daemon serves them here, with the same services as every
other window. The window follows the sessions it creates, loads, resumes, forks or prompts, so
their turns reach it whoever started them (as ``session/update``s from a notifier of its own),
and their approvals are asked here as ``session/request_permission`` as well as in the native
windows: the first answer decides, and the other questions are withdrawn.

The daemon's lines go back to the forwarder as records (``rendezvous.record``), and the end of
the window as the end record.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from typing import Any, TypeVar

from ..config_file import Settings
from ..hub import Hub
from ..records import TurnRef
from ..rendezvous import end_record, record
from ..services import Services
from ..services.settings import WindowSettings, use_window
from ..vocabulary import Decision
from .agent import TrellisAgent
from .files import ClientFiles
from .notifier import AcpNotifier
from .rpc import LINE_LIMIT_BYTES, Connection
from .terminals import ClientTerminals

T = TypeVar("T")
log = logging.getLogger(__name__)

UPDATES_WAITING = 4096
"""The ``session/update``s that may wait for a client that stopped reading before it is
dropped (as ``TRELLISD_WINDOW_QUEUE`` bounds what waits for a native window)."""


class _Records:
    """The connection's write side: each line as one record to the forwarder."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.stream = writer

    def write(self, data: bytes) -> None:
        self.stream.write(record(data))

    async def drain(self) -> None:
        await self.stream.drain()


class AcpWindow:
    """One ACP client of the shared daemon."""

    def __init__(self, hub: Hub, services: Services, settings: Settings, peer: str) -> None:
        self.hub, self.settings, self.peer = hub, settings, peer
        self.pid: int | None = None  # the forwarder's
        self._notifier = AcpNotifier(
            lambda: services.changes, services.settings.daemon.approval_timeout
        )
        self.agent = TrellisAgent(services, self._notifier, shared=True)
        self.agent.on_follow = lambda session_id: hub.follow(self, session_id)
        self.agent.on_leave = lambda session_id: hub.unfollow(self, session_id)
        self._stream: asyncio.StreamWriter | None = None

    @property
    def notifier(self) -> AcpNotifier:
        return self._notifier

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision:
        """As ``session/request_permission``; withdrawn with ``$/cancel_request``."""
        return await self._notifier.ask_approval(turn, request)

    async def serve(self, conn: socket.socket, initial: bytes) -> int:
        """Serve the client until it closes its end; the window's exit status (0)."""
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=LINE_LIMIT_BYTES)
        if initial:
            reader.feed_data(initial)  # what came after the hello, before any read
        conn.setblocking(False)
        transport, protocol = await loop.create_unix_connection(
            lambda: asyncio.StreamReaderProtocol(reader), sock=conn
        )
        self._stream = asyncio.StreamWriter(transport, protocol, reader, loop)
        use_window(WindowSettings(self.settings.provider, self.settings))
        rpc = Connection(reader, _Records(self._stream), self.agent.dispatch)
        self.agent.connect(rpc, UPDATES_WAITING, self._drop)
        self.hub.attach(self)
        try:
            await rpc.serve()
        finally:
            self.hub.detach(self)
            if self._notifier.outbox is not None:
                await self._notifier.outbox.close()
        return 0

    def _drop(self) -> None:
        """A client that stopped reading: given up on, so it slows no one else."""
        log.warning(
            "dropped %s: it stopped reading and %d updates waited for it",
            self.peer,
            UPDATES_WAITING,
        )
        if self._stream is not None:
            self._stream.transport.abort()

    async def close(self, final: bytes = b"") -> None:
        """Write ``final`` (the end record) after what is queued, and close the socket."""
        stream, self._stream = self._stream, None
        if stream is None:
            return
        with contextlib.suppress(OSError, ConnectionError):
            if final:
                stream.write(final)
            await asyncio.wait_for(stream.drain(), 5.0)
        with contextlib.suppress(OSError, TimeoutError):
            stream.close()


def files_for(hub: Hub, ref: TurnRef) -> ClientFiles | None:
    """The client's files for a turn an ACP window's prompt runs; None for any other turn."""
    return _first(hub, lambda agent: agent.files_for(ref))


def terminals_for(hub: Hub, session_id: str) -> ClientTerminals | None:
    """The client's terminals for a session an ACP window's prompt runs (the process its
    turn starts runs there); None for any other session."""
    return _first(hub, lambda agent: agent.terminals_for(session_id))


def _first(hub: Hub, ask: Callable[[TrellisAgent], T | None]) -> T | None:
    """The first answer of an ACP window's agent that is not None."""
    for window in hub.windows:
        found = ask(window.agent) if isinstance(window, AcpWindow) else None
        if found is not None:
            return found
    return None


async def serve_window(
    hub: Hub, services: Services, settings: Settings, conn: socket.socket, initial: bytes, pid: int
) -> None:
    """Serve one ACP client of the shared daemon until it ends, then end its forwarder."""
    window = AcpWindow(hub, services, settings, f"ACP window pid {pid}")
    window.pid = pid
    log.info("%s attached", window.peer)
    code = await window.serve(conn, initial)
    log.info("%s detached (exit %d)", window.peer, code)
    await window.close(end_record(code, None))
