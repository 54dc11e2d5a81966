"""A window joining a session whose turn runs, whichever protocol it speaks: the snapshot of
the turn, the history shown before the turn comes live, and the turn's outcome once it ends."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.fixtures.fake_services import Model
from trellisd.services import Services
from trellisd.services.turns import TurnRequest


async def test_a_joining_window_is_shown_the_history_then_the_running_turn_and_its_outcome(
    app: Services, model: Model, root: Path
) -> None:
    session = (await app.sessions.open(str(root), None, None, None)).session_id
    await app.turns.turn(TurnRequest(session, "first"))
    hold = asyncio.Event()
    model.reply("slow", hold=hold)
    running = asyncio.ensure_future(app.turns.turn(TurnRequest(session, "second")))
    await model.waiting.wait()

    live = app.running.snapshot(session)
    assert live is not None and live.prompt == "second" and live.done == 0
    instant = app.running.starts()
    shown = await app.sessions.joined(session, True, live, instant)
    assert [s.turn.prompt for s in shown] == ["first", "second"]
    assert shown[-1].turn.turn_id == live.ref.turn_id

    alone = await app.sessions.joined(session, False, live, instant)  # resumed: no history
    assert [s.turn.prompt for s in alone] == ["second"]

    task = app.running.get(session)
    assert task is not None
    outcome = asyncio.ensure_future(app.turns.outcome(task))
    hold.set()
    result = await running
    assert await outcome == result.outcome == "finished"
    assert app.running.snapshot(session) is None


async def test_a_turn_that_starts_after_the_join_is_left_out_of_the_history(
    app: Services, root: Path
) -> None:
    session = (await app.sessions.open(str(root), None, None, None)).session_id
    await app.turns.turn(TurnRequest(session, "before"))
    instant = app.running.starts()
    await app.turns.turn(TurnRequest(session, "after"))  # comes to the window live

    shown = await app.sessions.joined(session, True, None, instant)
    assert [s.turn.prompt for s in shown] == ["before"]
