"""``trellisd acp``: trellisd as an Agent Client Protocol (v1) agent, newline-delimited
JSON-RPC on stdin/stdout, for Zed, the JetBrains IDEs, codecompanion.nvim and every other ACP
client. It serves the store's sessions with the same services and agent loop as the native
protocol, so a session started over one protocol continues over the other.

    agent     the ACP methods over the services (the ``Agent`` role of the ACP SDK)
    notifier  the services' ``Notifier``: a turn's tokens, steps and approvals as ACP updates
    updates   trellisd's records as ACP ``session/update``s (replay, tool calls, usage)

The ACP Python SDK (``agent-client-protocol``) runs the connection: its pydantic types are
generated from the ACP schema, and its router serves ACP's stable methods and ``session/fork``.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

from ..config import ProviderSettings
from ..config_file import Settings
from .hello import answer_early

log = logging.getLogger(__name__)

LINE_LIMIT_BYTES = 50 * 1024 * 1024  # one message, as the SDK allows


async def serve(db_path: str | Path, settings: Settings | ProviderSettings) -> None:
    """Serve ACP on stdin/stdout until the client closes stdin. A first ``initialize`` is
    answered before the SDK and the store are loaded (``hello``)."""
    reader, writer = await _stdio()
    first = await reader.readline()
    early = answer_early(first)
    if early is not None:
        writer.write(early[0])
        await writer.drain()
    else:
        reader = _put_back(first, reader)

    from acp import run_agent

    from .. import services
    from .agent import TrellisAgent
    from .notifier import AcpNotifier

    holder: list[services.Services] = []
    notifier = AcpNotifier(lambda: holder[0].changes)
    app = await services.start(db_path, settings, notifier)
    holder.append(app)
    agent = TrellisAgent(app, notifier)
    if early is not None:
        agent.fs = early[1]
    try:
        await run_agent(agent, writer, reader, use_unstable_protocol=True)
    finally:
        if notifier.outbox is not None:
            await notifier.outbox.close()
        await app.close()


async def _stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """stdin and stdout as asyncio streams, as the SDK makes them."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LINE_LIMIT_BYTES)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(_Drained, sys.stdout)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


class _Drained(asyncio.streams.FlowControlMixin):
    """The write side's flow control, which ``StreamWriter.drain`` waits on."""


def _put_back(line: bytes, rest: asyncio.StreamReader) -> asyncio.StreamReader:
    """A reader that gives ``line`` and then what ``rest`` gives."""
    reader = asyncio.StreamReader(limit=LINE_LIMIT_BYTES)
    reader.feed_data(line)

    async def pump() -> None:
        while chunk := await rest.read(65536):
            reader.feed_data(chunk)
        reader.feed_eof()

    _pumps.add(task := asyncio.get_running_loop().create_task(pump()))
    task.add_done_callback(_pumps.discard)
    return reader


_pumps: set[asyncio.Task[None]] = set()


def serve_stdio(db_path: str | Path, settings: Settings | ProviderSettings) -> None:
    asyncio.run(serve(db_path, settings))
