"""``session/processes`` and ``session/process/stop``: the processes a session's turns
started (``start_process``), as the editor lists and stops them."""

from __future__ import annotations

from typing import Any

from .. import wire
from ..services import Services
from .base import Method


async def session_processes(app: Services, p: wire.SessionRef) -> Any:
    await app.store.sessions.get(p.session_id)  # no such session: not found, not an empty list
    return wire.processes(p.session_id, app.processes.list(p.session_id))


async def session_process_stop(app: Services, p: wire.SessionProcessStop) -> Any:
    return wire.process(await app.processes.stop(p.session_id, p.process_id))


METHODS: tuple[Method[Any], ...] = (
    Method("session/processes", wire.SessionRef, session_processes),
    Method("session/process/stop", wire.SessionProcessStop, session_process_stop),
)
