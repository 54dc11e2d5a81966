"""Kill the daemon at random points across many turns: every committed step stays, and the
store stays sound.

``TRELLISD_STRESS_KILLS`` sets how many kills: 5 by default, 25 in CI (``.ci/run``);
``TRELLISD_STRESS_SEED`` picks the kill points."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import threading
from pathlib import Path

import apsw
import pytest

from tests.e2e.conftest import Daemon, DaemonFactory
from tests.fixtures.driver import open_session, turn
from tests.fixtures.model_server import ModelServer, split_words
from tests.fixtures.waits import eventually

KILLS = int(os.environ.get("TRELLISD_STRESS_KILLS", "5"))

# One turn: two tool steps, then a streamed answer.
TURN = [
    ("Looking around. ", [{"name": "list_dir", "arguments": {"path": "."}}]),
    ("Reading. ", [{"name": "read_file", "arguments": {"path": "README.md"}}]),
    ("All done with this one, here is a longer answer to stream.", []),
]
# What the editor hears of a turn before its answer's last piece: every piece, and a step
# for each tool call.
NOTES_BEFORE_THE_END = sum(len(split_words(text)) + len(calls) for text, calls in TURN)


def queue_turn(model: ModelServer, held: bool) -> None:
    """The model's replies for one turn; a held turn never gets past its answer's last piece,
    so a kill anywhere before that finds it running, on any machine."""
    for text, calls in TURN[:-1]:
        model.reply(text, tool_calls=calls)
    text, _ = TURN[-1]
    model.reply(text, hold=threading.Event() if held else None, hold_at=len(split_words(text)))


def notes(daemon: Daemon) -> int:
    """What the editor has heard of: the model's pieces streamed (the daemon may join pieces
    into one notification) and the steps committed."""
    return daemon.pieces() + len(daemon.steps)


async def more_notes(daemon: Daemon, count: int) -> None:
    """Wait for ``count`` more notifications than the editor has heard so far."""
    target = notes(daemon) + count
    await eventually(lambda: notes(daemon) >= target, f"{count} more notifications")


def committed(db: Path) -> set[tuple[str, int, str, str]]:
    con = apsw.Connection(str(db))
    try:
        return {
            (r, n, d, t) for r, n, d, t in con.execute("SELECT run_id, n, decision, text FROM step")
        }
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.timeout(60 + 15 * KILLS)  # a safety net that grows with the kills asked for
async def test_random_kills_lose_no_committed_step(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    rng = random.Random(int(os.environ.get("TRELLISD_STRESS_SEED", "7")))
    db = tmp_path / "stress.db"
    seen: set[tuple[str, int, str, str]] = set()
    session = None
    mid_turn = 0  # kills that provably landed while a turn ran
    for _ in range(KILLS):
        daemon = await spawn(db=db)
        if session is None:
            session = await open_session(daemon, workspace)
        else:
            await daemon.call("session/reopen", {"sessionId": session["sessionId"]})
        for _turn in range(rng.randint(0, 2)):
            queue_turn(model, held=False)
            assert (await turn(daemon, session, "go"))["outcome"] == "finished"
        queue_turn(model, held=True)
        # Kill after a random number of the turn's notifications; 0: as soon as it is asked.
        point = rng.randint(0, NOTES_BEFORE_THE_END)
        pending = asyncio.ensure_future(turn(daemon, session, "go"))
        await more_notes(daemon, point)
        os.kill(daemon.process.pid, signal.SIGKILL)
        await daemon.process.wait()
        with contextlib.suppress(Exception):
            await pending
        model.clear()
        mid_turn += point > 0
        now = committed(db)
        assert seen <= now, f"committed steps vanished: {seen - now}"
        seen = now

    assert session is not None
    last = await spawn(db=db)
    turns = (await last.call("session/turns", {"sessionId": session["sessionId"]}))["turns"]
    outcomes = [t["outcome"] for t in turns]
    assert set(outcomes) <= {"finished", "interrupted"}, outcomes
    assert outcomes.count("interrupted") >= mid_turn
    assert seen <= committed(db)
    await last.client.shutdown_session()
    con = apsw.Connection(str(db))
    assert con.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    con.close()
    print(
        f"{KILLS} kills ({mid_turn} mid-turn), {len(turns)} turns, {len(seen)} steps kept, "
        f"{outcomes.count('interrupted')} interrupted"
    )
