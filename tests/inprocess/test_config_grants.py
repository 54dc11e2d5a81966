"""Remembered approvals: grants outlive the daemon, hold on their root, and are revoked."""

from __future__ import annotations

import os
from pathlib import Path

from tests.fixtures.driver import DaemonFactory, answer_approvals, open_session, turn, write
from tests.fixtures.model_server import ModelServer


async def test_grants_survive_a_restart_hold_on_their_root_and_are_revoked(
    spawn: DaemonFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    first = await spawn()
    answer_approvals(first, ["allowAlways", "allowAlwaysProject"])
    session = await open_session(first, workspace)
    model.reply("", tool_calls=[write("a.txt", "1")])
    model.reply("", tool_calls=[write("b.txt", "1")])
    model.reply("done")
    await turn(first, session, "write a and b")
    await first.client.shutdown_session()
    await first.client.stop()

    second = await spawn()
    asked = answer_approvals(second, ["deny"] * 4)
    policy = await second.call("session/policy", {"sessionId": session["sessionId"]})
    assert policy["grants"] == [
        {"kind": "write", "target": "a.txt", "scope": "session"},
        {"kind": "write", "target": "b.txt", "scope": "project"},
    ]
    same = await open_session(second, workspace)
    other = await open_session(second, elsewhere)
    for opened, grants in ((same, ["b.txt"]), (other, [])):
        seen = await second.call("session/policy", {"sessionId": opened["sessionId"]})
        assert [g["target"] for g in seen["grants"]] == grants
    model.reply("", tool_calls=[write("b.txt", "2")])
    model.reply("done")
    await turn(second, same, "write b again")
    assert asked == [] and (workspace / "b.txt").read_text() == "2"
    model.reply("", tool_calls=[write("b.txt", "3")])
    model.reply("done")
    await turn(second, other, "write b elsewhere")
    assert len(asked) == 1 and not (elsewhere / "b.txt").exists()

    revoked = await second.call(
        "session/revoke",
        {"sessionId": same["sessionId"], "grant": {"kind": "write", "target": "b.txt"}},
    )
    assert revoked["grants"] == []
    seen = await second.call("session/policy", {"sessionId": session["sessionId"]})
    assert seen["grants"] == [{"kind": "write", "target": "a.txt", "scope": "session"}]
    error = await second.error(
        "session/revoke",
        {"sessionId": same["sessionId"], "grant": {"kind": "write", "target": "b.txt"}},
    )
    assert error.code == -32010 and "has no grant to write b.txt" in error.message
    bad = await second.error(
        "session/revoke", {"sessionId": same["sessionId"], "grant": {"kind": "delete"}}
    )
    assert bad.code == -32602 and "grant.kind" in bad.message
    assert os.path.exists(second.db)
