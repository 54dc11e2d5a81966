"""The wire as the protocol document promises it: whatever the editor does, every request gets
one answer, every message validates, and what is recorded does not depend on the pipes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests import protocol_schema
from tests.e2e.conftest import TEST_KEY, DaemonFactory, Pipes
from tests.fixtures.driver import open_session, turn
from tests.fixtures.model_server import ModelServer

WRITE = {"name": "write_file", "arguments": {"path": "late.txt", "content": "x"}}


async def test_an_editor_killed_mid_turn_leaves_the_turn_cancelled_and_stderr_quiet(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    db = tmp_path / "store" / "trellisd.db"
    editor = await Pipes.start(db, model)
    await editor.initialize()
    session = await editor.call("session/open", {"root": str(workspace)})
    model.reply("", tool_calls=[WRITE])
    editor.request("session/turn", {"sessionId": session["sessionId"], "prompt": "write"})
    while (await asyncio.wait_for(editor.read(), 30)).get("method") != "session/requestApproval":
        pass
    editor.hang_up()  # the editor is killed while the turn waits for its answer

    code, stderr = await editor.stderr_after_exit()
    assert "Traceback" not in stderr and "Error" not in stderr, stderr
    assert code == 1  # no shutdown came first

    after = await spawn(db=db)
    turns = (await after.call("session/turns", {"sessionId": session["sessionId"]}))["turns"]
    assert [t["outcome"] for t in turns] == ["cancelled"]
    assert "error" not in turns[0]
    assert not (workspace / "late.txt").exists()


async def test_an_approval_answered_after_shutdown_still_ends_its_turn(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    asked, answer = asyncio.Event(), asyncio.Event()

    async def approve_later(ls: Any, params: dict[str, Any]) -> dict[str, str]:
        asked.set()
        await answer.wait()
        return {"decision": "allow"}

    daemon.client.feature("session/requestApproval")(approve_later)
    session = await open_session(daemon, workspace)
    model.reply("", tool_calls=[WRITE])
    model.reply("Written.")
    running = asyncio.ensure_future(turn(daemon, session, "write"))
    await asyncio.wait_for(asked.wait(), 30)
    assert await daemon.protocol.send_request_async("shutdown", None) is None
    answer.set()

    result = await asyncio.wait_for(running, 30)
    assert result["outcome"] == "finished"
    assert result["reply"] == "Written."
    assert (workspace / "late.txt").read_text() == "x"
    daemon.protocol.notify("exit", None)
    assert await asyncio.wait_for(daemon.process.wait(), 30) == 0


ABSENT = object()

# Every request shape the protocol pages document, at the edges: params left out, null, [],
# optional fields set to null, and every documented initializationOptions key.
DOCUMENTED: list[tuple[str, Any]] = [
    ("session/list", ABSENT),
    ("session/list", None),
    ("session/list", {}),
    ("session/list", []),
    ("session/list", {"root": None, "limit": None, "cursor": None}),
    ("session/list", {"root": "/", "limit": 5}),
    ("session/open", {"root": "{root}", "title": None, "provider": None, "policy": None}),
    (
        "session/open",
        {
            "root": "{root}",
            "title": "t",
            "provider": {
                "name": "openai",
                "model": None,
                "baseUrl": None,
                "temperature": None,
                "maxTokens": None,
                "maxRetries": None,
                "retryBudget": None,
                "readTimeout": None,
            },
        },
    ),
    ("session/open", {"root": "{root}", "policy": {"approval": None, "layers": []}}),
    ("session/history", {"sessionId": "{session}"}),
    ("session/history", {"sessionId": "{session}", "limit": 10, "cursor": None}),
    ("session/turns", {"sessionId": "{session}"}),
    ("session/turns", {"sessionId": "{session}", "limit": None, "cursor": None}),
    ("session/reopen", {"sessionId": "{session}"}),
    ("session/reopen", {"sessionId": "{session}", "limit": 20}),
    ("session/policy", {"sessionId": "{session}"}),
    (
        "session/turn",
        {
            "sessionId": "{session}",
            "prompt": "hi",
            "model": None,
            "temperature": None,
            "maxSteps": None,
            "verify": None,
        },
    ),
    ("session/turn", {"sessionId": "{session}", "prompt": "hi", "verify": {"argv": ["true"]}}),
    ("session/commands", {"sessionId": "{session}"}),
    ("session/branch", {"sessionId": "{session}", "turnId": None}),
    ("session/cancel", {"sessionId": "{session}"}),
    ("session/steer", {"sessionId": "{session}", "text": "t", "clientMsgId": None}),
    ("session/takeover", {"sessionId": "{session}"}),
    ("session/list", {"query": None}),
    ("session/list", {"query": "hi", "root": "/", "limit": 5}),
    ("session/export", {"sessionId": "{session}", "path": "{export}"}),
    ("session/import", {"path": "{export}", "root": None, "asNew": None}),
    ("session/import", {"path": "{export}", "root": "{root}", "asNew": True}),
    ("run/summary", {"runId": "r-unknown"}),
    ("run/steps", {"runId": "r-unknown"}),
    ("run/events", {"runId": "r-unknown"}),
    ("initialize", {"capabilities": {}, "initializationOptions": None}),
    (
        "initialize",
        {
            "capabilities": {},
            "initializationOptions": {
                "name": "openai",
                "provider": None,
                "model": "test-model",
                "baseUrl": None,
                "apiKey": None,
                "script": None,
                "temperature": None,
                "maxTokens": None,
                "maxRetries": 2,
                "retryBudget": 10,
                "readTimeout": 60.5,
            },
        },
    ),
]
# Codes that say the daemon took the request's shape (the others say it did not).
SHAPE_REFUSED = (-32600, -32601, -32602)


def _fill(value: Any, names: dict[str, str]) -> Any:
    if isinstance(value, str):
        return names.get(value, value)
    if isinstance(value, dict):
        return {k: _fill(v, names) for k, v in value.items()}
    return value


async def test_every_documented_request_shape_validates_and_is_accepted(
    model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    editor = await Pipes.start(tmp_path / "store.db", model)
    try:
        await editor.initialize()
        session = await editor.call("session/open", {"root": str(workspace)})
        names = {
            "{root}": str(workspace),
            "{session}": session["sessionId"],
            "{export}": str(tmp_path / "session.trellisd"),
        }
        refused = []
        for method, params in DOCUMENTED:
            if params is not ABSENT:
                protocol_schema.check("requests", method, "params", params)
            editor._next_id += 1
            message: dict[str, Any] = {"id": editor._next_id, "method": method}
            if params is not ABSENT:
                message["params"] = _fill(params, names)
            editor.send(message)
            answer = await asyncio.wait_for(editor.answer(editor._next_id), 30)
            if answer.get("error", {}).get("code") in SHAPE_REFUSED:
                refused.append((method, params, answer["error"]["message"]))
        assert refused == []
    finally:
        await editor.stop()


@pytest.mark.parametrize("method", ["textDocument/didOpen", "initialized", "session/nonsense"])
async def test_every_request_gets_one_answer_and_client_mistakes_are_not_errors_in_the_log(
    model: ModelServer, tmp_path: Path, method: str
) -> None:
    editor = await Pipes.start(tmp_path / "store.db", model)
    await editor.initialize()
    msg_id = editor.request(method, {})
    answer = await asyncio.wait_for(editor.answer(msg_id), 30)
    assert answer["error"]["code"] == -32601
    assert method in answer["error"]["message"]
    protocol_schema.check_error(answer["error"])
    assert "sessions" in await editor.call("session/list")
    code, stderr = await editor.stop()
    assert code == 0
    assert stderr == ""


async def test_the_api_key_never_reaches_the_debug_log(
    model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    secret = "sk-option-9d2e-never-logged"
    editor = await Pipes.start(tmp_path / "store.db", model, "--log-level", "debug")
    await editor.initialize({"apiKey": secret, "model": "test-model"})
    session = await editor.call("session/open", {"root": str(workspace)})
    result = await editor.call("session/turn", {"sessionId": session["sessionId"], "prompt": "hi"})
    assert result["outcome"] == "finished"
    assert model.headers[-1].get("authorization") == f"Bearer {secret}"
    code, stderr = await editor.stop()
    assert code == 0
    assert "initializationOptions" in stderr or "Initialize" in stderr  # it did log at debug
    assert secret not in stderr
    assert TEST_KEY not in stderr
