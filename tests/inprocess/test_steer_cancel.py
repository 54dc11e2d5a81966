"""Steering a running turn, and cancelling it two ways."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from lsprotocol import types

from tests.fixtures.driver import Daemon, held_after, open_session, tokens, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually, until


async def test_a_steer_reaches_the_next_request_and_not_the_one_in_flight(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    gate = threading.Event()
    first = model.reply("Working on it in red.", hold=gate)
    model.reply("Switched to blue.")
    session = await open_session(daemon, workspace)
    running = asyncio.ensure_future(turn(daemon, session, "paint the button"))
    await until(first.served, "the first model call arrives")

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
    assert result["reply"] == "Switched to blue."
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


async def test_session_cancel_stops_a_stream_the_model_is_still_sending(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    reply = held_after(model, 3)
    session = await open_session(daemon, workspace)
    running = asyncio.ensure_future(turn(daemon, session, "write a lot"))
    await tokens(daemon, 3)
    await daemon.call("session/steer", {"sessionId": session["sessionId"], "text": "too late"})

    cancelled = await daemon.call("session/cancel", {"sessionId": session["sessionId"]})
    result = await running
    assert cancelled["cancelled"] is True and cancelled["turnId"] == result["turnId"]
    assert result["outcome"] == "cancelled"
    assert result["reply"] == "word0 word1 word2 "
    # The daemon hangs up on the model: nothing more of this reply can arrive.
    await until(reply.dropped, "the daemon closes the cancelled turn's stream")
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
    model.reply("fresh")
    assert (await turn(daemon, session, "again"))["reply"] == "fresh"
    assert (
        "".join(t["text"] for t in daemon.tokens if t["turnId"] == result["turnId"])
        == (result["reply"])
    )
    assert (await daemon.call("session/cancel", {"sessionId": session["sessionId"]})) == {
        "cancelled": False
    }


async def test_cancel_request_stops_the_turn_and_answers_32800(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    reply = held_after(model, 3)
    session = await open_session(daemon, workspace)
    request = asyncio.ensure_future(
        daemon.protocol.send_request_async(
            "session/turn",
            {"sessionId": session["sessionId"], "prompt": "write a lot"},
            msg_id="turn-to-cancel",
        )
    )
    await tokens(daemon, 3)
    daemon.protocol.notify("$/cancelRequest", types.CancelParams(id="turn-to-cancel"))
    try:
        await request
        raise AssertionError("the cancelled request answered with a result")
    except Exception as exc:  # noqa: BLE001
        assert getattr(exc, "code", None) == -32800, exc
    run_id = daemon.tokens[0]["runId"]

    async def cancelled() -> bool:
        summary = await daemon.call("run/summary", {"runId": run_id})
        return bool(summary["outcome"] == "cancelled")

    await eventually(cancelled, "the run is recorded as cancelled")
    # Its request answered an error, but the window still hears how the turn ended.
    ended = await eventually(
        lambda: [
            m["params"]
            for m in daemon.protocol.received
            if m.get("method") == "session/turnEnded" and m["params"]["runId"] == run_id
        ],
        "the window hears the turn end",
    )
    assert [e["outcome"] for e in ended] == ["cancelled"]
    await until(reply.dropped, "the daemon closes the cancelled turn's stream")
    model.reply("fresh")
    assert (await turn(daemon, session, "again"))["reply"] == "fresh"
