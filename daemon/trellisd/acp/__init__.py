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
from pathlib import Path

from ..config import ProviderSettings
from ..config_file import Settings

log = logging.getLogger(__name__)


async def serve(db_path: str | Path, settings: Settings | ProviderSettings) -> None:
    """Serve ACP on stdin/stdout until the client closes stdin."""
    from acp import run_agent

    from .. import services
    from .agent import TrellisAgent
    from .notifier import AcpNotifier

    holder: list[services.Services] = []
    notifier = AcpNotifier(lambda: holder[0].changes)
    app = await services.start(db_path, settings, notifier)
    holder.append(app)
    try:
        await run_agent(TrellisAgent(app, notifier), use_unstable_protocol=True)
    finally:
        if notifier.outbox is not None:
            await notifier.outbox.close()
        await app.close()


def serve_stdio(db_path: str | Path, settings: Settings | ProviderSettings) -> None:
    asyncio.run(serve(db_path, settings))
