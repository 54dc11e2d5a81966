"""``session/processes``, ``session/process/output`` and ``session/process/stop``: the
processes a session's turns started (``start_process``), as the editor lists, reads and stops
them."""

from __future__ import annotations

from typing import Any

from .. import wire
from ..services import Services
from ..services.processes import RING_BYTES
from .base import Deferred, Method


async def session_processes(app: Services, p: wire.SessionRef) -> Any:
    await app.store.sessions.get(p.session_id)  # no such session: not found, not an empty list
    return wire.processes(p.session_id, app.processes.list(p.session_id))


async def session_process_output(app: Services, p: wire.SessionProcessOutput) -> Any:
    await app.store.sessions.get(p.session_id)
    process = await app.processes.opened(p.session_id, p.process_id)
    # Read as the answer is written: what was sent before it is in it, what is sent after
    # it follows on from its ``next``.
    return Deferred(lambda: wire.process_output(p.session_id, process.since(p.since, RING_BYTES)))


async def session_process_stop(app: Services, p: wire.SessionProcessStop) -> Any:
    return wire.process(await app.processes.stop(p.session_id, p.process_id))


METHODS: tuple[Method[Any], ...] = (
    Method("session/processes", wire.SessionRef, session_processes),
    Method("session/process/output", wire.SessionProcessOutput, session_process_output),
    Method("session/process/stop", wire.SessionProcessStop, session_process_stop),
)
