"""Live tool activity: what the editor is told about a tool call while it happens.

Each call of the model goes ``proposed`` (the model's call is complete; the policy and the
user have not been asked) and then ``running`` or ``refused``; a running call ends ``done``
or ``failed``; a call that the turn's end overtakes (a cancel, the step limit) is
``cancelled``. A call that never gets to run (no tool by that name, arguments that are not an
object) is ``failed`` without ``running``.

A running command's output reaches the editor through an ``OutputFeed`` as it is produced:
coalesced into at most one piece every ``OUTPUT_INTERVAL`` seconds, or at once when
``OUTPUT_PIECE_BYTES`` are waiting, and capped per call at the bytes a command's result keeps
(``MAX_OUTPUT_BYTES``). The feed keeps at most one piece in memory and writes nothing to
disk; the committed step's result stays the record of what the command printed.
"""

from __future__ import annotations

import asyncio
import codecs
import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from ..plans import PlanEntry
from ..records import ToolCall
from ..tools.base import ToolContext
from ..tools.command import MAX_OUTPUT_BYTES
from ..vocabulary import CallStatus

OUTPUT_INTERVAL = 0.05
OUTPUT_PIECE_BYTES = 4096
OUTPUT_CUT_NOTE = (
    "\n[live output stops here after {limit} bytes; the command goes on, and its result keeps"
    " the end of what it prints]\n"
)


class ToolActivity(Protocol):
    """Who is told of the tool calls of a turn as they happen."""

    def call(self, step: int, call: ToolCall, status: CallStatus) -> None: ...

    def output(self, step: int, call: ToolCall, text: str) -> None: ...

    def child(self, step: int, call: ToolCall, session_id: str) -> None: ...

    async def plan(self, step: int, entries: tuple[PlanEntry, ...]) -> None:
        """Step ``step``'s ``update_plan`` call replaced the turn's plan with ``entries``."""
        ...


class Quiet:
    """Tells no one: a turn run with no editor to watch its calls."""

    def call(self, step: int, call: ToolCall, status: CallStatus) -> None:
        pass

    def output(self, step: int, call: ToolCall, text: str) -> None:
        pass

    def child(self, step: int, call: ToolCall, session_id: str) -> None:
        pass

    async def plan(self, step: int, entries: tuple[PlanEntry, ...]) -> None:
        pass


class OutputFeed:
    """A call's output on its way to the editor: bytes in (``add``, from the program's pipe),
    text pieces out (``send``), coalesced and capped. ``close`` sends what waits."""

    def __init__(
        self,
        send: Callable[[str], None],
        limit: int = MAX_OUTPUT_BYTES,
        interval: float = OUTPUT_INTERVAL,
        piece: int = OUTPUT_PIECE_BYTES,
    ) -> None:
        self._send, self._limit, self._interval, self._piece = send, limit, interval, piece
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._waiting: list[str] = []
        self._size = 0  # bytes waiting
        self._taken = 0  # bytes taken in all
        self._timer: asyncio.TimerHandle | None = None
        self._closed = False

    def add(self, data: bytes) -> None:
        if self._closed or self._taken >= self._limit or not data:
            return
        data = data[: self._limit - self._taken]
        self._taken += len(data)
        self._size += len(data)
        self._waiting.append(self._decoder.decode(data))
        if self._taken >= self._limit:
            self._waiting.append(self._decoder.decode(b"", final=True))
            self._waiting.append(OUTPUT_CUT_NOTE.format(limit=self._limit))
            self.flush()
        elif self._size >= self._piece:
            self.flush()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self._interval, self.flush)

    def flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        text = "".join(self._waiting)
        self._waiting, self._size = [], 0
        if text:
            self._send(text)

    def close(self) -> None:
        """The program is done: what waits goes out now, and nothing after it."""
        if self._closed:
            return
        if self._taken < self._limit:
            self._waiting.append(self._decoder.decode(b"", final=True))
        self.flush()
        self._closed = True


@contextmanager
def running(
    activity: ToolActivity, step: int, call: ToolCall, context: ToolContext
) -> Iterator[ToolContext]:
    """The call is ``running``: the context it runs with sends its output to ``activity``
    as it comes; all of it is sent when the call's work ends."""
    activity.call(step, call, CallStatus.RUNNING)
    feed = OutputFeed(lambda text: activity.output(step, call, text))
    try:
        yield dataclasses.replace(
            context,
            output=feed.add,
            child=lambda session_id: activity.child(step, call, session_id),
            plan=lambda entries: activity.plan(step, entries),
        )
    finally:
        feed.close()


def abandon(activity: ToolActivity, calls: list[ToolCall], first_step: int) -> None:
    """The turn ends before ``calls`` end (or start): each is ``cancelled``, from
    ``first_step`` on."""
    for offset, call in enumerate(calls):
        activity.call(first_step + offset, call, CallStatus.CANCELLED)
