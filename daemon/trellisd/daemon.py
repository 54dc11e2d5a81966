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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .agent.context import conversation, replay
from .agent.loop import CANCELLED, ERROR, FINISHED, TurnEnd, TurnPlan, run_turn
from .agent.steering import Steer, SteerInbox
from .config import ProviderSettings
from .errors import Conflict, InvalidParams, NotFound, NotRunning, TrellisError
from .providers import make_provider
from .providers.base import Provider, ProviderError
from .store import Store
from .store.leases import HEARTBEAT_SECONDS
from .store.records import Event, RunSummary, Session, SessionSummary, Step, Tokens, Turn
from .tools import ToolContext, default_tools

log = logging.getLogger(__name__)
T = TypeVar("T")

SESSION_SETTINGS = ("name", "model", "baseUrl", "temperature", "maxTokens")
CANCEL_WAIT_SECONDS = 2.0


class Notifier(Protocol):
    """How the daemon tells the editor what happens while a turn runs."""

    def token(self, turn: TurnRef, step: int, text: str) -> None: ...

    def step(self, turn: TurnRef, step: Step) -> None: ...

    def steered(self, turn: TurnRef, step: int | None, steer: Steer, delivered: bool) -> None: ...


@dataclass(frozen=True)
class TurnRef:
    session_id: str
    turn_id: str
    run_id: str


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
    ref: TurnRef
    task: asyncio.Task[Any] | None
    inbox: SteerInbox = field(default_factory=SteerInbox)
    cancelled_by_request: bool = False


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
        self._heartbeat: asyncio.Task[None] | None = None

    async def db(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._db_thread, fn, *args)

    async def start(self) -> None:
        await self.db(self.store.leases.register)
        await self._mark_interrupted()
        self._heartbeat = asyncio.ensure_future(self._beat())

    async def _mark_interrupted(self) -> None:
        stopped = await self.db(self.store.runs.mark_interrupted)
        if stopped:
            log.info("marked %d turn(s) interrupted: their daemon stopped mid-turn", len(stopped))

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            try:
                await self.db(self.store.leases.heartbeat)
                await self._mark_interrupted()
            except TrellisError as exc:
                log.warning("heartbeat failed: %s", exc.message)

    def close(self) -> None:
        """A clean exit: release the leases and close the store (from a worker thread)."""
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        try:
            self._db_thread.submit(self.store.leases.unregister).result()
        except TrellisError as exc:
            log.warning("could not release the leases: %s", exc.message)
        self._db_thread.shutdown(wait=True)
        self.store.close()

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
            self.store.sessions.create,
            str(folder.resolve()),
            title or "",
            settings,
            self.store.leases.daemon_id,
        )

    async def reopen(self, session_id: str) -> tuple[Session, list[Turn]]:
        session = await self.db(self.store.sessions.touch, session_id)
        await self.db(self.store.leases.try_claim, session_id)
        return session, await self.db(self.store.sessions.history, session_id)

    async def takeover(self, session_id: str) -> Session:
        previous = await self.db(self.store.leases.take, session_id)
        if previous is not None and previous != os.getpid():
            log.info("took session %s over from pid %d", session_id, previous)
        await self._mark_interrupted()
        return await self.db(self.store.sessions.get, session_id)

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
        return await self.db(self.store.sessions.branch, session_id, turn_id, self.store.leases)

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
                f"session {session_id} has a running turn {running.ref.turn_id};"
                f" wait for it to end or cancel it before you {what}",
                sessionId=session_id,
                turnId=running.ref.turn_id,
            )

    def _provider(self, settings: ProviderSettings) -> Provider:
        provider = self._providers.get(settings)
        if provider is None:
            provider = self._providers[settings] = make_provider(settings)
        return provider

    async def steer(self, session_id: str, text: str, client_msg_id: str | None) -> TurnRef:
        running = self.running.get(session_id)
        if running is None:
            await self.db(self.store.sessions.get, session_id)
            await self.db(self.store.leases.claim, session_id)  # names another writer, if any
            raise NotRunning(
                f"session {session_id} has no running turn to steer; send a turn instead",
                sessionId=session_id,
            )
        running.inbox.put(Steer(text, client_msg_id))
        return running.ref

    async def cancel(self, session_id: str) -> TurnRef | None:
        """Stop the session's running turn; None when nothing was running."""
        running = self.running.get(session_id)
        if running is None:
            await self.db(self.store.sessions.get, session_id)
            await self.db(self.store.leases.claim, session_id)  # names another writer, if any
            return None
        if running.task is not None:
            running.cancelled_by_request = True
            running.task.cancel()
            await asyncio.wait([running.task], timeout=CANCEL_WAIT_SECONDS)
        return running.ref

    async def turn(self, session_id: str, prompt: str, overrides: dict[str, Any]) -> TurnResult:
        self._refuse_if_running(session_id, "start another")
        session = await self.db(self.store.sessions.get, session_id)
        settings = self.settings.merged(session.settings, "provider").merged(overrides, "turn")
        path = await self.db(self.store.sessions.history, session_id)
        self._refuse_if_running(session_id, "start another")
        turn_id, run_id, _ = await self.db(self.store.runs.begin, session_id, prompt)
        ref = TurnRef(session_id, turn_id, run_id)
        messages = conversation(session.root, path, prompt)
        return await self._run(session, ref, settings, messages, prompt, overrides, 1)

    async def resume(self, session_id: str, turn_id: str) -> TurnResult:
        """Continue an interrupted turn, under the same run, from its last committed step."""
        self._refuse_if_running(session_id, "resume a turn")
        session = await self.db(self.store.sessions.get, session_id)
        turn = await self.db(self.store.sessions.turn, session_id, turn_id)
        if turn.outcome != "interrupted":
            raise Conflict(
                f"turn {turn_id} is {turn.outcome}, not interrupted; only an"
                " interrupted turn can be resumed",
                turnId=turn_id,
                outcome=turn.outcome,
            )
        path = await self.db(self.store.sessions.history_to, session_id, turn.parent_turn_id)
        steps = await self.db(self.store.runs.steps, turn.run_id)
        self._refuse_if_running(session_id, "resume a turn")
        await self.db(self.store.runs.resume, turn.run_id)
        ref = TurnRef(session_id, turn_id, turn.run_id)
        await self.db(
            self.store.runs.add_event,
            turn.run_id,
            "resumed",
            len(steps) + 1,
            {"fromStep": len(steps) + 1},
        )
        if steps and steps[-1].decision == "reply":
            await self.db(self.store.runs.finish, turn.run_id, FINISHED, None)
            return await self._result(ref, TurnEnd(FINISHED))
        settings = self.settings.merged(session.settings, "provider")
        messages = conversation(session.root, path, turn.prompt) + replay(steps)
        return await self._run(session, ref, settings, messages, turn.prompt, {}, len(steps) + 1)

    async def _run(
        self,
        session: Session,
        ref: TurnRef,
        settings: ProviderSettings,
        messages: list[Any],
        prompt: str,
        overrides: dict[str, Any],
        first_step: int,
    ) -> TurnResult:
        running = self.running[ref.session_id] = RunningTurn(ref, asyncio.current_task())
        end = TurnEnd(ERROR)
        try:
            await self.db(self.store.runs.add_event, ref.run_id, "model", None, settings.describe())
            end = await self._drive(
                session, running, settings, messages, prompt, overrides, first_step
            )
        except asyncio.CancelledError:
            end = TurnEnd(CANCELLED)
            if not running.cancelled_by_request:
                raise
            # session/cancel: the turn's own request answers with the cancelled turn.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        except TrellisError as exc:  # e.g. the session was taken over mid-turn
            end = TurnEnd(ERROR, exc.message)
            raise
        finally:
            self.running.pop(ref.session_id, None)
            await self._end(running, end)
        return await self._result(ref, end)

    async def _end(self, running: RunningTurn, end: TurnEnd) -> None:
        ref = running.ref
        for steer in running.inbox.close():
            detail: dict[str, Any] = {"text": steer.text}
            if steer.client_msg_id is not None:
                detail["clientMsgId"] = steer.client_msg_id
            try:
                await self.db(self.store.runs.add_event, ref.run_id, "steer-returned", None, detail)
            except TrellisError as exc:
                log.warning("could not record a returned steer: %s", exc.message)
            self.notifier.steered(ref, None, steer, False)
        await self.db(self.store.runs.finish, ref.run_id, end.outcome, end.error)

    async def _result(self, ref: TurnRef, end: TurnEnd) -> TurnResult:
        turn = await self.db(self.store.sessions.turn, ref.session_id, ref.turn_id)
        summary = await self.db(self.store.runs.summary, ref.run_id)
        return TurnResult(ref.turn_id, ref.run_id, end.outcome, turn.reply, turn.tokens,
                          summary.steps, end.error)

    async def _drive(
        self,
        session: Session,
        running: RunningTurn,
        settings: ProviderSettings,
        messages: list[Any],
        prompt: str,
        overrides: dict[str, Any],
        first_step: int,
    ) -> TurnEnd:
        try:
            provider = self._provider(settings)
        except ProviderError as exc:
            return TurnEnd(ERROR, str(exc))
        plan = TurnPlan(
            messages=messages,
            provider=provider,
            tools=default_tools(),
            context=ToolContext(Path(session.root)),
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            max_steps=overrides.get("maxSteps"),
            inbox=running.inbox,
            first_step=first_step,
        )
        return await run_turn(
            plan, _Recorder(self, running.ref.run_id), _Sink(self.notifier, running.ref), prompt
        )


class _Recorder:
    def __init__(self, daemon: Daemon, run_id: str) -> None:
        self.daemon, self.run_id = daemon, run_id

    async def add_step(self, step: Step) -> None:
        await self.daemon.db(self.daemon.store.runs.add_step, self.run_id, step)

    async def add_event(self, kind: str, step: int | None, detail: dict[str, Any]) -> None:
        await self.daemon.db(self.daemon.store.runs.add_event, self.run_id, kind, step, detail)


class _Sink:
    def __init__(self, notifier: Notifier, ref: TurnRef) -> None:
        self.notifier, self.ref = notifier, ref

    def token(self, step: int, text: str) -> None:
        self.notifier.token(self.ref, step, text)

    def step(self, step: Step) -> None:
        self.notifier.step(self.ref, step)

    def steered(self, step: int, steer: Steer, delivered: bool) -> None:
        self.notifier.steered(self.ref, step, steer, delivered)
