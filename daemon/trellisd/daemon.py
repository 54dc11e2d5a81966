"""The daemon's services: sessions, turns and runs, with no knowledge of the wire.

Handlers call one method here each. The store is touched from one worker thread, so a
slow disk or a second process holding the write lock never stalls the event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from .agent.context import conversation, replay
from .agent.loop import CANCELLED, ERROR, FINISHED, TurnEnd, TurnPlan, run_turn
from .agent.steering import Steer, SteerInbox
from .config import ProviderSettings
from .errors import Conflict, InvalidParams, NotFound, NotRunning, TrellisError
from .policy import DEFAULT_POLICY, Policy, load_policy
from .providers import make_provider
from .providers.base import Provider, ProviderError
from .store import Store
from .store.leases import HEARTBEAT_SECONDS
from .store.records import Event, RunSummary, Session, SessionSummary, Step, Tokens, ToolCall, Turn
from .tools import ToolContext, default_tools
from .tools.base import Action
from .tools.verify import run_check

log = logging.getLogger(__name__)
T = TypeVar("T")

SESSION_SETTINGS = (
    "name",
    "model",
    "baseUrl",
    "temperature",
    "maxTokens",
    "maxRetries",
    "retryBudget",
    "readTimeout",
)
CANCEL_WAIT_SECONDS = 2.0
CHECK_TIMEOUT_SECONDS = 600.0


class Notifier(Protocol):
    """How the daemon tells the editor what happens while a turn runs."""

    def token(self, turn: TurnRef, step: int, text: str) -> None: ...

    def step(self, turn: TurnRef, step: Step) -> None: ...

    def steered(self, turn: TurnRef, step: int | None, steer: Steer, delivered: bool) -> None: ...

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> str:
        """Ask the editor (``session/requestApproval``) about ``request`` (tool, arguments,
        summary); its answer: allow, allowAlways or deny, or timeout when it gave none.
        """
        ...


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
    model: str | None = None


@dataclass
class RunningTurn:
    ref: TurnRef
    task: asyncio.Task[Any] | None
    inbox: SteerInbox = field(default_factory=SteerInbox)
    cancelled_by_request: bool = False


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs; a zombie (dead, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc: trust the signal


class Daemon:
    def __init__(self, store: Store, settings: ProviderSettings, notifier: Notifier) -> None:
        self.store = store
        self.settings = settings
        self.notifier = notifier
        self.running: dict[str, RunningTurn] = {}
        self._providers: dict[ProviderSettings, Provider] = {}
        self._db_thread = concurrent.futures.ThreadPoolExecutor(1, "trellisd-store")
        self._heartbeat: asyncio.Task[None] | None = None
        self._policies: dict[str, Policy] = {}

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
        self,
        root: str,
        title: str | None,
        provider: dict[str, Any] | None,
        policy: dict[str, Any] | None = None,
    ) -> Session:
        folder = Path(root).expanduser()
        if not folder.is_absolute():
            raise InvalidParams(f"root must be an absolute path, not {root}", field="root")
        if not folder.is_dir():
            raise NotFound(f"root {root} is not an existing folder", root=root)
        settings = {
            k: v for k, v in (provider or {}).items() if k in SESSION_SETTINGS and v is not None
        }
        self.settings.merged(settings, "provider")  # refuse bad values now, not at the turn
        effective = await asyncio.to_thread(_load_policy, folder.resolve(), policy)
        session = await self.db(
            self.store.sessions.create,
            str(folder.resolve()),
            title or "",
            settings,
            self.store.leases.daemon_id,
            policy,
        )
        self._policies[session.session_id] = effective
        return session

    async def session_policy(self, session: Session) -> Policy:
        """The session's effective policy, with the grants given while this daemon runs."""
        policy = self._policies.get(session.session_id)
        if policy is None:
            policy = await asyncio.to_thread(_load_policy, Path(session.root), session.policy)
            self._policies[session.session_id] = policy
        return policy

    async def policy(self, session_id: str) -> Policy:
        return await self.session_policy(await self.db(self.store.sessions.get, session_id))

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
        return await self.db(self.store.sessions.page, root, limit, cursor)

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

    async def steer(
        self, session_id: str, text: str, client_msg_id: str | None
    ) -> tuple[TurnRef, bool]:
        """Queue a steer for the running turn; False with it when ``client_msg_id`` was
        already queued in this turn (it is not delivered twice)."""
        running = self.running.get(session_id)
        if running is None:
            await self.db(self.store.leases.claim, session_id)  # names another writer, if any
            raise NotRunning(
                f"session {session_id} has no running turn to steer; send a turn instead",
                sessionId=session_id,
            )
        return running.ref, running.inbox.put(Steer(text, client_msg_id))

    async def cancel(self, session_id: str) -> TurnRef | None:
        """Stop the session's running turn; None when nothing was running."""
        running = self.running.get(session_id)
        if running is None:
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
        turn_id, run_id, _ = await self.db(
            self.store.runs.begin, session_id, prompt, settings.effective_model
        )
        ref = TurnRef(session_id, turn_id, run_id)
        messages = conversation(session.root, path, prompt)
        return await self._run(session, ref, settings, messages, prompt, overrides, 1)

    async def resume(self, session_id: str, turn_id: str) -> TurnResult:
        """Continue an interrupted turn, or one that ended in error, under the same run, from
        its last committed step."""
        self._refuse_if_running(session_id, "resume a turn")
        session = await self.db(self.store.sessions.get, session_id)
        turn = await self.db(self.store.sessions.turn, session_id, turn_id)
        if turn.outcome not in ("interrupted", "error"):
            raise Conflict(
                f"turn {turn_id} is {turn.outcome}, not interrupted or error; only a"
                " turn that stopped before it ended can be resumed",
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
            try:
                await self.db(
                    self.store.runs.add_event, ref.run_id, "steer-returned", None, steer.detail()
                )
            except TrellisError as exc:
                log.warning("could not record a returned steer: %s", exc.message)
            self.notifier.steered(ref, None, steer, False)
        await self.db(self.store.runs.finish, ref.run_id, end.outcome, end.error)

    async def _result(self, ref: TurnRef, end: TurnEnd) -> TurnResult:
        turn = await self.db(self.store.sessions.turn, ref.session_id, ref.turn_id)
        summary = await self.db(self.store.runs.summary, ref.run_id)
        return TurnResult(
            ref.turn_id,
            ref.run_id,
            end.outcome,
            turn.reply,
            turn.tokens,
            summary.steps,
            end.error,
            turn.model,
        )

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
        policy = await self.session_policy(session)
        verify = overrides.get("verify")
        plan = TurnPlan(
            messages=messages,
            provider=provider,
            tools=default_tools(),
            context=ToolContext(Path(session.root), may_read=policy.may_read),
            gate=_Gate(self, running.ref),
            check=None if verify is None else _Check(self, running.ref, Path(session.root), verify),
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            max_steps=overrides.get("maxSteps"),
            inbox=running.inbox,
            first_step=first_step,
        )
        return await run_turn(
            plan, _Recorder(self, running.ref.run_id), _Sink(self.notifier, running.ref), prompt
        )


def _load_policy(root: Path, requested: dict[str, Any] | None) -> Policy:
    """The daemon's default layer applies unless the session names its own layers."""
    if requested and requested.get("layers"):
        return load_policy(root, requested, default=Policy(approval=DEFAULT_POLICY.approval))
    return load_policy(root, requested)


class _Gate:
    """The session's policy in front of every tool call; asks the editor when it says ask."""

    def __init__(self, daemon: Daemon, ref: TurnRef) -> None:
        self.daemon, self.ref = daemon, ref

    async def _event(self, kind: str, step: int, detail: dict[str, Any]) -> None:
        await self.daemon.db(self.daemon.store.runs.add_event, self.ref.run_id, kind, step, detail)

    async def admit(self, call: ToolCall, action: Action, step: int) -> str | None:
        session_id = self.ref.session_id
        verdict = self.daemon._policies[session_id].check(action)
        described = {"kind": action.kind, "target": action.target}
        if verdict.outcome == "refuse":
            await self._event(
                "refusal",
                step,
                {
                    "tool": call.name,
                    "action": described,
                    "layer": verdict.layer,
                    "rule": verdict.rule,
                    "reason": verdict.reason,
                },
            )
            return f"refused by the session's policy: {verdict.reason}"
        if verdict.outcome == "ask":
            summary = f"{call.name} wants to {action.kind} {action.target}"
            decision = await self.daemon.notifier.ask_approval(
                self.ref, {"tool": call.name, "arguments": call.arguments, "summary": summary}
            )
            await self._event(
                "approval", step, {"tool": call.name, "action": described, "decision": decision}
            )
            if decision == "allowAlways":
                policy = self.daemon._policies[session_id]
                self.daemon._policies[session_id] = policy.with_grant(action)
            elif decision != "allow":
                await self._event(
                    "refusal",
                    step,
                    {
                        "tool": call.name,
                        "action": described,
                        "layer": "approval",
                        "rule": decision,
                        "reason": "the user did not approve it",
                    },
                )
                return (
                    f"refused: the user did not approve this {action.kind} ({decision});"
                    " do not try it again this way"
                )
        return None


class _Check:
    """A bounded turn's check, run in the session root."""

    def __init__(self, daemon: Daemon, ref: TurnRef, root: Path, verify: dict[str, Any]) -> None:
        self.daemon, self.ref, self.root = daemon, ref, root
        self.argv: list[str] = verify["argv"]
        self.expect_exit: int = verify.get("expectExit", 0)

    async def run(self, step: int) -> str | None:
        result = await run_check(self.argv, self.expect_exit, self.root, CHECK_TIMEOUT_SECONDS)
        await self.daemon.db(
            self.daemon.store.runs.add_event,
            self.ref.run_id,
            "check",
            step,
            {
                "argv": self.argv,
                "expectExit": self.expect_exit,
                "exitCode": result.exit_code,
                "passed": result.passed,
                "output": result.output[-4000:],
            },
        )
        if result.passed:
            return None
        return (
            f"The check {shlex.join(self.argv)} failed (exit {result.exit_code}, expected"
            f" {self.expect_exit}):\n{result.output[-4000:]}\nFix the problem and try again."
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
