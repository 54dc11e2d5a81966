"""Steering a running turn, and cancelling it two ways."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from lsprotocol import types

from tests.e2e.conftest import Daemon
from tests.e2e.test_sessions import open_session, turn
from tests.fixtures.model_server import ModelServer


async def wait_for(condition, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting")
        await asyncio.sleep(0.01)


async def test_a_steer_reaches_the_next_request_and_not_the_one_in_flight(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    gate = threading.Event()
    model.reply("Working on it in red.", hold=gate)
    model.reply("Switched to blue.")
    session = await open_session(daemon, workspace)
    running = asyncio.ensure_future(turn(daemon, session, "paint the button"))
    await wait_for(lambda: len(model.requests) == 1)

    receipt = await daemon.call(
        "session/steer",
        {"sessionId": session["sessionId"], "text": "use blue, not red", "clientMsgId": "m-1"},
    )
    again = await daemon.call(
        "session/steer",
        {"sessionId": session["sessionId"], "text": "use blue, not red", "clientMsgId": "m-1"},
    )
    assert receipt["queued"] is True and "duplicate" not in receipt
    assert again == {**receipt, "duplicate": True}
    gate.set()
    result = await running

    assert result["outcome"] == "finished"
    assert result["reply"] == "Working on it in red.Switched to blue."
    assert len(model.requests) == 2
    assert "use blue" not in str(model.requests[0]["messages"])
    steered = [m for m in model.requests[1]["messages"] if "use blue" in str(m["content"])]
    assert len(steered) == 1 and steered[0]["role"] == "user"
    notes = [m["params"] for m in daemon.protocol.received if m.get("method") == "session/steered"]
    assert notes == [
        {
            "sessionId": session["sessionId"],
            "turnId": result["turnId"],
            "runId": result["runId"],
            "step": 2,
            "text": "use blue, not red",
            "clientMsgId": "m-1",
            "delivered": True,
        }
    ]
    events = (await daemon.call("run/events", {"runId": result["runId"]}))["events"]
    assert [(e["kind"], e["step"]) for e in events if e["kind"] == "steered"] == [("steered", 2)]
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert steps[1]["prompt"] == "use blue, not red"


async def test_steering_an_idle_session_is_an_error(daemon: Daemon, workspace: Path) -> None:
    session = await open_session(daemon, workspace)
    error = await daemon.error(
        "session/steer", {"sessionId": session["sessionId"], "text": "hello?"}
    )
    assert error.code == -32021 and "no running turn" in error.message


async def test_session_cancel_stops_a_slow_stream_within_a_second(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    model.reply(" ".join(f"word{i}" for i in range(200)), delay=0.1)
    session = await open_session(daemon, workspace)
    running = asyncio.ensure_future(turn(daemon, session, "write a lot"))
    await wait_for(lambda: len(daemon.tokens) >= 3)
    await daemon.call("session/steer", {"sessionId": session["sessionId"], "text": "too late"})

    started = time.monotonic()
    cancelled = await daemon.call("session/cancel", {"sessionId": session["sessionId"]})
    result = await running
    assert time.monotonic() - started < 1.0
    assert cancelled["cancelled"] is True and cancelled["turnId"] == result["turnId"]
    assert result["outcome"] == "cancelled"
    assert result["reply"].startswith("word0 word1 word2")
    assert len(result["reply"].split()) < 50
    summary = await daemon.call("run/summary", {"runId": result["runId"]})
    assert summary["outcome"] == "cancelled"
    history = await daemon.call("session/history", {"sessionId": session["sessionId"]})
    assert history["turns"][-1]["outcome"] == "cancelled"
    assert history["turns"][-1]["reply"] == result["reply"]
    # The steer never reached the model: it is handed back.
    returned = [
        m["params"] for m in daemon.protocol.received if m.get("method") == "session/steered"
    ]
    assert returned == [
        {
            **{k: result[k] for k in ("turnId", "runId")},
            "sessionId": session["sessionId"],
            "step": None,
            "text": "too late",
            "delivered": False,
        }
    ]
    # Nothing more arrives for the cancelled turn, and the next turn works.
    count = len(daemon.tokens)
    await asyncio.sleep(0.3)
    assert len(daemon.tokens) == count
    model.reply("fresh")
    assert (await turn(daemon, session, "again"))["reply"] == "fresh"
    assert (await daemon.call("session/cancel", {"sessionId": session["sessionId"]})) == {
        "cancelled": False
    }


async def test_cancel_request_stops_the_turn_and_answers_32800(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    model.reply(" ".join(f"word{i}" for i in range(200)), delay=0.1)
    session = await open_session(daemon, workspace)
    request = asyncio.ensure_future(
        daemon.protocol.send_request_async(
            "session/turn",
            {"sessionId": session["sessionId"], "prompt": "write a lot"},
            msg_id="turn-to-cancel",
        )
    )
    await wait_for(lambda: len(daemon.tokens) >= 3)
    started = time.monotonic()
    daemon.protocol.notify("$/cancelRequest", types.CancelParams(id="turn-to-cancel"))
    try:
        await request
        raise AssertionError("the cancelled request answered with a result")
    except Exception as exc:  # noqa: BLE001
        assert getattr(exc, "code", None) == -32800, exc
    assert time.monotonic() - started < 1.0
    run_id = daemon.tokens[0]["runId"]
    await wait_for_outcome(daemon, run_id, "cancelled")
    model.reply("fresh")
    assert (await turn(daemon, session, "again"))["reply"] == "fresh"


async def wait_for_outcome(daemon: Daemon, run_id: str, outcome: str) -> None:
    deadline = time.monotonic() + 5
    while (await daemon.call("run/summary", {"runId": run_id}))["outcome"] != outcome:
        assert time.monotonic() < deadline, "the run never reached " + outcome
        await asyncio.sleep(0.05)
