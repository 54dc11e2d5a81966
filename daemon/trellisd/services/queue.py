"""Queued prompts: a turn asked for (``queue: true``) while another turn of the session runs
waits here, and runs after it, in the order asked, from any window.

Each queued prompt is its own ``session/turn`` request, waiting until it is first in its
session's queue and no turn of the session runs; then it leaves the queue and runs as any
turn, so ``$/cancelRequest`` and ``session/cancel`` reach it as they reach any turn. A cancel
stops the running turn only: the next queued prompt runs after it. ``session/unqueue`` drops a
waiting prompt, and its request answers with ``Dropped``. Each session's queue holds at most
``QUEUE_LIMIT`` prompts of at most ``wire``'s prompt size, so the memory a queue takes is
bounded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..errors import Conflict, Dropped, NotFound
from ..records import TurnResult
from ..store.db import new_id, now
from .running import Running

log = logging.getLogger(__name__)

QUEUE_LIMIT = 16


@dataclass
class Queued:
    """A prompt waiting for its session's running turn (and those queued before it) to end."""

    queue_id: str
    session_id: str
    prompt: str
    queued_at: str
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    dropped: str | None = None  # why it left the queue without running


class QueueWatcher(Protocol):
    """Who is told when a prompt joins or leaves a session's queue (every window following
    the session)."""

    def queued(self, entry: Queued, position: int) -> None: ...

    def dequeued(self, entry: Queued, reason: str) -> None: ...


class PromptQueues:
    def __init__(self, running: Running, watcher: QueueWatcher, limit: int = QUEUE_LIMIT) -> None:
        self.running, self.watcher, self.limit = running, watcher, limit
        self._queues: dict[str, list[Queued]] = {}
        # The request (task) of each session's turn started here, until it has answered: the
        # next queued turn starts once that answer is written, not before.
        self._starting: dict[str, asyncio.Task[Any]] = {}

    def waiting(self, session_id: str) -> list[Queued]:
        """The session's queued prompts, first to run first."""
        return list(self._queues.get(session_id, ()))

    async def turn(
        self,
        session_id: str,
        prompt: str,
        run: Callable[[], Awaitable[TurnResult]],
        queue_it: bool = False,
    ) -> TurnResult:
        """``run`` the turn now when the session is idle with nothing queued; else, with
        ``queue_it``, queue it and run it in its turn, or refuse it (``Conflict``). Answers
        when the turn has run."""
        queue = self._queues.get(session_id)
        busy = self.running.get(session_id) is not None or session_id in self._starting
        if not queue_it and busy:
            self.running.refuse(session_id, "start another")
            raise Conflict(
                f"session {session_id} is starting a turn; wait for it to end or cancel it"
                " before you start another",
                sessionId=session_id,
            )
        if not queue and not busy:
            return await self._run(session_id, run)
        if queue is not None and len(queue) >= self.limit:
            raise Conflict(
                f"session {session_id} already has {len(queue)} queued prompts, the most it"
                " may have; wait for one to run or drop one (session/unqueue)",
                sessionId=session_id,
                limit=self.limit,
            )
        entry = Queued(new_id("q"), session_id, prompt, now())
        queue = self._queues.setdefault(session_id, [])
        queue.append(entry)
        self.watcher.queued(entry, len(queue))
        try:
            while True:
                await self._turn_of(entry)
                self._leave(entry, "started")
                try:
                    return await self._run(session_id, run)
                except Conflict:
                    # A turn started in between (not a queued one): wait for it, first in line.
                    if self.running.get(session_id) is None:
                        raise
                    if self._starting.get(session_id) is asyncio.current_task():
                        del self._starting[session_id]
                    self._queues.setdefault(session_id, []).insert(0, entry)
                    self.watcher.queued(entry, 1)
        except asyncio.CancelledError:
            if self._leave(entry, "cancelled"):
                log.info("queued prompt %s was cancelled before it ran", entry.queue_id)
            raise

    async def _run(self, session_id: str, run: Callable[[], Awaitable[TurnResult]]) -> TurnResult:
        """Run the turn in this request; the session counts as busy until the request has
        answered (its task is done), which wakes the queued prompts."""
        task = asyncio.current_task()
        if task is not None:
            self._starting[session_id] = task
            task.add_done_callback(lambda _: self._done(session_id, task))
        return await run()

    def _done(self, session_id: str, task: asyncio.Task[Any]) -> None:
        if self._starting.get(session_id) is task:
            del self._starting[session_id]
        self._wake(session_id)

    async def _turn_of(self, entry: Queued) -> None:
        """Wait until ``entry`` is first in its queue and no turn of its session runs;
        ``Dropped`` when it was dropped meanwhile."""
        while True:
            if entry.dropped is not None:
                raise Dropped(
                    f"queued prompt {entry.queue_id} of session {entry.session_id} was"
                    f" {entry.dropped} before it ran",
                    sessionId=entry.session_id,
                    queueId=entry.queue_id,
                )
            queue = self._queues.get(entry.session_id, [])
            running = self.running.get(entry.session_id)
            idle = running is None and entry.session_id not in self._starting
            if idle and queue and queue[0] is entry:
                return
            entry.wake.clear()
            waits: list[asyncio.Future[Any]] = [asyncio.ensure_future(entry.wake.wait())]
            if running is not None and running.task is not None:
                waits.append(running.task)
            starting = self._starting.get(entry.session_id)
            if starting is not None:
                waits.append(starting)
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                waits[0].cancel()

    def unqueue(self, session_id: str, queue_id: str) -> Queued:
        """Drop a waiting prompt; its request answers that it was dropped."""
        for entry in self._queues.get(session_id, ()):
            if entry.queue_id == queue_id:
                entry.dropped = "dropped from the queue (session/unqueue)"
                self._leave(entry, "dropped")
                entry.wake.set()
                return entry
        raise NotFound(
            f"no prompt {queue_id} waits in the queue of session {session_id}",
            sessionId=session_id,
            queueId=queue_id,
        )

    def drop_all(self, why: str) -> None:
        """The daemon is exiting: no queued prompt runs."""
        for queue in list(self._queues.values()):
            for entry in list(queue):
                entry.dropped = why
                self._leave(entry, "dropped")
                entry.wake.set()

    def _leave(self, entry: Queued, reason: str) -> bool:
        """Take ``entry`` out of its queue (False: it was not in it), wake the next one and
        tell the windows."""
        queue = self._queues.get(entry.session_id)
        if queue is None or entry not in queue:
            return False
        queue.remove(entry)
        if not queue:
            del self._queues[entry.session_id]
        self._wake(entry.session_id)
        self.watcher.dequeued(entry, reason)
        return True

    def _wake(self, session_id: str) -> None:
        """The first queued prompt of the session looks again whether it may run."""
        queue = self._queues.get(session_id)
        if queue:
            queue[0].wake.set()
