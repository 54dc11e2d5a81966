"""The daemon's services: sessions, turns and runs, with no knowledge of the wire.

Handlers call one method here each. The store is touched from one worker thread, so a
slow disk or a second process holding the write lock never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .agent.context import conversation
from .agent.loop import CANCELLED, ERROR, TurnEnd, TurnPlan, run_turn
from .config import ProviderSettings
from .errors import Conflict, InvalidParams, NotFound
from .providers import make_provider
from .providers.base import Provider, ProviderError
from .store import Store
from .store.records import Event, RunSummary, Session, SessionSummary, Step, Tokens, Turn
from .tools import ToolContext, default_tools

log = logging.getLogger(__name__)
T = TypeVar("T")

SESSION_SETTINGS = ("name", "model", "baseUrl", "temperature", "maxTokens")


class Notifier(Protocol):
    """How the daemon tells the editor what happens while a turn runs."""

    def token(self, session_id: str, turn_id: str, run_id: str, step: int, text: str) -> None: ...

    def step(self, session_id: str, turn_id: str, run_id: str, step: Step) -> None: ...


@dataclass(frozen=True)
class TurnResult:
    turn_id: str
    run_id: str
    outcome: str
    reply: str
    tokens: Tokens
    steps: int
    error: str | None


@dataclass
class RunningTurn:
    session_id: str
    turn_id: str
    run_id: str
    task: asyncio.Task[Any] | None = None


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Daemon:
    def __init__(self, store: Store, settings: ProviderSettings, notifier: Notifier) -> None:
        self.store = store
        self.settings = settings
        self.notifier = notifier
        self.running: dict[str, RunningTurn] = {}
        self._providers: dict[ProviderSettings, Provider] = {}
        self._db_thread = concurrent.futures.ThreadPoolExecutor(1, "trellisd-store")

    async def db(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._db_thread, fn, *args)

    async def start(self) -> None:
        gone = await self.db(self.store.runs.mark_interrupted, pid_alive)
        if gone:
            log.info("marked %d turn(s) interrupted: their daemon stopped mid-turn", len(gone))

    def close(self) -> None:
        self._db_thread.shutdown(wait=True)
        self.store.close()

    def configure(self, overrides: dict[str, Any]) -> None:
        """Lay the editor's ``initializationOptions`` over the environment's settings."""
        self.settings = self.settings.merged(overrides, "initializationOptions")

    # sessions

    async def open_session(
        self, root: str, title: str | None, provider: dict[str, Any] | None
    ) -> Session:
        folder = Path(root).expanduser()
        if not folder.is_absolute():
            raise InvalidParams(f"root must be an absolute path, not {root}", field="root")
        if not folder.is_dir():
            raise NotFound(f"root {root} is not an existing folder", root=root)
        settings = {k: v for k, v in (provider or {}).items() if k in SESSION_SETTINGS}
        self.settings.merged(settings, "provider")  # refuse bad values now, not at the turn
        return await self.db(
            self.store.sessions.create, str(folder.resolve()), title or "", settings
        )

    async def reopen(self, session_id: str) -> tuple[Session, list[Turn]]:
        session = await self.db(self.store.sessions.touch, session_id)
        return session, await self.db(self.store.sessions.history, session_id)

    async def list_sessions(
        self, root: str | None, limit: int, cursor: str | None
    ) -> tuple[list[SessionSummary], str | None]:
        if root is not None:
            root = str(Path(root).expanduser().resolve())
        return await self.db(self.store.sessions.list, root, limit, cursor)

    async def history(self, session_id: str) -> list[Turn]:
        return await self.db(self.store.sessions.history, session_id)

    async def turns(self, session_id: str) -> list[Turn]:
        return await self.db(self.store.sessions.turns, session_id)

    async def branch(self, session_id: str, turn_id: str | None) -> Session:
        self._refuse_if_running(session_id, "branch")
        return await self.db(self.store.sessions.branch, session_id, turn_id)

    # runs

    async def run_summary(self, run_id: str) -> RunSummary:
        return await self.db(self.store.runs.summary, run_id)

    async def run_steps(self, run_id: str) -> list[Step]:
        return await self.db(self.store.runs.steps, run_id)

    async def run_events(self, run_id: str) -> list[Event]:
        return await self.db(self.store.runs.events, run_id)

    # turns

    def _refuse_if_running(self, session_id: str, what: str) -> None:
        running = self.running.get(session_id)
        if running is not None:
            raise Conflict(
                f"session {session_id} has a running turn {running.turn_id}; wait for"
                f" it to end or cancel it before you {what}",
                sessionId=session_id,
                turnId=running.turn_id,
            )

    def _provider(self, settings: ProviderSettings) -> Provider:
        provider = self._providers.get(settings)
        if provider is None:
            provider = self._providers[settings] = make_provider(settings)
        return provider

    async def turn(self, session_id: str, prompt: str, overrides: dict[str, Any]) -> TurnResult:
        self._refuse_if_running(session_id, "start another")
        session = await self.db(self.store.sessions.get, session_id)
        settings = self.settings.merged(session.settings, "provider").merged(overrides, "turn")
        path = await self.db(self.store.sessions.history, session_id)
        self._refuse_if_running(session_id, "start another")
        turn_id, run_id, _ = await self.db(self.store.runs.begin, session_id, prompt)
        running = self.running[session_id] = RunningTurn(
            session_id, turn_id, run_id, asyncio.current_task()
        )
        try:
            await self._record_settings(run_id, settings)
            end = await self._drive(session, running, settings, path, prompt, overrides)
        except asyncio.CancelledError:
            await self.db(self.store.runs.finish, run_id, CANCELLED, None)
            raise
        finally:
            self.running.pop(session_id, None)
        await self.db(self.store.runs.finish, run_id, end.outcome, end.error)
        turn = await self.db(self.store.sessions.turn, session_id, turn_id)
        return TurnResult(
            turn_id, run_id, end.outcome, turn.reply, turn.tokens, len(end.steps), end.error
        )

    async def _record_settings(self, run_id: str, settings: ProviderSettings) -> None:
        await self.db(self.store.runs.add_event, run_id, "model", None, settings.describe())

    async def _drive(
        self,
        session: Session,
        running: RunningTurn,
        settings: ProviderSettings,
        path: list[Turn],
        prompt: str,
        overrides: dict[str, Any],
    ) -> TurnEnd:
        try:
            provider = self._provider(settings)
        except ProviderError as exc:
            return TurnEnd(ERROR, str(exc))
        plan = TurnPlan(
            messages=conversation(session.root, path, prompt),
            provider=provider,
            tools=default_tools(),
            context=ToolContext(Path(session.root)),
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            max_steps=overrides.get("maxSteps"),
        )
        return await run_turn(
            plan, _Recorder(self, running.run_id), _Sink(self.notifier, running), prompt
        )


class _Recorder:
    def __init__(self, daemon: Daemon, run_id: str) -> None:
        self.daemon, self.run_id = daemon, run_id

    async def add_step(self, step: Step) -> None:
        await self.daemon.db(self.daemon.store.runs.add_step, self.run_id, step)

    async def add_event(self, kind: str, step: int | None, detail: dict[str, Any]) -> None:
        await self.daemon.db(self.daemon.store.runs.add_event, self.run_id, kind, step, detail)


class _Sink:
    def __init__(self, notifier: Notifier, running: RunningTurn) -> None:
        self.notifier, self.running = notifier, running

    def token(self, step: int, text: str) -> None:
        r = self.running
        self.notifier.token(r.session_id, r.turn_id, r.run_id, step, text)

    def step(self, step: Step) -> None:
        r = self.running
        self.notifier.step(r.session_id, r.turn_id, r.run_id, step)


__all__ = ["Daemon", "Notifier", "TurnResult"]
