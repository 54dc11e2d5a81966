"""What a window reopening a session mid-turn is told: the history read agrees with the running
turn even when a turn starts or ends while the store is read."""

from __future__ import annotations

from trellisd.records import TurnRef
from trellisd.services.running import READ_TRIES, Running

REF = TurnRef("s-1", "t-1", "r-1")


async def test_a_read_during_which_a_turn_starts_is_read_again() -> None:
    running = Running()
    reads: list[bool] = []

    async def read() -> bool:
        # the queued prompt's turn starts while the first read is at the store
        if not reads:
            running.start(REF, "the queued prompt")
        reads.append(running.get("s-1") is not None)
        return reads[-1]

    assert await running.settled("s-1", read) is True
    assert reads == [True, True]
    live = running.get("s-1")
    assert live is not None and live.prompt == "the queued prompt"


async def test_a_turn_of_another_session_does_not_make_the_read_twice() -> None:
    running, reads = Running(), []

    async def read() -> int:
        running.start(TurnRef(f"s-other-{len(reads)}", "t-2", "r-2"))
        reads.append(1)
        return len(reads)

    assert await running.settled("s-1", read) == 1


async def test_a_read_that_always_meets_a_turn_starting_ends_after_a_bounded_number_of_tries() -> (
    None
):
    running, reads = Running(), []

    async def read() -> int:
        running.end("s-1")
        running.start(REF)
        reads.append(1)
        return len(reads)

    assert await running.settled("s-1", read) == READ_TRIES


async def test_the_turns_started_after_an_instant_are_known_by_session() -> None:
    running = Running()
    running.start(TurnRef("s-1", "t-before", "r-1"))
    running.end("s-1")
    instant = running.starts()
    running.start(TurnRef("s-1", "t-after", "r-2"))
    running.end("s-1")
    running.start(TurnRef("s-2", "t-elsewhere", "r-3"))
    running.start(TurnRef("s-1", "t-running", "r-4"))
    assert running.started_since("s-1", instant) == {"t-after", "t-running"}
    assert running.started_since("s-2", instant) == {"t-elsewhere"}
    assert running.started_since("s-1", running.starts()) == set()
