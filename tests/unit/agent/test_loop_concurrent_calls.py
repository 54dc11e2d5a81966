"""The calls of ``concurrent`` tools (``task``) of one model call run at the same time, each
still committed as its step in order; other tools' calls run one after another."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from tests.unit.agent.test_loop import FakeProvider, Journal, Upper, call, plan, reply
from trellisd.agent.loop import run_turn
from trellisd.providers.base import Stop, Usage
from trellisd.tools.base import Action, ToolContext


class Meeting:
    """A concurrent tool whose calls each wait until ``expected`` of them are running at once:
    run one by one, the first would wait for ever."""

    name = "meet"
    description = "Wait for the others."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}
    concurrent = True

    def __init__(self, expected: int) -> None:
        self.expected, self.arrived = expected, 0
        self.all_here = asyncio.Event()
        self.two_here = asyncio.Event()
        self.cancelled = 0

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        return Action("read", ".")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        self.arrived += 1
        if self.arrived == 2:
            self.two_here.set()
        if self.arrived == self.expected:
            self.all_here.set()
        try:
            await self.all_here.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return f"met {arguments['who']}"


def calls(*made: Any) -> list[Any]:
    return [*made, Usage(10, 1), Stop("tool_calls")]


async def test_a_steps_concurrent_calls_run_at_once_and_commit_in_order(tmp_path: Path) -> None:
    meeting = Meeting(2)
    provider = FakeProvider(
        calls(
            call("c1", "meet", who="a"), call("c2", "upper", text="x"), call("c3", "meet", who="b")
        ),
        reply("Done."),
    )
    journal = Journal()

    end = await asyncio.wait_for(
        run_turn(plan(provider, tmp_path, meeting, Upper()), journal, journal, "go"), 60
    )

    assert end.outcome == "finished"
    assert [(s.step, s.result) for s in journal.steps] == [
        (1, "met a"),
        (2, "X"),
        (3, "met b"),
        (4, None),
    ]


async def test_cancelling_the_turn_cancels_the_concurrent_calls_it_started(
    tmp_path: Path,
) -> None:
    meeting = Meeting(3)  # two calls never meet a third
    provider = FakeProvider(calls(call("c1", "meet", who="a"), call("c2", "meet", who="b")))
    journal = Journal()
    turn = asyncio.ensure_future(
        run_turn(plan(provider, tmp_path, meeting), journal, journal, "go")
    )
    await asyncio.wait_for(meeting.two_here.wait(), 60)

    turn.cancel()
    await asyncio.wait([turn])

    assert turn.cancelled()
    assert meeting.cancelled == 2
    assert [(s.step, s.decision) for s in journal.steps] == [(1, "cancelled")]
