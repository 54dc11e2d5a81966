"""Sessions: open, turn, stream, branch, reopen in a new daemon, list, providers and prices."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from tests.fixtures.driver import TEST_KEY, Daemon, DaemonFactory, open_session, turn
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually, until


async def test_a_turn_streams_its_reply_before_it_answers(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, title="streaming")
    held = model.reply(
        "Hello there, this reply arrives in several pieces.", hold=threading.Event(), hold_at=2
    )
    running = asyncio.ensure_future(turn(daemon, session, "say hello"))
    # The model has sent two pieces and waits: they are on the editor's screen already.
    await eventually(
        lambda: "".join(t["text"] for t in daemon.tokens) == "Hello there, ",
        "the first pieces reach the editor while the model still streams",
    )
    assert not running.done()
    held.release()
    result = await running

    assert result["outcome"] == "finished"
    assert result["reply"] == "Hello there, this reply arrives in several pieces."
    pieces = [t for t in daemon.tokens if t["turnId"] == result["turnId"]]
    assert len(pieces) >= 2
    assert "".join(t["text"] for t in pieces) == result["reply"]
    assert all(t["runId"] == result["runId"] and t["step"] == 1 for t in pieces)
    # Every piece reached the editor before the turn's answer did.
    order = [
        m.get("method") or "answer"
        for m in daemon.protocol.received
        if m.get("method") == "session/token"
        or m.get("result", {}) is result
        or (isinstance(m.get("result"), dict) and m["result"].get("turnId") == result["turnId"])
    ]
    assert order[-1] == "answer" and order.count("session/token") == len(pieces)
    assert [s["decision"] for s in daemon.steps] == ["reply"]
    # The one window of a standalone daemon hears the turn end, just before the answer.
    ended = [m for m in daemon.protocol.received if m.get("method") == "session/turnEnded"]
    assert [m["params"]["outcome"] for m in ended] == ["finished"]
    assert ended[0]["params"]["reply"] == result["reply"]
    assert daemon.protocol.received.index(ended[0]) == len(daemon.protocol.received) - 2


async def test_tokens_and_steps_are_recorded_per_turn(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    model.reply(
        "one two three",
        usage={
            "prompt_tokens": 120,
            "completion_tokens": 3,
            "prompt_tokens_details": {"cached_tokens": 100},
        },
    )
    first = await turn(daemon, session, "first")
    model.reply("four", usage={"prompt_tokens": 140, "completion_tokens": 1})
    second = await turn(daemon, session, "second")

    assert first["tokens"] == {"input": 120, "output": 3, "total": 123, "cached": 100}
    assert second["tokens"] == {"input": 140, "output": 1, "total": 141, "cached": None}
    summary = await daemon.call("run/summary", {"runId": first["runId"]})
    assert summary["tokens"] == first["tokens"] and summary["outcome"] == "finished"
    steps = await daemon.call("run/steps", {"runId": first["runId"]})
    assert steps["steps"][0]["prompt"] == "first"
    assert steps["steps"][0]["text"] == "one two three"
    events = await daemon.call("run/events", {"runId": second["runId"]})
    assert events["events"][0]["kind"] == "model"
    assert events["events"][0]["detail"]["model"] == "test-model"


async def test_a_provider_that_reports_no_usage_leaves_the_counts_unknown(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    model.reply("no figures", usage={})
    result = await turn(daemon, session, "hi")
    assert result["tokens"] == {"input": None, "output": None, "total": None, "cached": None}


async def test_the_model_reads_a_file_with_split_arguments(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    model.reply(
        "Let me look. ", tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}]
    )
    model.reply("It is a demo project.")
    result = await turn(daemon, session, "what is this project?")

    assert result["outcome"] == "finished"
    assert result["steps"] == 2
    assert result["reply"] == "It is a demo project."  # what it said last
    assert "".join(t["text"] for t in daemon.tokens) == "Let me look. It is a demo project."
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert steps[0]["decision"] == "tool"
    assert steps[0]["toolCall"]["name"] == "read_file"
    assert steps[0]["toolCall"]["arguments"] == {"path": "README.md"}
    assert steps[0]["result"] == "# demo project\n"
    # The tool's result went back to the model in the second request.
    tool_messages = [m for m in model.requests[1]["messages"] if m["role"] == "tool"]
    assert tool_messages[0]["content"] == "# demo project\n"


async def test_reading_outside_the_root_is_refused_and_the_model_is_told(
    daemon: Daemon, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    (tmp_path / "secret.txt").write_text("top secret")
    session = await open_session(daemon, workspace)
    model.reply("", tool_calls=[{"name": "read_file", "arguments": {"path": "../secret.txt"}}])
    model.reply("I may not read that.")
    result = await turn(daemon, session, "read ../secret.txt")
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert "out of the session root" in steps[0]["result"]
    assert "top secret" not in str(model.requests[1])


async def test_branching_keeps_every_turn_and_the_model_sees_only_the_path(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    first = await turn(daemon, session, "alpha")
    second = await turn(daemon, session, "beta")
    branched = await daemon.call(
        "session/branch", {"sessionId": session["sessionId"], "turnId": first["turnId"]}
    )
    assert branched["head"] == first["turnId"]
    third = await turn(daemon, session, "gamma")

    assert model.user_messages() == ["alpha", "gamma"]
    history = await daemon.call("session/history", {"sessionId": session["sessionId"]})
    assert [t["prompt"] for t in history["turns"]] == ["alpha", "gamma"]
    assert history["turns"][1]["parentTurnId"] == first["turnId"]
    every = await daemon.call("session/turns", {"sessionId": session["sessionId"]})
    assert [t["turnId"] for t in every["turns"]] == [
        first["turnId"],
        second["turnId"],
        third["turnId"],
    ]
    assert every["turns"][1]["reply"] == "echo: beta"

    # Back to the abandoned branch: nothing was lost.
    await daemon.call(
        "session/branch", {"sessionId": session["sessionId"], "turnId": second["turnId"]}
    )
    await turn(daemon, session, "delta")
    assert model.user_messages() == ["alpha", "beta", "delta"]

    # Before the first turn: a fresh start in the same session.
    empty = await daemon.call("session/branch", {"sessionId": session["sessionId"], "turnId": None})
    assert empty["head"] is None
    await turn(daemon, session, "epsilon")
    assert model.user_messages() == ["epsilon"]
    assert (
        len((await daemon.call("session/turns", {"sessionId": session["sessionId"]}))["turns"]) == 5
    )


async def test_sessions_are_listed_newest_first_a_page_at_a_time(
    daemon: Daemon, workspace: Path, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    other.mkdir()
    ids = [
        (await open_session(daemon, workspace if i % 2 else other, title=f"s{i}"))["sessionId"]
        for i in range(5)
    ]
    page = await daemon.call("session/list", {"limit": 2})
    assert [s["sessionId"] for s in page["sessions"]] == ids[::-1][:2]
    rest = await daemon.call("session/list", {"limit": 10, "cursor": page["nextCursor"]})
    assert [s["sessionId"] for s in rest["sessions"]] == ids[::-1][2:]
    assert "nextCursor" not in rest
    only = await daemon.call("session/list", {"root": str(workspace)})
    assert {s["sessionId"] for s in only["sessions"]} == {ids[1], ids[3]}
    # Using a session moves it to the top.
    await daemon.call("session/reopen", {"sessionId": ids[0]})
    top = await daemon.call("session/list", {"limit": 1})
    assert top["sessions"][0]["sessionId"] == ids[0]
    assert top["sessions"][0]["turns"] == 0


async def test_several_sessions_run_turns_at_once(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    gate = threading.Event()
    first = model.reply("first done", hold=gate)
    second = model.reply("second done", hold=gate)
    a = await open_session(daemon, workspace)
    b = await open_session(daemon, workspace)
    turns = asyncio.gather(turn(daemon, a, "one"), turn(daemon, b, "two"))
    # Both model calls are in flight at once: neither can end before the other began.
    await until(first.served, "the first model call arrives")
    await until(second.served, "the second model call arrives while the first is held")
    gate.set()
    results = await turns
    assert sorted(r["reply"] for r in results) == ["first done", "second done"]


async def test_a_second_turn_on_a_busy_session_is_refused(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    slow = model.reply("slow", hold=threading.Event())
    session = await open_session(daemon, workspace)
    running = asyncio.ensure_future(turn(daemon, session, "one"))
    await until(slow.served, "the model call arrives")
    error = await daemon.error("session/turn", {"sessionId": session["sessionId"], "prompt": "two"})
    assert error.code == -32020 and "running turn" in error.message
    branch_error = await daemon.error(
        "session/branch", {"sessionId": session["sessionId"], "turnId": None}
    )
    assert branch_error.code == -32020
    slow.release()
    assert (await running)["reply"] == "slow"


async def test_with_no_provider_a_turn_says_which_variables_to_set(
    spawn: DaemonFactory, workspace: Path
) -> None:
    daemon = await spawn(
        env={"TRELLISD_PROVIDER": "", "TRELLISD_BASE_URL": "", "TRELLISD_API_KEY": ""}
    )
    session = await open_session(daemon, workspace)
    result = await turn(daemon, session, "hello")
    assert result["outcome"] == "error"
    assert "TRELLISD_PROVIDER" in result["error"] and "OPENAI_API_KEY" in result["error"]
    # The session goes on once the editor configures a provider.
    assert (await daemon.call("session/history", {"sessionId": session["sessionId"]}))["turns"]


async def test_a_refused_key_ends_the_turn_with_an_error_naming_its_variable(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    model.reply(status=401, error_body='{"error": {"message": "Incorrect API key provided"}}')
    session = await open_session(daemon, workspace)
    result = await turn(daemon, session, "hello")
    assert result["outcome"] == "error"
    assert "401" in result["error"] and "TRELLISD_API_KEY" in result["error"]
    assert model.headers[0]["authorization"] == f"Bearer {TEST_KEY}"
    for message in daemon.protocol.received:
        assert TEST_KEY not in str(message)
    # and the daemon keeps serving
    model.reply("fine now")
    assert (await turn(daemon, session, "again"))["reply"] == "fine now"


async def test_initialization_options_override_the_environment(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn(options={"model": "editor-model"})
    session = await open_session(daemon, workspace)
    await turn(daemon, session, "hi")
    assert model.requests[-1]["model"] == "editor-model"
    await turn(daemon, session, "hi", model="turn-model", temperature=0.5)
    assert model.requests[-1]["model"] == "turn-model"
    assert model.requests[-1]["temperature"] == 0.5


async def test_a_session_can_name_its_own_model(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, provider={"model": "session-model"})
    assert session["provider"] == {"model": "session-model"}
    await turn(daemon, session, "hi")
    assert model.requests[-1]["model"] == "session-model"


async def test_each_turn_has_a_cost_when_its_model_has_a_price(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn(env={"TRELLISD_MODEL": "gpt-4o-mini"})
    session = await open_session(daemon, workspace)
    model.reply(
        "priced",
        usage={
            "prompt_tokens": 1_000_000,
            "completion_tokens": 500_000,
            "prompt_tokens_details": {"cached_tokens": 400_000},
        },
    )
    priced = await turn(daemon, session, "hi")
    assert priced["model"] == "gpt-4o-mini"
    # gpt-4o-mini's built-in prices, USD a million tokens: 0.15 input, 0.075 cached, 0.60 output.
    assert priced["cost"] == pytest.approx(0.6 * 0.15 + 0.4 * 0.075 + 0.5 * 0.60, rel=1e-9)
    unknown = await turn(daemon, session, "hi", model="some-local-model")
    assert unknown["cost"] is None
    history = (await daemon.call("session/history", {"sessionId": session["sessionId"]}))["turns"]
    assert history[0]["cost"] == priced["cost"] and history[1]["cost"] is None


async def test_a_sessions_transport_settings_come_back_in_a_valid_session(
    spawn: DaemonFactory, workspace: Path
) -> None:
    daemon = await spawn()
    provider = {"model": "m", "maxRetries": 1, "retryBudget": 2.5, "readTimeout": 30}
    opened = await open_session(daemon, workspace, provider=provider)  # checked by the schema
    assert opened["provider"] == provider
    reopened = await daemon.call("session/reopen", {"sessionId": opened["sessionId"]})
    assert reopened["provider"] == provider
    listed = await daemon.call("session/list", None)
    assert listed["sessions"][0]["provider"] == provider
