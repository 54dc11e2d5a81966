"""Long sessions against the model's context window, over real pipes: compaction when a
request would pass the window, on demand and when the provider refuses a request as too
long; ``session/usage`` after each step; cached input tokens in the ledger."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.fixtures.driver import Daemon, DaemonFactory, open_session, turn
from tests.fixtures.model_server import ModelServer

# A window a request of three earlier turns of PROMPT passes at 0.8, and two do not: the
# system prompt and the tools are about 1,650 tokens, each turn about 610 (4 characters a token).
SMALL_WINDOW = 4700
TOO_LONG = json.dumps(
    {
        "error": {
            "message": "This model's maximum context length is 3500 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }
)


def prompt(n: int) -> str:
    """A long prompt of turn ``n``: its first word names it."""
    return f"turn{n} " + " ".join(f"word{i:03d}" for i in range(299))


def users(model: ModelServer, index: int) -> str:
    return "\n".join(model.user_messages(index))


async def steps_of(daemon: Daemon, run_id: str) -> list[dict]:
    return (await daemon.call("run/steps", {"runId": run_id}))["steps"]


async def events_of(daemon: Daemon, run_id: str, kind: str) -> list[dict]:
    events = (await daemon.call("run/events", {"runId": run_id}))["events"]
    return [e for e in events if e["kind"] == kind]


async def test_a_request_past_the_window_sends_a_summary_and_the_recent_turns(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, provider={"contextWindow": SMALL_WINDOW})
    turns = []
    for n in (1, 2, 3):
        model.reply(f"ok {n}")
        turns.append(await turn(daemon, session, prompt(n)))
    assert len(model.requests) == 3 and "turn1" in users(model, 2)

    model.reply("SUMMARY-ONE: the user sent turn one")
    model.reply("ok 4")
    fourth = await turn(daemon, session, prompt(4))

    # The fourth turn's request would pass 0.8 of the window: the model was asked first to
    # summarize the oldest turn, then sent the summary and the two recent turns.
    assert fourth["outcome"] == "finished" and fourth["reply"] == "ok 4"
    assert len(model.requests) == 5
    asked = users(model, 3)
    assert "turn1" in asked and "turn2" not in asked and "tools" not in model.requests[3]
    sent = users(model, 4)
    assert "SUMMARY-ONE" in sent and "turn1" not in sent
    assert all(f"turn{n}" in sent for n in (2, 3, 4))
    steps = await steps_of(daemon, fourth["runId"])
    assert [s["decision"] for s in steps] == ["compaction", "reply"]
    assert steps[0]["result"] == "SUMMARY-ONE: the user sent turn one"
    assert "turn1" in steps[0]["prompt"] and steps[0]["text"] == ""
    assert steps[0]["tokens"]["input"] > 0
    assert steps[1]["prompt"] == prompt(4)
    (compaction,) = await events_of(daemon, fourth["runId"], "compaction")
    assert compaction["step"] == 1
    assert compaction["detail"]["turns"] == 1
    assert compaction["detail"]["throughTurnId"] == turns[0]["turnId"]
    assert compaction["detail"]["contextWindow"] == SMALL_WINDOW

    # The history still holds the original turns.
    history = (await daemon.call("session/history", {"sessionId": session["sessionId"]}))["turns"]
    assert [t["prompt"] for t in history] == [prompt(n) for n in (1, 2, 3, 4)]
    assert [t["reply"] for t in history] == ["ok 1", "ok 2", "ok 3", "ok 4"]

    # The next turn of the branch compacts again, carrying the first summary forward.
    model.reply("SUMMARY-TWO: turns one and two")
    model.reply("ok 5")
    fifth = await turn(daemon, session, prompt(5))
    assert fifth["outcome"] == "finished"
    asked = users(model, 5)
    assert "SUMMARY-ONE" in asked and "turn2" in asked and "turn1" not in asked
    sent = users(model, 6)
    assert "SUMMARY-TWO" in sent and "SUMMARY-ONE" not in sent
    assert "turn2" not in sent and all(f"turn{n}" in sent for n in (3, 4, 5))

    # A branch from before the compaction point sends the original turns again.
    await daemon.call(
        "session/branch", {"sessionId": session["sessionId"], "turnId": turns[1]["turnId"]}
    )
    model.reply("ok again")
    again = await turn(daemon, session, "and now?")
    assert again["outcome"] == "finished" and len(model.requests) == 8
    sent = users(model, 7)
    assert "turn1" in sent and "turn2" in sent and "SUMMARY" not in sent
    assert [s["decision"] for s in await steps_of(daemon, again["runId"])] == ["reply"]


async def test_session_compact_summarizes_all_but_the_recent_turns(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    empty = await daemon.error("session/compact", {"sessionId": session["sessionId"]})
    assert empty.code == -32020 and "no turns" in empty.message
    turns = []
    for n in (1, 2, 3):
        model.reply(f"ok {n}")
        turns.append(await turn(daemon, session, f"turn{n} please"))

    model.reply("SUMMARY-NOW")
    result = await daemon.call("session/compact", {"sessionId": session["sessionId"]})

    assert result["compacted"] is True
    assert result["turnId"] == turns[2]["turnId"] and result["step"] == 2
    assert result["turns"] == 1 and result["summary"] == "SUMMARY-NOW"
    assert result["tokens"]["input"] > 0
    assert "turn1 please" in users(model, 3) and "turn2" not in users(model, 3)
    steps = await steps_of(daemon, turns[2]["runId"])
    assert [s["decision"] for s in steps] == ["reply", "compaction"]
    (compaction,) = await events_of(daemon, turns[2]["runId"], "compaction")
    assert compaction["detail"]["onDemand"] is True
    history = (await daemon.call("session/history", {"sessionId": session["sessionId"]}))["turns"]
    assert history[-1]["reply"] == "ok 3"

    model.reply("ok 4")
    await turn(daemon, session, "turn4 please")
    sent = users(model, 4)
    assert "SUMMARY-NOW" in sent and "turn1" not in sent
    assert all(f"turn{n} please" in sent for n in (2, 3, 4))


async def test_a_request_refused_as_too_long_is_compacted_and_sent_once_more(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    for n in (1, 2):
        model.reply(f"ok {n}")
        await turn(daemon, session, f"turn{n} please")

    model.reply(status=400, error_body=TOO_LONG)
    model.reply("SUMMARY-AFTER-REFUSAL")
    model.reply("ok 3")
    third = await turn(daemon, session, "turn3 please")

    assert third["outcome"] == "finished" and third["reply"] == "ok 3"
    assert len(model.requests) == 5  # two turns, the refused one, the summary, the retry
    assert "turn1 please" in users(model, 2)  # the refused request held everything
    sent = users(model, 4)
    assert "SUMMARY-AFTER-REFUSAL" in sent and "turn1" not in sent and "turn3 please" in sent
    steps = await steps_of(daemon, third["runId"])
    assert [s["decision"] for s in steps] == ["compaction", "reply"]
    assert steps[1]["prompt"] == "turn3 please"
    (compaction,) = await events_of(daemon, third["runId"], "compaction")
    assert compaction["detail"]["tooLong"] is True

    # Refused again after compacting: the turn ends ``error`` saying so.
    model.reply(status=400, error_body=TOO_LONG)
    model.reply("SUMMARY-AGAIN")
    model.reply(status=400, error_body=TOO_LONG)
    fourth = await turn(daemon, session, "turn4 please")
    assert fourth["outcome"] == "error"
    assert "longer than the model's context window even after compacting" in fourth["error"]
    assert "maximum context length" in fourth["error"]
    assert len(model.requests) == 8


@pytest.mark.parametrize(
    ("env", "options", "provider", "expected"),
    [
        ({}, None, None, 50_000),  # the models endpoint
        ({"TRELLISD_CONTEXT_WINDOW": "9000"}, None, None, 9000),
        ({"TRELLISD_CONTEXT_WINDOW": "9000"}, {"contextWindow": 7000}, None, 7000),
        (
            {"TRELLISD_CONTEXT_WINDOW": "9000"},
            {"contextWindow": 7000},
            {"contextWindow": 6000},
            6000,
        ),
    ],
)
async def test_the_context_window_comes_from_the_first_source_that_names_it(
    spawn: DaemonFactory,
    model: ModelServer,
    workspace: Path,
    env: dict[str, str],
    options: dict | None,
    provider: dict | None,
    expected: int,
) -> None:
    model.context_window = 50_000
    daemon = await spawn(env=env, options=options)
    extra = {} if provider is None else {"provider": provider}
    session = await open_session(daemon, workspace, **extra)
    await turn(daemon, session, "hello")
    assert daemon.usages[-1]["contextWindow"] == expected
    assert model.listings == (1 if expected == 50_000 else 0)


async def test_usage_after_each_step_counts_the_turn_and_the_session_at_their_prices(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"test-model": {"input": 2.0, "output": 8.0, "cached": 0.5}}))
    model.context_window = 20_000
    model.caching = True
    daemon = await spawn(env={"TRELLISD_PRICES": str(prices)})
    session = await open_session(daemon, workspace)
    model.reply("first answer here")
    first = await turn(daemon, session, "one two three")
    (after_first,) = daemon.usages
    assert after_first["sessionId"] == session["sessionId"]
    assert after_first["turnId"] == first["turnId"]
    assert after_first["contextWindow"] == 20_000
    reported = first["tokens"]
    assert after_first["contextTokens"] == reported["input"] + reported["output"]
    assert after_first["tokens"]["turn"]["input"] == reported["input"]
    assert after_first["tokens"]["session"] == after_first["tokens"]["turn"]
    assert after_first["cost"]["turn"] == pytest.approx(first["cost"])

    model.reply("", tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}])
    model.reply("it is a demo")
    second = await turn(daemon, session, "what is this project?")
    assert len(daemon.usages) == 3  # one after each step
    last = daemon.usages[-1]
    assert last["turnId"] == second["turnId"]
    assert last["tokens"]["turn"]["input"] == second["tokens"]["input"]
    assert last["tokens"]["turn"]["cached"] == second["tokens"]["cached"] > 0
    assert (
        last["tokens"]["session"]["input"] == first["tokens"]["input"] + second["tokens"]["input"]
    )
    assert last["cost"]["session"] == pytest.approx(first["cost"] + second["cost"])
    # Cached input is priced at the cached rate.
    t = second["tokens"]
    expected = ((t["input"] - t["cached"]) * 2.0 + t["cached"] * 0.5 + t["output"] * 8.0) / 1e6
    assert second["cost"] == pytest.approx(expected)
    assert last["cost"]["turn"] == pytest.approx(expected)
    cache = await events_of(daemon, second["runId"], "cache")
    assert cache and cache[0]["detail"]["cachedTokens"] > 0
