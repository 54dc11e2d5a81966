"""A model that streams without end: the daemon keeps answering while it floods, stops reading
at a cancel, and ends a step that goes past what it may keep."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.e2e.conftest import DaemonFactory
from tests.fixtures.driver import open_session, turn
from tests.fixtures.flood_server import FloodServer, MiB
from tests.fixtures.waits import SAFETY_NET, until

STEP_LIMIT = 16 * MiB


async def test_cancel_and_list_are_answered_while_a_model_floods_its_tool_call(
    spawn: DaemonFactory, workspace: Path
) -> None:
    # Small pieces of one endless argument: the daemon once joined each piece onto all those
    # before it, and from a few MiB on it spent minutes on each read, answering nothing.
    with FloodServer(kind="arguments", piece="abcdefgh") as flood:
        daemon = await spawn(env={"TRELLISD_BASE_URL": flood.url})
        session = await open_session(daemon, workspace)
        running = asyncio.ensure_future(turn(daemon, session, "write it all"))
        await until(flood.sent_at_least(80 * MiB), "the model has streamed 80 MiB")

        listed = await daemon.call("session/list", {})
        assert session["sessionId"] in [s["sessionId"] for s in listed["sessions"]]
        cancelled = await daemon.call("session/cancel", {"sessionId": session["sessionId"]})
        result = await asyncio.wait_for(running, SAFETY_NET)

    assert cancelled["cancelled"] is True and cancelled["turnId"] == result["turnId"]
    assert result["outcome"] == "cancelled"
    await until(flood.dropped, "the daemon hangs up on the model")
    steps = await daemon.call("run/steps", {"runId": result["runId"]})
    assert [s["decision"] for s in steps["steps"]] in ([], ["cancelled"])


async def test_a_reply_past_16_mib_ends_the_turn_error_saying_so(
    spawn: DaemonFactory, workspace: Path
) -> None:
    with FloodServer(kind="text", piece="flood " * 700) as flood:
        daemon = await spawn(env={"TRELLISD_BASE_URL": flood.url})
        session = await open_session(daemon, workspace)
        result = await asyncio.wait_for(turn(daemon, session, "say everything"), SAFETY_NET)
        await until(flood.dropped, "the daemon hangs up on the model")

    assert result["outcome"] == "error"
    assert result["error"] == (
        "the model's reply in one step went past 16 MiB of text; the call was ended to bound"
        " the memory it may take"
    )
    assert len(result["reply"]) <= STEP_LIMIT
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert [s["decision"] for s in steps] == ["error"]
    assert steps[0]["text"] == result["reply"]
    # What the editor was shown is what was kept.
    shown = "".join(t["text"] for t in daemon.tokens if t["turnId"] == result["turnId"])
    assert shown == result["reply"]
    listed = await daemon.call("session/list", {})
    assert session["sessionId"] in [s["sessionId"] for s in listed["sessions"]]


async def test_tool_calls_past_16_mib_end_the_turn_error_saying_so(
    spawn: DaemonFactory, workspace: Path
) -> None:
    with FloodServer(kind="arguments", piece="x" * 4000) as flood:
        daemon = await spawn(env={"TRELLISD_BASE_URL": flood.url})
        session = await open_session(daemon, workspace)
        result = await asyncio.wait_for(turn(daemon, session, "write a big file"), SAFETY_NET)
        await until(flood.dropped, "the daemon hangs up on the model")

    assert result["outcome"] == "error"
    assert result["error"] == (
        "the model's tool calls in one step went past 16 MiB; the call was ended to bound the"
        " memory it may take"
    )
