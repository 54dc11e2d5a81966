"""``run/*`` requests: what a turn's run did, read back from the store."""

from __future__ import annotations

from typing import Any

from .. import wire
from ..services import Services
from .base import Method


async def run_summary(app: Services, p: wire.RunRef) -> Any:
    return wire.run_summary(await app.runs.summary(p.run_id))


async def run_steps(app: Services, p: wire.RunRef) -> Any:
    return {"steps": [wire.step(s) for s in await app.runs.steps(p.run_id)]}


async def run_events(app: Services, p: wire.RunEvents) -> Any:
    if not p.paged:
        return wire.events(await app.runs.events(p.run_id))
    return wire.events_page(*await app.runs.events_page(p.run_id, p.after or 0, p.limit or -1))


METHODS: tuple[Method[Any], ...] = (
    Method("run/summary", wire.RunRef, run_summary),
    Method("run/steps", wire.RunRef, run_steps),
    Method("run/events", wire.RunEvents, run_events),
)
