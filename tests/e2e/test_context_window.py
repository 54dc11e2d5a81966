"""The usage of a session's turns, told to every window of the shared daemon following it."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import Windows
from tests.fixtures.driver import followed, open_session, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually


def prompt(n: int) -> str:
    """A long prompt of turn ``n``: its first word names it."""
    return f"turn{n} " + " ".join(f"word{i:03d}" for i in range(299))


async def test_every_window_following_the_session_is_told_its_usage(
    windows: Windows, model: ModelServer, workspace: Path
) -> None:
    a, _ = await windows.open()
    b, _ = await windows.open()
    session = await open_session(a, workspace)
    await b.call("session/reopen", {"sessionId": session["sessionId"]})
    model.reply("told to both")
    result = await turn(a, session, "hello")
    for window in (a, b):
        told = await eventually(
            lambda window=window: [
                u for u in followed(window, "session/usage") if u["turnId"] == result["turnId"]
            ],
            "the usage reaches the window",
        )
        assert told[-1]["tokens"]["turn"]["input"] == result["tokens"]["input"]
