"""The turns running in this daemon, one at most per session."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from ..agent.pieces import Pieces
from ..agent.steering import SteerInbox
from ..errors import Conflict
from ..records import TurnRef

T = TypeVar("T")
# A read that keeps meeting a turn starting or ending gives up after this many tries and
# answers the last one (the window's follow then catches up from the notifications).
READ_TRIES = 8
# The turns last started, for a reader that asks which started after a given instant.
RECENT_STARTS = 1024


@dataclass
class LiveCall:
    """A tool call of a step not committed yet, as a window that reopens the session mid-turn
    draws it: where it stands and what it printed so far (capped as the live output is)."""

    step: int
    call_id: str
    tool: str
    arguments: dict[str, Any]
    status: str
    output: list[str] = field(default_factory=list)


@dataclass
class RunningTurn:
    ref: TurnRef
    task: asyncio.Task[Any] | None
    prompt: str = ""
    inbox: SteerInbox = field(default_factory=SteerInbox)
    cancelled_by_request: bool = False
    pause_requested: bool = False  # session/pause: stop at the next step boundary
    step_mode: bool = False  # pause after every step
    # The step being streamed and its text (and reasoning) so far, for a window that reopens
    # the session mid-turn: kept in memory only, a step's text at most.
    step: int | None = None
    _pieces: Pieces = field(default_factory=Pieces)
    _thinking: Pieces = field(default_factory=Pieces)
    calls: dict[str, LiveCall] = field(default_factory=dict)
    done: int = 0  # the last step committed
    killed: tuple[str, tuple[str, ...]] | None = None  # a program its cancel had to kill

    def had_to_kill(self, tool: str, argv: tuple[str, ...]) -> None:
        """A cancel of this turn killed ``tool``'s running program ``argv`` mid-run."""
        self.killed = (tool, argv)

    def pausing(self) -> bool:
        return self.pause_requested or self.step_mode

    def streamed(self, step: int, text: str) -> None:
        self._streaming(step)
        self._pieces.add(text)

    def thought(self, step: int, text: str) -> None:
        self._streaming(step)
        self._thinking.add(text)

    def _streaming(self, step: int) -> None:
        if step != self.step:
            self.step, self._pieces, self._thinking = step, Pieces(), Pieces()

    def committed(self, step: int) -> None:
        """Step ``step`` is committed (in the history now): nothing streams, and its calls
        and those before it are in ``run/steps``."""
        self.step, self._pieces, self._thinking = None, Pieces(), Pieces()
        self.done = max(self.done, step)
        for call_id in [c.call_id for c in self.calls.values() if c.step <= step]:
            del self.calls[call_id]

    def call_changed(
        self, step: int, call_id: str, tool: str, arguments: dict[str, Any], status: str
    ) -> None:
        live = self.calls.get(call_id)
        if live is None:
            self.calls[call_id] = LiveCall(step, call_id, tool, arguments, status)
        else:
            live.status = status

    def call_printed(self, call_id: str, text: str) -> None:
        live = self.calls.get(call_id)
        if live is not None:
            live.output.append(text)

    def text(self) -> str:
        return self._pieces.text()

    def thinking(self) -> str:
        """What the model reasoned so far in the step being streamed."""
        return self._thinking.text()


@dataclass(frozen=True)
class Snapshot:
    """A running turn as it stood at one instant, for a window that joins it: its last
    committed step, the step being streamed and its text so far, and the calls in flight
    with their output so far."""

    ref: TurnRef
    prompt: str
    done: int
    step: int | None
    text: str
    calls: tuple[tuple[LiveCall, str], ...]
    thought: str = ""  # what the model reasoned so far in the step being streamed

    @classmethod
    def of(cls, running: RunningTurn) -> Snapshot:
        calls = tuple((replace(c, output=[]), "".join(c.output)) for c in running.calls.values())
        return cls(
            running.ref,
            running.prompt,
            running.done,
            running.step,
            running.text(),
            calls,
            running.thinking(),
        )


class Running:
    def __init__(self) -> None:
        self._turns: dict[str, RunningTurn] = {}
        self._changes: dict[str, int] = {}  # per session: how many turns started or ended
        self._starts = 0
        self._recent: deque[tuple[int, str, str]] = deque(maxlen=RECENT_STARTS)
        self.on_end: Callable[[], None] | None = None

    def __len__(self) -> int:
        return len(self._turns)

    def __iter__(self) -> Iterator[RunningTurn]:
        return iter(list(self._turns.values()))

    def get(self, session_id: str) -> RunningTurn | None:
        return self._turns.get(session_id)

    def snapshot(self, session_id: str) -> Snapshot | None:
        """The session's running turn as it stands now, for a window that joins it."""
        running = self._turns.get(session_id)
        return None if running is None else Snapshot.of(running)

    def start(self, ref: TurnRef, prompt: str = "") -> RunningTurn:
        running = RunningTurn(ref, asyncio.current_task(), prompt)
        self._turns[ref.session_id] = running
        self._changed(ref.session_id)
        self._starts += 1
        self._recent.append((self._starts, ref.session_id, ref.turn_id))
        return running

    def starts(self) -> int:
        """How many turns have started in this daemon: an instant, for ``started_since``."""
        return self._starts

    def started_since(self, session_id: str, instant: int) -> set[str]:
        """The session's turns that started after ``instant`` (of the last 1024 started)."""
        return {t for n, s, t in self._recent if n > instant and s == session_id}

    def end(self, session_id: str) -> None:
        if self._turns.pop(session_id, None) is not None:
            self._changed(session_id)
        if self.on_end is not None:
            self.on_end()

    def _changed(self, session_id: str) -> None:
        self._changes[session_id] = self._changes.get(session_id, 0) + 1

    async def settled(self, session_id: str, read: Callable[[], Awaitable[T]]) -> T:
        """What ``read`` gives of the session, read again while a turn of it started or ended
        during the read: the history a reopen answers agrees with the running turn it names
        (a turn queued behind another starts while the store is read)."""
        for _ in range(READ_TRIES - 1):
            seen = self._changes.get(session_id, 0)
            value = await read()
            if self._changes.get(session_id, 0) == seen:
                return value
        return await read()

    def refuse(self, session_id: str, what: str) -> None:
        """``Conflict`` when the session has a running turn: the user must wait or cancel."""
        running = self._turns.get(session_id)
        if running is not None:
            raise Conflict(
                f"session {session_id} has a running turn {running.ref.turn_id};"
                f" wait for it to end or cancel it before you {what}",
                sessionId=session_id,
                turnId=running.ref.turn_id,
            )

    def cancel_all(self) -> None:
        """The daemon is exiting: every running turn stops and records ``cancelled``."""
        for running in self._turns.values():
            if running.task is not None:
                running.task.cancel()
