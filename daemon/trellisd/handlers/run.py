"""``run/*`` requests: what a turn's run did, read back from the store."""

from __future__ import annotations

from typing import Any

from .. import wire
from ..server import TrellisServer, method


def register(server: TrellisServer) -> None:
    @method(server, "run/summary")
    async def run_summary(ls: TrellisServer, p: wire.Params) -> Any:
        return wire.run_summary(await ls.daemon.run_summary(p.string("runId", required=True)))

    @method(server, "run/steps")
    async def run_steps(ls: TrellisServer, p: wire.Params) -> Any:
        steps = await ls.daemon.run_steps(p.string("runId", required=True))
        return {"steps": [wire.step(s) for s in steps]}

    @method(server, "run/events")
    async def run_events(ls: TrellisServer, p: wire.Params) -> Any:
        events = await ls.daemon.run_events(p.string("runId", required=True))
        return {"events": [wire.event(e) for e in events]}
