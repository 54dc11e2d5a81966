"""``trellisd acp``: trellisd as an Agent Client Protocol (v1) agent, newline-delimited
JSON-RPC on stdin/stdout, for Zed, the JetBrains IDEs, codecompanion.nvim and every other ACP
client. It serves the store's sessions with the same services and agent loop as the native
protocol, so a session started over one protocol continues over the other.

    rpc       the connection: JSON-RPC 2.0, one message a line, requests both ways
    wire      ACP's messages as typed values, structured by the one converter (``convert``)
    agent     the method table, and the ACP methods over the services, each on its typed params
    notifier  the services' ``Notifier``: a turn's tokens, steps and approvals as ACP updates
    updates   trellisd's records as ACP ``session/update``s (replay, tool calls, usage)
    files     the file tools through the client (``fs/read_text_file``, ``fs/write_text_file``)
    hello     the answer to ``initialize``, sent before the store is loaded

The ACP v1 JSON schema is the reference: one golden file per message (``tests/golden/acp/``)
round-trips through its type and is checked against it, and so is every message sent in the
tests. Nothing here loads the ACP SDK or pydantic, so the agent starts about as fast as the
native server.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from ..config import ProviderSettings
from ..config_file import Settings
from .hello import answer_early
from .rpc import LINE_LIMIT_BYTES, Connection

log = logging.getLogger(__name__)


async def serve(db_path: str | Path, settings: Settings | ProviderSettings) -> None:
    """Serve ACP on stdin/stdout until the client closes stdin. A first ``initialize`` is
    answered before the services and the store are loaded (``hello``)."""
    reader, writer = await _stdio()
    try:
        first = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        first = exc.partial
    except asyncio.LimitOverrunError:
        first = b""  # the connection reads it, and drops it as too long
    early = answer_early(first)
    if early is not None:
        writer.write(early[0])
        await writer.drain()
        first = b""

    from .. import services
    from ..services.settings import WindowSettings, use_window
    from .agent import TrellisAgent
    from .notifier import AcpNotifier

    if isinstance(settings, ProviderSettings):
        settings = Settings(settings)
    use_window(WindowSettings(settings.provider, settings))  # the editor's, as in a window
    holder: list[services.Services] = []
    notifier = AcpNotifier(lambda: holder[0].changes, settings.daemon.approval_timeout)
    app = await services.start(db_path, settings, notifier)
    holder.append(app)
    agent = TrellisAgent(app, notifier)
    if early is not None:
        agent.offered(early[1])
    conn = Connection(reader, writer, agent.dispatch)
    agent.connect(conn)
    try:
        await conn.serve(first)
    finally:
        if notifier.outbox is not None:
            await notifier.outbox.close()
        await app.close()


async def _stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """stdin and stdout as asyncio streams."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(_Drained, sys.stdout)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


class _Drained(asyncio.streams.FlowControlMixin):
    """The write side's flow control, which ``StreamWriter.drain`` waits on."""


def serve_stdio(db_path: str | Path, settings: Settings | ProviderSettings) -> None:
    asyncio.run(serve(db_path, settings))
