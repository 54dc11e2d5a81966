"""Prompts queued behind a running turn, in-process: order, dropping, the cap, a cancel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from trellisd import wire
from trellisd.errors import Conflict, Dropped, NotFound
from trellisd.handlers.session import session_queue
from trellisd.records import Tokens, TurnRef, TurnResult
from trellisd.services import Services
from trellisd.services.queue import PromptQueues, Queued
from trellisd.services.running import Running


class Watcher:
    def __init__(self) -> None:
        self.said: list[tuple[str, str, Any]] = []

    def queued(self, entry: Queued, position: int) -> None:
        self.said.append(("queued", entry.prompt, position))

    def dequeued(self, entry: Queued, reason: str) -> None:
        self.said.append((reason, entry.prompt, None))


class Turns:
    """Turns that run until the test lets each end."""

    def __init__(self, running: Running) -> None:
        self.running = running
        self.started: list[str] = []
        self.gates: dict[str, asyncio.Event] = {}

    def run(self, prompt: str) -> Any:
        async def turn() -> TurnResult:
            self.running.refuse("s", "start another")
            self.started.append(prompt)
            self.running.start(TurnRef("s", f"t-{prompt}", f"r-{prompt}"))
            try:
                await self.gates.setdefault(prompt, asyncio.Event()).wait()
            finally:
                self.running.end("s")
            return TurnResult(f"t-{prompt}", f"r-{prompt}", "finished", prompt, Tokens(), 1, None)

        return turn

    def end(self, prompt: str) -> None:
        self.gates.setdefault(prompt, asyncio.Event()).set()

    async def wait_started(self, prompt: str) -> None:
        while prompt not in self.started:
            await asyncio.sleep(0)


async def test_queued_prompts_run_in_order_and_a_dropped_one_never_runs() -> None:
    running, watcher = Running(), Watcher()
    queues, turns = PromptQueues(running, watcher), Turns(running)
    first = asyncio.ensure_future(queues.turn("s", "one", turns.run("one")))
    await turns.wait_started("one")
    later = {p: asyncio.ensure_future(queues.turn("s", p, turns.run(p), True)) for p in "abc"}
    while len(queues.waiting("s")) < 3:
        await asyncio.sleep(0)
    with pytest.raises(Conflict):
        await queues.turn("s", "plain", turns.run("plain"))

    dropped = queues.unqueue("s", queues.waiting("s")[1].queue_id)
    turns.end("one")
    await turns.wait_started("a")
    turns.end("a")
    await turns.wait_started("c")
    turns.end("c")

    assert [(await f).reply for f in (first, later["a"], later["c"])] == ["one", "a", "c"]
    with pytest.raises(Dropped, match="dropped from the queue"):
        await later["b"]
    assert dropped.prompt == "b" and turns.started == ["one", "a", "c"]
    assert watcher.said[:3] == [("queued", "a", 1), ("queued", "b", 2), ("queued", "c", 3)]
    assert ("dropped", "b", None) in watcher.said
    with pytest.raises(NotFound):
        queues.unqueue("s", dropped.queue_id)


async def test_the_queue_is_capped_and_a_cancelled_request_leaves_it() -> None:
    running, watcher = Running(), Watcher()
    queues, turns = PromptQueues(running, watcher, limit=2), Turns(running)
    first = asyncio.ensure_future(queues.turn("s", "one", turns.run("one")))
    await turns.wait_started("one")
    waiting = [asyncio.ensure_future(queues.turn("s", p, turns.run(p), True)) for p in "ab"]
    while len(queues.waiting("s")) < 2:
        await asyncio.sleep(0)
    with pytest.raises(Conflict, match="2 queued prompts, the most"):
        await queues.turn("s", "c", turns.run("c"), True)

    waiting[0].cancel()
    while len(queues.waiting("s")) > 1:
        await asyncio.sleep(0)
    turns.end("one")
    await turns.wait_started("b")
    turns.end("b")

    assert (await first).reply == "one" and (await waiting[1]).reply == "b"
    assert waiting[0].cancelled() and turns.started == ["one", "b"]
    assert ("cancelled", "a", None) in watcher.said


async def test_the_queue_of_a_session_that_does_not_exist_is_not_found(app: Services) -> None:
    with pytest.raises(NotFound, match="s-none"):
        await session_queue(app, wire.SessionRef("s-none"))
