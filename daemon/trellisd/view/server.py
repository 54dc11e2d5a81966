"""The view's web server (aiohttp, in the caller's event loop), read-only, on 127.0.0.1.

Who may read: whoever holds a URL this server made (``url``), whose one-time token is traded
at the first request for an HttpOnly, SameSite=Strict cookie and a redirect to the URL
without it. Every other request is refused (403), as is one whose Host is not this server's
(a page of another site pointing its own name at 127.0.0.1). Every answer carries the
page's Content-Security-Policy, ``nosniff`` and ``no-referrer``.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable

from aiohttp import web

from ..errors import NotFound, TrellisError
from . import pages
from .reader import Reader

log = logging.getLogger(__name__)

COOKIE = "trellisd_view"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class ViewServer:
    """One view server: ``start`` it, hand out ``url``s, ``close`` it."""

    def __init__(self, reader: Reader, port: int = 0) -> None:
        self.reader = reader
        self.port = port
        self._tokens: set[str] = set()  # handed out, not yet used
        self._cookies: set[str] = set()  # given for a used token
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application(middlewares=[self._guard])
        app.on_response_prepare.append(_headers)
        app.router.add_get("/", self._sessions)
        app.router.add_get("/s/{session}", self._session)
        app.router.add_get("/s/{session}/t/{turn}", self._turn)
        app.router.add_get("/s/{session}/verify", self._verify)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def cookie(self) -> str:
        """The cookie's name: one per port, as browsers keep cookies by host, not port (two
        view servers on 127.0.0.1 keep a browser let in to both)."""
        return f"{COOKIE}-{self.port}"

    def url(self, path: str = "/") -> str:
        """``path`` on this server with a fresh one-time token."""
        token = secrets.token_urlsafe(32)
        self._tokens.add(token)
        return f"http://127.0.0.1:{self.port}{path}?token={token}"

    @web.middleware
    async def _guard(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.host not in (f"127.0.0.1:{self.port}", f"localhost:{self.port}"):
            return _refused("this server answers only to 127.0.0.1 and localhost")
        token = request.query.get("token")
        if token is not None:
            if token not in self._tokens:
                return _refused("this link was used already or was never given: ask for a new one")
            self._tokens.discard(token)
            cookie = secrets.token_urlsafe(32)
            self._cookies.add(cookie)
            kept = {k: v for k, v in request.query.items() if k != "token"}
            found = web.Response(
                status=303, headers={"Location": str(request.rel_url.with_query(kept))}
            )
            found.set_cookie(self.cookie, cookie, httponly=True, samesite="Strict", path="/")
            return found
        if request.cookies.get(self.cookie) not in self._cookies:
            return _refused("open this view from the link trellisd printed or the editor gave")
        try:
            return await handler(request)
        except NotFound as exc:
            return _page(pages.error_page(404, exc.message), 404)
        except TrellisError as exc:
            log.warning("view: %s", exc.message)
            return _page(pages.error_page(500, exc.message), 500)

    async def _sessions(self, request: web.Request) -> web.StreamResponse:
        query = request.query.get("q") or None
        found, cursor = await self.reader.sessions(query, request.query.get("cursor") or None)
        return _page(pages.sessions_page(found, query, cursor))

    async def _session(self, request: web.Request) -> web.StreamResponse:
        session_id = request.match_info["session"]
        session = await self.reader.session(session_id)
        turns = await self.reader.turns(session_id)
        return _page(pages.session_page(session, turns))

    async def _turn(self, request: web.Request) -> web.StreamResponse:
        detail = await self.reader.detail(request.match_info["session"], request.match_info["turn"])
        return _page(pages.turn_fragment(detail))

    async def _verify(self, request: web.Request) -> web.StreamResponse:
        verdict = await self.reader.verify(request.match_info["session"])
        return _page(pages.verdict_fragment(verdict))


def _page(html: str, status: int = 200) -> web.Response:
    return web.Response(text=html, status=status, content_type="text/html", charset="utf-8")


def _refused(why: str) -> web.Response:
    return web.Response(text=f"403 forbidden: {why}\n", status=403, content_type="text/plain")


async def _headers(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Content-Security-Policy"] = pages.PAGE_POLICY
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
