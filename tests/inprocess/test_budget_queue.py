"""Budgets that stop a turn before the model call that would pass them, and prompts queued
behind a running turn, over real pipes against the loopback model server."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from tests.fixtures.driver import Daemon, DaemonFactory, open_session, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually, until

SMALL_OUTPUT = {"maxTokens": 100}  # the output allowance of every call


def notes(daemon: Daemon, method: str) -> list[dict[str, Any]]:
    return [m["params"] for m in daemon.protocol.received if m.get("method") == method]


async def test_a_turn_budget_stops_the_turn_before_the_call_that_would_pass_it(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn(options=SMALL_OUTPUT)
    model.reply(
        tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}],
        usage={"prompt_tokens": 1000, "completion_tokens": 10},
    )
    model.reply("never asked for")
    session = await open_session(daemon, workspace)

    # 1010 spent; the next call is about 1000 in plus what was added, up to 100 out.
    result = await turn(daemon, session, "read the readme", budget={"tokens": 2000})

    assert result["outcome"] == "exhausted"
    assert "turn's budget of 2000 tokens (1010 spent)" in result["error"]
    assert "nothing was sent" in result["error"]
    assert len(model.requests) == 1
    assert result["tokens"]["total"] == 1010
    assert result["spent"] == {"tokens": 1010, "usd": None}
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert [s["decision"] for s in steps] == ["tool"]


async def test_a_session_budget_holds_across_turns_and_after_a_reopen(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    daemon = await spawn(options=SMALL_OUTPUT)
    session = await open_session(daemon, workspace, budget={"tokens": 3500})
    assert session["budget"] == {"tokens": 3500}
    assert session["spent"] == {"tokens": 0, "usd": 0}
    model.reply("first answer", usage={"prompt_tokens": 1000, "completion_tokens": 2000})

    first = await turn(daemon, session, "first")
    second = await turn(daemon, session, "second")

    assert first["outcome"] == "finished" and first["spent"]["tokens"] == 3000
    assert second["outcome"] == "exhausted"
    assert "session's budget of 3500 tokens (3000 spent)" in second["error"]
    assert len(model.requests) == 1

    other = await spawn(db=daemon.db, options=SMALL_OUTPUT)
    await daemon.call("session/close", {"sessionId": session["sessionId"]})
    reopened = await other.call("session/reopen", {"sessionId": session["sessionId"]})
    assert reopened["budget"] == {"tokens": 3500}
    assert reopened["spent"]["tokens"] == 3000
    third = await turn(other, session, "third")
    assert third["outcome"] == "exhausted" and len(model.requests) == 1

    raised = await other.call(
        "session/budget", {"sessionId": session["sessionId"], "budget": {"tokens": 100_000}}
    )
    assert raised["budget"] == {"tokens": 100_000} and raised["spent"]["tokens"] == 3000
    fourth = await turn(other, session, "fourth")
    assert fourth["outcome"] == "finished" and len(model.requests) == 2


async def test_a_usd_budget_is_priced_and_an_unknown_price_stops_the_turn(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"priced-model": {"input": 500.0, "output": 500.0}}))
    daemon = await spawn(env={"TRELLISD_PRICES": str(prices)}, options=SMALL_OUTPUT)
    session = await open_session(daemon, workspace, budget={"usd": 1.5})
    model.reply("priced", usage={"prompt_tokens": 1800, "completion_tokens": 200})

    unknown = await turn(daemon, session, "hello")
    priced = await turn(daemon, session, "hello", model="priced-model")
    over = await turn(daemon, session, "again", model="priced-model")

    assert (
        unknown["outcome"] == "exhausted" and "price of test-model is unknown" in unknown["error"]
    )
    assert priced["outcome"] == "finished" and priced["spent"]["usd"] == 1.0
    assert over["outcome"] == "exhausted" and "session's budget of $1.5" in over["error"]
    assert len(model.requests) == 1


async def test_queued_prompts_run_in_order_after_the_running_turn(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    gate = threading.Event()
    first = model.reply("first reply", hold=gate)
    model.reply("second reply")
    model.reply("third reply")
    model.reply("fourth reply")
    session = await open_session(daemon, workspace)
    sid = session["sessionId"]
    running = asyncio.ensure_future(turn(daemon, session, "one"))
    await until(first.served, "the first model call arrives")

    refused = await daemon.error("session/turn", {"sessionId": sid, "prompt": "not queued"})
    assert refused.code == -32020
    queued = [
        asyncio.ensure_future(turn(daemon, session, prompt, queue=True))
        for prompt in ("two", "three", "four")
    ]
    await eventually(lambda: len(notes(daemon, "session/queued")) == 3, "three prompts queued")
    waiting = await daemon.call("session/queue", {"sessionId": sid})
    assert [(q["prompt"], q["position"]) for q in waiting["queued"]] == [
        ("two", 1),
        ("three", 2),
        ("four", 3),
    ]
    assert [n["position"] for n in notes(daemon, "session/queued")] == [1, 2, 3]
    assert len(model.requests) == 1

    gate.set()
    results = [await running, *[await q for q in queued]]

    assert [r["reply"] for r in results] == [
        "first reply",
        "second reply",
        "third reply",
        "fourth reply",
    ]
    assert [r["outcome"] for r in results] == ["finished"] * 4
    assert [model.user_messages(n)[-1] for n in range(4)] == ["one", "two", "three", "four"]
    history = (await daemon.call("session/history", {"sessionId": sid}))["turns"]
    assert [t["prompt"] for t in history] == ["one", "two", "three", "four"]
    assert [n["reason"] for n in notes(daemon, "session/dequeued")] == ["started"] * 3
    assert (await daemon.call("session/queue", {"sessionId": sid}))["queued"] == []


async def test_an_unqueued_prompt_never_runs_and_its_request_says_so(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    gate = threading.Event()
    first = model.reply("first reply", hold=gate)
    model.reply("third reply")
    session = await open_session(daemon, workspace)
    sid = session["sessionId"]
    running = asyncio.ensure_future(turn(daemon, session, "one"))
    await until(first.served, "the first model call arrives")
    second = asyncio.ensure_future(
        daemon.error("session/turn", {"sessionId": sid, "prompt": "two", "queue": True})
    )
    third = asyncio.ensure_future(turn(daemon, session, "three", queue=True))
    await eventually(lambda: len(notes(daemon, "session/queued")) == 2, "two prompts queued")
    queue_id = notes(daemon, "session/queued")[0]["queueId"]

    dropped = await daemon.call("session/unqueue", {"sessionId": sid, "queueId": queue_id})
    error = await second
    again = await daemon.error("session/unqueue", {"sessionId": sid, "queueId": queue_id})

    assert dropped == {"sessionId": sid, "queueId": queue_id, "dropped": True}
    assert error.code == -32800 and "dropped from the queue" in error.message
    assert error.data == {"sessionId": sid, "queueId": queue_id}
    assert again.code == -32010
    waiting = await daemon.call("session/queue", {"sessionId": sid})
    assert [(q["prompt"], q["position"]) for q in waiting["queued"]] == [("three", 1)]
    gate.set()
    assert (await running)["reply"] == "first reply"
    assert (await third)["reply"] == "third reply"
    assert [model.user_messages(n)[-1] for n in range(len(model.requests))] == ["one", "three"]


async def test_a_cancel_stops_the_running_turn_and_the_queue_runs_on(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    gate = threading.Event()
    first = model.reply("a long first reply", hold=gate, hold_at=1)
    model.reply("second reply")
    model.reply("third reply")
    session = await open_session(daemon, workspace)
    sid = session["sessionId"]
    running = asyncio.ensure_future(turn(daemon, session, "one"))
    await until(first.served, "the first model call arrives")
    queued = [
        asyncio.ensure_future(turn(daemon, session, prompt, queue=True))
        for prompt in ("two", "three")
    ]
    await eventually(lambda: len(notes(daemon, "session/queued")) == 2, "two prompts queued")

    cancelled = await daemon.call("session/cancel", {"sessionId": sid})

    assert cancelled["cancelled"] is True
    assert (await running)["outcome"] == "cancelled"
    second, third = [await q for q in queued]
    assert (second["outcome"], second["reply"]) == ("finished", "second reply")
    assert (third["outcome"], third["reply"]) == ("finished", "third reply")
    assert [model.user_messages(n)[-1] for n in range(3)] == ["one", "two", "three"]


async def test_a_model_with_no_known_price_spends_an_unknown_amount_not_nothing(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    model.reply("an answer", usage={"prompt_tokens": 1000, "completion_tokens": 20})
    session = await open_session(daemon, workspace, budget={"tokens": 100_000})
    assert session["spent"] == {"tokens": 0, "usd": 0}  # nothing spent yet: known

    result = await turn(daemon, session, "what is here?")
    reopened = await daemon.call("session/reopen", {"sessionId": session["sessionId"]})

    assert result["model"] == "test-model" and result["cost"] is None
    assert result["spent"] == {"tokens": 1020, "usd": None}
    assert reopened["spent"] == {"tokens": 1020, "usd": None}
    assert [u["cost"] for u in daemon.usages] == [{"turn": None, "session": None}]
