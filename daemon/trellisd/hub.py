"""The windows attached to one daemon's services, whatever protocol each speaks: who follows
which session, one notifier that tells every follower of a session's turn, and the approvals a
turn waits on, asked of every follower (the first answer decides, the others are withdrawn).

A window is anything with the ``Window`` seam: the native protocol's (``server``) and ACP's
(``acp.window``). Nothing here knows a wire, a socket or the process: the hub runs as it is
in a test, with windows of the test's own.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from .agent.steering import Steer
from .plans import PlanEntry
from .policy.layers import Approval as Mode
from .records import Step, ToolCall, TurnRef, TurnResult
from .services.queue import Queued
from .services.running import Running, RunningTurn
from .services.seams import Notifier
from .tools.processes import ProcessState
from .vocabulary import CallStatus, Decision
from .wire import call_id

log = logging.getLogger(__name__)


class Window(Protocol):
    """An editor's connection to the daemon: told of the turns of the sessions it follows
    through its notifier, asked their approvals, and closed when the daemon ends."""

    pid: int | None
    """Its forwarder's process, for a window of the shared daemon (``trellisd status``)."""

    @property
    def notifier(self) -> Notifier: ...

    def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Awaitable[Decision]:
        """The window's answer; ``timeout`` when its own wait ran out (the others decide).
        Cancelled when another window answered first or the window left."""
        ...

    async def close(self, final: bytes = b"") -> None:
        """Write what is queued and then ``final``, and stop writing."""
        ...


class Approval:
    """A question a turn waits on, asked of every window that follows its session; the first
    answer decides, and the others' questions are withdrawn."""

    def __init__(self, turn: TurnRef, request: dict[str, Any]) -> None:
        self.turn, self.request = turn, request
        self.decided: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self.asked: dict[Window, asyncio.Future[Decision]] = {}

    def ask(self, window: Window) -> None:
        if self.decided.done() or window in self.asked:
            return
        asked = asyncio.ensure_future(window.ask_approval(self.turn, self.request))
        self.asked[window] = asked
        asked.add_done_callback(functools.partial(self._answered, window))

    def _answered(self, window: Window, asked: asyncio.Future[Decision]) -> None:
        if asked.cancelled() or self.decided.done():
            return
        self.asked.pop(window, None)
        error = asked.exception()
        if error is not None:
            log.warning("a window could not answer an approval: %s", error)
            self.decided.set_result(Decision.DENY)
        elif asked.result() != Decision.TIMEOUT:  # its own wait ran out: the others decide
            self.decided.set_result(asked.result())

    def forget(self, window: Window) -> None:
        """``window`` is gone: its question will not be answered."""
        asked = self.asked.pop(window, None)
        if asked is not None:
            asked.cancel()

    def withdraw(self) -> None:
        """Tell every window still asked that the question no longer needs an answer."""
        for asked in self.asked.values():
            asked.cancel()
        self.asked.clear()


class Hub:
    """The windows, who follows which session, and the approvals waiting for an answer.

    A window follows the sessions it opened, reopened or ran a turn in: it gets their turns'
    notifications and their approval questions. A turn belongs to the daemon, not to the
    window that started it.
    """

    def __init__(self, approval_timeout: float) -> None:
        self.approval_timeout = approval_timeout
        self.windows: set[Window] = set()
        self.following: dict[str, set[Window]] = {}
        self.approvals: dict[str, list[Approval]] = {}
        self.notifier = FanOut(self)
        self.running: Running | None = None
        """The services' running turns, told what streams (a window that reopens a session
        draws it from there); None until the store is open."""
        self.on_change: Callable[[], None] | None = None
        """Called when a window leaves (the shared daemon's idle exit)."""

    def attach(self, window: Window) -> None:
        self.windows.add(window)

    def detach(self, window: Window) -> None:
        """The window is gone: it follows nothing, and its unanswered approval questions
        wait for the other windows. Its turns run on."""
        if window not in self.windows:
            return
        self.windows.discard(window)
        for session_id in [s for s, ws in self.following.items() if window in ws]:
            self.unfollow(window, session_id)
        for approvals in self.approvals.values():
            for approval in approvals:
                approval.forget(window)
        if self.on_change is not None:
            self.on_change()

    def follow(self, window: Window, session_id: str) -> None:
        """``window`` follows ``session_id`` from now on; it is asked the approvals the
        session's turn is waiting on."""
        if window not in self.windows:
            return
        followers = self.following.setdefault(session_id, set())
        if window in followers:
            return
        followers.add(window)
        for approval in self.approvals.get(session_id, ()):
            approval.ask(window)

    def unfollow(self, window: Window, session_id: str) -> None:
        followers = self.following.get(session_id)
        if followers is not None:
            followers.discard(window)
            if not followers:
                del self.following[session_id]

    def forget(self, session_id: str) -> None:
        """The session is gone: no window follows it."""
        self.following.pop(session_id, None)

    def followers(self, session_id: str) -> tuple[Window, ...]:
        return tuple(self.following.get(session_id, ()))

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision:
        """Ask every window following the turn's session, and the windows that follow it
        while the question waits; the first answer, or ``timeout``."""
        approval = Approval(turn, request)
        waiting = self.approvals.setdefault(turn.session_id, [])
        waiting.append(approval)
        for window in self.followers(turn.session_id):
            approval.ask(window)
        try:
            return await asyncio.wait_for(asyncio.shield(approval.decided), self.approval_timeout)
        except TimeoutError:
            return Decision.TIMEOUT
        finally:
            waiting.remove(approval)
            if not waiting:
                self.approvals.pop(turn.session_id, None)
            approval.withdraw()


