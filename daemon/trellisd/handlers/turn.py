"""``turn/*`` requests: what one turn changed in the workspace, and undoing it."""

from __future__ import annotations

from typing import Any

from .. import wire
from ..services import Services
from .base import Method


async def turn_changes(app: Services, p: wire.TurnChanges) -> Any:
    return wire.file_changes(await app.changes.turn(p.turn_id))


async def turn_revert(app: Services, p: wire.TurnRevert) -> Any:
    return {"turnId": p.turn_id, **wire.restored(await app.changes.revert(p.turn_id, p.force))}


METHODS: tuple[Method[Any], ...] = (
    Method("turn/changes", wire.TurnChanges, turn_changes),
    Method("turn/revert", wire.TurnRevert, turn_revert),
)
