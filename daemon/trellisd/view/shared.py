"""``session/view``: the daemon's one view server, started in its event loop on the first
call and reused after, and a fresh one-time URL to a session's page."""

from __future__ import annotations

import asyncio
import weakref
from typing import TYPE_CHECKING

from .reader import Reader
from .server import ViewServer

if TYPE_CHECKING:
    from ..services import Services

_servers: weakref.WeakKeyDictionary[Services, asyncio.Task[ViewServer]] = (
    weakref.WeakKeyDictionary()
)


async def _start(app: Services) -> ViewServer:
    server = ViewServer(Reader(app))
    await server.start()
    app.closing.append(lambda: close(app))
    return server


async def server_of(app: Services) -> ViewServer:
    """The daemon's view server, started on first use (calls meanwhile wait for it)."""
    starting = _servers.get(app)
    if starting is None:
        starting = _servers[app] = asyncio.ensure_future(_start(app))
    try:
        return await asyncio.shield(starting)
    except BaseException:
        if starting.done() and _servers.get(app) is starting:
            del _servers[app]  # a start that failed is tried again next time
        raise


async def session_url(app: Services, session_id: str) -> str:
    """The URL of the session's page with a fresh one-time token (``NotFound`` for a session
    the store does not have)."""
    session = await app.sessions.get(session_id)
    server = await server_of(app)
    return server.url(f"/s/{session.session_id}")


async def close(app: Services) -> None:
    """Stop the daemon's view server, if it started one."""
    starting = _servers.pop(app, None)
    if starting is None:
        return
    if not starting.done():
        starting.cancel()
    elif not starting.cancelled() and starting.exception() is None:
        await starting.result().close()
