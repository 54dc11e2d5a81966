"""Windows of the shared daemon and what the model reasons: a window that reopens a session
mid-turn is given the current step's thought so far in ``running``, and the rest live."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from tests.e2e.conftest import Windows
from tests.fixtures.driver import followed, open_session, turn
from tests.fixtures.waits import eventually

THOUGHT = "Weigh the two options first."


async def test_a_window_that_joins_mid_turn_gets_the_thought_so_far(
    windows: Windows, workspace: Path, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    script = tmp_path / "script.jsonl"
    line = {"thought": THOUGHT, "text": "Done now.", "holdAfter": 0, "holdFile": str(go)}
    script.write_text(json.dumps(line) + "\n", encoding="utf-8")
    env = {"TRELLISD_PROVIDER": "scripted", "TRELLISD_SCRIPT": str(script)}
    a, _ = await windows.open(**env)
    session = await open_session(a, workspace)
    running = asyncio.ensure_future(turn(a, session, "choose"))
    await eventually(
        lambda: "".join(t["text"] for t in a.thoughts) == THOUGHT,
        "the whole thought reaches the first window",
    )

    b, _ = await windows.open(**env)
    reopened = await b.call("session/reopen", {"sessionId": session["sessionId"]})
    go.touch()  # the model goes on to its text
    result = await running

    live = reopened["running"]
    assert (live["step"], live["thought"], live["text"]) == (1, THOUGHT, "")
    await eventually(lambda: followed(b, "session/step"), "the second window is told of the step")
    (step,) = followed(b, "session/step")
    assert step["thought"] == THOUGHT and step["text"] == "Done now."
    assert b.thoughts == []  # all of it came in the answer
    assert result["outcome"] == "finished"
