"""Bad input gets a clear error, loses nothing, and the daemon keeps serving."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fixtures.driver import Daemon


@pytest.mark.parametrize(
    ("method", "params", "code", "words"),
    [
        ("session/nonsense", {}, -32601, "session/nonsense"),
        ("session/open", {}, -32602, "root is required"),
        ("session/open", {"root": 42}, -32602, "root must be a string, not a number"),
        ("session/open", {"root": "relative/path"}, -32602, "absolute"),
        ("session/open", {"root": "/no/such/folder"}, -32010, "/no/such/folder"),
        ("session/open", {"root": "/", "provider": {"name": "bogus"}}, -32602, "provider.name"),
        (
            "session/open",
            {"root": "/", "provider": {"temperature": "hot"}},
            -32602,
            "provider.temperature",
        ),
        ("session/open", ["not", "an", "object"], -32602, "params must be an object"),
        (
            "session/open",
            {"root": "/", "provider": {"maxTokens": 0}},
            -32602,
            "provider.maxTokens must be 1 or more",
        ),
        ("session/reopen", {"sessionId": "s-missing"}, -32010, "unknown session s-missing"),
        ("session/history", {"sessionId": None}, -32602, "sessionId is required"),
        ("session/turns", {"sessionId": "s-missing"}, -32010, "unknown session"),
        ("session/turn", {"sessionId": "s-missing", "prompt": "hi"}, -32010, "unknown session"),
        ("session/turn", {"sessionId": "s-x"}, -32602, "give a prompt, or a command to run"),
        ("session/turn", {"sessionId": "s-x", "prompt": "   "}, -32602, "prompt must not be empty"),
        ("session/turn", {"sessionId": "s-x", "prompt": "hi", "maxSteps": 0}, -32602, "maxSteps"),
        ("session/list", {"limit": "ten"}, -32602, "limit must be a whole number"),
        ("session/list", {"cursor": "garbage!"}, -32602, "cursor"),
        ("session/branch", {"sessionId": "s-missing"}, -32602, "turnId is required"),
        ("run/summary", {"runId": "r-missing"}, -32010, "unknown run r-missing"),
        ("run/steps", {}, -32602, "runId is required"),
        ("run/events", {"runId": True}, -32602, "runId must be a string, not a boolean"),
    ],
)
async def test_each_bad_request_gets_a_clear_error(
    daemon: Daemon, method: str, params: object, code: int, words: str
) -> None:
    error = await daemon.error(method, params)
    assert error.code == code
    assert words in error.message
    # still serving
    assert "sessions" in await daemon.call("session/list", {})


async def test_unknown_and_foreign_turns_are_named(daemon: Daemon, workspace: Path) -> None:
    a = await daemon.call("session/open", {"root": str(workspace)})
    b = await daemon.call("session/open", {"root": str(workspace)})
    turn = await daemon.call("session/turn", {"sessionId": a["sessionId"], "prompt": "hi"})

    unknown = await daemon.error(
        "session/branch", {"sessionId": a["sessionId"], "turnId": "t-nope"}
    )
    assert unknown.code == -32010 and "unknown turn t-nope" in unknown.message
    foreign = await daemon.error(
        "session/branch", {"sessionId": b["sessionId"], "turnId": turn["turnId"]}
    )
    assert foreign.code == -32602 and "belongs to another session" in foreign.message
    # Nothing moved.
    assert (await daemon.call("session/reopen", {"sessionId": b["sessionId"]}))["head"] is None
    assert (await daemon.call("session/reopen", {"sessionId": a["sessionId"]}))["head"] == turn[
        "turnId"
    ]
