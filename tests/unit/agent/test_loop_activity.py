"""The loop tells who watches of each tool call's status as it changes, in order with the
steps it commits."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.agent.test_loop import FakeProvider, Journal, Upper, call, plan, reply
from trellisd.agent.loop import run_turn
from trellisd.providers.base import Stop, ToolCallRequested
from trellisd.records import ToolCall
from trellisd.vocabulary import CallStatus


class Watched(Journal):
    """The journal, with the tool activity written to the same list."""

    def call(self, step: int, call: ToolCall, status: CallStatus) -> None:
        self.log.append(("call", step, call.id, status.value))

    def output(self, step: int, call: ToolCall, text: str) -> None:
        self.log.append(("output", step, call.id, text))


def calls(journal: Journal) -> list[tuple[Any, ...]]:
    return [entry for entry in journal.log if entry[0] in ("call", "commit")]


async def test_all_calls_are_proposed_then_each_runs_and_ends_before_its_step(
    tmp_path: Path,
) -> None:
    provider = FakeProvider(
        [
            call("a", "upper", text="x"),
            call("b", "upper", text=3),
            call("c", "nothing"),
            ToolCallRequested(ToolCall("d", "upper", {"_unparsed": "{"})),
            Stop("tool_calls"),
        ],
        reply("ok"),
    )
    journal = Watched()
    await run(provider, tmp_path, journal)
    assert calls(journal) == [
        ("call", 1, "a", "proposed"),
        ("call", 2, "b", "proposed"),
        ("call", 3, "c", "proposed"),
        ("call", 4, "d", "proposed"),
        ("call", 1, "a", "running"),
        ("call", 1, "a", "done"),
        ("commit", 1),
        ("call", 2, "b", "running"),
        ("call", 2, "b", "failed"),  # the tool raised ToolFailure
        ("commit", 2),
        ("call", 3, "c", "failed"),  # no such tool: it never ran
        ("commit", 3),
        ("call", 4, "d", "failed"),  # arguments that are not an object
        ("commit", 4),
        ("commit", 5),
    ]


async def test_calls_the_step_limit_overtakes_are_cancelled(tmp_path: Path) -> None:
    provider = FakeProvider(
        [call("a", "upper", text="x"), call("b", "upper", text="y"), Stop("tool_calls")]
    )
    journal = Watched()
    await run(provider, tmp_path, journal, max_steps=1)
    assert calls(journal) == [
        ("call", 1, "a", "proposed"),
        ("call", 2, "b", "proposed"),
        ("call", 1, "a", "running"),
        ("call", 1, "a", "done"),
        ("commit", 1),
        ("call", 2, "b", "cancelled"),
    ]


async def run(provider: FakeProvider, tmp_path: Path, journal: Watched, **options: Any) -> None:
    the_plan = plan(provider, tmp_path, Upper(), activity=journal, **options)
    await run_turn(the_plan, journal, journal, "hi")
