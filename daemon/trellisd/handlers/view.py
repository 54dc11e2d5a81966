"""``session/view``: a session's page in the browser, served by the daemon's view server."""

from __future__ import annotations

from typing import Any

from .. import wire
from ..services import Services
from ..view.shared import session_url
from .base import Method


async def session_view(app: Services, p: wire.SessionRef) -> Any:
    return {"url": await session_url(app, p.session_id)}


METHODS: tuple[Method[Any], ...] = (Method("session/view", wire.SessionRef, session_view),)
