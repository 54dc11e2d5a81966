"""``session/worktree/*`` requests: a session's own git worktree, merged or discarded."""

from __future__ import annotations

from typing import Any

from .. import wire
from ..services import Services
from .base import Method


async def session_worktree_merge(app: Services, p: wire.SessionRef) -> Any:
    return wire.merged(await app.sessions.worktrees.merge(p.session_id))


async def session_worktree_discard(app: Services, p: wire.SessionRef) -> Any:
    return wire.session(await app.sessions.worktrees.discard(p.session_id))


METHODS: tuple[Method[Any], ...] = (
    Method("session/worktree/merge", wire.SessionRef, session_worktree_merge),
    Method("session/worktree/discard", wire.SessionRef, session_worktree_discard),
)