class FanOut:
    """The services' ``Notifier``: what happens in a session's turn, told to every window
    following the session (and noted in the running turn, for windows that reopen it)."""

    def __init__(self, hub: Hub) -> None:
        self.hub = hub

    def _running(self, session_id: str) -> RunningTurn | None:
        running = self.hub.running
        return None if running is None else running.get(session_id)

    def token(self, turn: TurnRef, step: int, text: str) -> None:
        running = self._running(turn.session_id)
        if running is not None:
            running.streamed(step, text)
        for window in self.hub.followers(turn.session_id):
            window.notifier.token(turn, step, text)

    def thought(self, turn: TurnRef, step: int, text: str) -> None:
        running = self._running(turn.session_id)
        if running is not None:
            running.thought(step, text)
        for window in self.hub.followers(turn.session_id):
            window.notifier.thought(turn, step, text)

    def step(self, turn: TurnRef, step: Step) -> None:
        running = self._running(turn.session_id)
        if running is not None:
            running.committed(step.step)
        for window in self.hub.followers(turn.session_id):
            window.notifier.step(turn, step)

    def tool_call(self, turn: TurnRef, step: int, call: ToolCall, status: CallStatus) -> None:
        running = self._running(turn.session_id)
        if running is not None:
            running.call_changed(step, call_id(step, call), call.name, call.arguments, status.value)
        for window in self.hub.followers(turn.session_id):
            window.notifier.tool_call(turn, step, call, status)

    def child_started(
        self, turn: TurnRef, step: int, call: ToolCall, child_session_id: str
    ) -> None:
        for window in self.hub.followers(turn.session_id):
            window.notifier.child_started(turn, step, call, child_session_id)

    def tool_output(self, turn: TurnRef, step: int, call: ToolCall, text: str) -> None:
        running = self._running(turn.session_id)
        if running is not None:
            running.call_printed(call_id(step, call), text)
        for window in self.hub.followers(turn.session_id):
            window.notifier.tool_output(turn, step, call, text)

    def process_output(self, session_id: str, process_id: str, text: str) -> None:
        for window in self.hub.followers(session_id):
            window.notifier.process_output(session_id, process_id, text)

    def process_exited(self, state: ProcessState) -> None:
        for window in self.hub.followers(state.session_id):
            window.notifier.process_exited(state)

    def usage(self, turn: TurnRef, figures: dict[str, Any]) -> None:
        for window in self.hub.followers(turn.session_id):
            window.notifier.usage(turn, figures)

    def plan(self, turn: TurnRef, step: int, entries: tuple[PlanEntry, ...]) -> None:
        for window in self.hub.followers(turn.session_id):
            window.notifier.plan(turn, step, entries)

    def forked(self, origin_id: str, fork_id: str) -> None:
        """Every window following ``origin_id`` follows ``fork_id`` from now on: a fork a
        turn ran in, or a child session a turn's ``task`` call started, drawn as it runs. It
        stays followed after its turn (as a session the window opened would), so a window
        that also opened it is not dropped from it."""
        for window in self.hub.followers(origin_id):
            self.hub.follow(window, fork_id)

    def queued(self, entry: Queued, position: int) -> None:
        for window in self.hub.followers(entry.session_id):
            window.notifier.queued(entry, position)

    def dequeued(self, entry: Queued, reason: str) -> None:
        for window in self.hub.followers(entry.session_id):
            window.notifier.dequeued(entry, reason)

    def mode_changed(self, session_id: str, approval: Mode) -> None:
        for window in self.hub.followers(session_id):
            window.notifier.mode_changed(session_id, approval)

    def turn_ended(self, turn: TurnRef, result: TurnResult) -> None:
        for window in self.hub.followers(turn.session_id):
            window.notifier.turn_ended(turn, result)

    def steered(self, turn: TurnRef, step: int | None, steer: Steer, delivered: bool) -> None:
        for window in self.hub.followers(turn.session_id):
            window.notifier.steered(turn, step, steer, delivered)

    def can_ask(self, session_id: str) -> bool:
        return bool(self.hub.followers(session_id))

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision:
        return await self.hub.ask_approval(turn, request)
