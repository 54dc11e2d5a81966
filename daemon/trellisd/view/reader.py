"""What the view reads of the store, through the daemon's services: the sessions (listed or
found), a session's turns, a turn's steps, events and change set, and the log's verdict.
Nothing here writes: the view takes no lease and runs no turn."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from ..config_file import Settings
from ..records import Event, FileChange, Session, SessionSummary, Step, Turn
from ..store.chain import LogVerdict

if TYPE_CHECKING:
    from ..services import Services

LIST_LIMIT = 100


@dataclass(frozen=True)
class TurnDetail:
    """A turn's heavy parts, drawn when it is opened: its steps, events and change set."""

    turn: Turn
    steps: list[Step]
    events: list[Event]
    changes: list[FileChange]


class Reader:
    """The view's one way into the store: the services of a daemon (its own, or one opened
    here over the store, ``opened``)."""

    def __init__(self, app: Services) -> None:
        self.app = app

    async def sessions(
        self, query: str | None, cursor: str | None
    ) -> tuple[list[SessionSummary], str | None]:
        """A page of sessions, most recently used first, or those ``query`` finds."""
        return await self.app.sessions.page(None, LIST_LIMIT, cursor, query or None)

    async def session(self, session_id: str) -> Session:
        return await self.app.sessions.get(session_id)

    async def turns(self, session_id: str) -> list[Turn]:
        """Every turn of the session's tree, oldest first."""
        return await self.app.sessions.turns(session_id)

    async def detail(self, session_id: str, turn_id: str) -> TurnDetail:
        """A turn of the session with its steps, events and change set (``NotFound`` for a
        turn of another session)."""
        turn = await self.app.sessions.turn(session_id, turn_id)
        return await self.detail_of(turn)

    async def detail_of(self, turn: Turn) -> TurnDetail:
        steps = await self.app.runs.steps(turn.run_id)
        events = await self.app.runs.events(turn.run_id)
        changes = await self.app.changes.turn(turn.turn_id)
        return TurnDetail(turn, steps, events, changes)

    async def verify(self, session_id: str) -> LogVerdict:
        return await self.app.sessions.verify(session_id)


class _NoWindow:
    """The notifier of services that only read: no turn runs, so nothing is ever told."""

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"the view runs no turn and tells no window ({name})")


@contextlib.asynccontextmanager
async def opened(db: Path, settings: Settings) -> AsyncIterator[Reader]:
    """A reader over the store at ``db``, opened here for ``trellisd view`` and ``report``
    (no daemon needed; a running one goes on). The services are built but not started: no
    lease is registered and no turn is marked."""
    from ..processes import pid_alive
    from ..services import Services
    from ..services.seams import Notifier
    from ..store.facade import AsyncStore

    daemon = settings.daemon
    store = await AsyncStore.open(db, pid_alive, daemon.config_folder, daemon.stale_seconds)
    try:
        yield Reader(Services(store, settings, cast(Notifier, _NoWindow())))
    finally:
        await store.close()
