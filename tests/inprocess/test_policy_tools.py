"""Tools under a layered policy, approvals in the editor, and bounded turns."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.driver import (
    Daemon,
    DaemonFactory,
    answer_approvals,
    events,
    open_session,
    turn,
)
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import SAFETY_NET, eventually, running_with

OPEN = {
    "layers": [
        {
            "name": "project",
            "allowRead": ["**"],
            "allowWrite": ["src/**"],
            "allowExec": [f"{sys.executable} *"],
            "denyWrite": ["src/secret*"],
        }
    ],
    "approval": "all",
}


async def test_a_denied_write_is_refused_attributed_and_never_happens(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=OPEN)
    model.reply(
        "",
        tool_calls=[
            {"name": "write_file", "arguments": {"path": "src/secret.txt", "content": "x"}}
        ],
    )
    model.reply("I was not allowed.")
    result = await turn(daemon, session, "write the secret")

    assert not (workspace / "src" / "secret.txt").exists()
    refusals = await events(daemon, result["runId"], "refusal")
    assert refusals[0]["detail"]["layer"] == "project"
    assert refusals[0]["detail"]["rule"] == "src/secret*"
    assert refusals[0]["detail"]["action"] == {"kind": "write", "target": "src/secret.txt"}
    told = [m for m in model.requests[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "refused" in told and "src/secret*" in told
    step = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"][0]
    assert step["result"] == told


async def test_an_allowed_write_and_edit_happen(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=OPEN)
    model.reply(
        "",
        tool_calls=[
            {"name": "write_file", "arguments": {"path": "src/app.py", "content": "x = 1\n"}}
        ],
    )
    model.reply(
        "",
        tool_calls=[
            {
                "name": "edit_file",
                "arguments": {"path": "src/app.py", "old": "x = 1", "new": "x = 2"},
            }
        ],
    )
    model.reply("Done.")
    result = await turn(daemon, session, "write and edit")
    assert result["outcome"] == "finished"
    assert (workspace / "src" / "app.py").read_text() == "x = 2\n"
    policy = await daemon.call("session/policy", {"sessionId": session["sessionId"]})
    assert [layer["name"] for layer in policy["layers"]] == ["project"]
    assert policy["approval"] == "all"


@pytest.mark.parametrize("tool", ["read_file", "write_file"])
@pytest.mark.parametrize("route", ["dotdot", "absolute", "symlink"])
async def test_every_escape_route_is_refused(
    daemon: Daemon, model: ModelServer, workspace: Path, tmp_path: Path, tool: str, route: str
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("private")
    (workspace / "link").symlink_to(tmp_path)
    path = {"dotdot": "../outside.txt", "absolute": str(outside), "symlink": "link/outside.txt"}[
        route
    ]
    arguments = {"path": path} if tool == "read_file" else {"path": path, "content": "pwned"}
    session = await open_session(daemon, workspace, policy={"approval": "all"})
    model.reply("", tool_calls=[{"name": tool, "arguments": arguments}])
    model.reply("ok")
    result = await turn(daemon, session, "escape")
    step = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"][0]
    assert step["result"].startswith("error:") and "root" in step["result"]
    assert outside.read_text() == "private"
    assert "private" not in str(model.requests[1])


async def test_a_command_outside_allow_exec_does_not_run(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=OPEN)
    model.reply(
        "", tool_calls=[{"name": "run_command", "arguments": {"argv": ["touch", "ran.txt"]}}]
    )
    model.reply(
        "",
        tool_calls=[
            {
                "name": "run_command",
                "arguments": {"argv": [sys.executable, "-c", "print('hello from python')"]},
            }
        ],
    )
    model.reply("ok")
    result = await turn(daemon, session, "run things")
    assert not (workspace / "ran.txt").exists()
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert "refused" in steps[0]["result"]
    assert "hello from python" in steps[1]["result"] and "exit code 0" in steps[1]["result"]


async def test_ask_sends_an_approval_request_and_deny_keeps_the_file_unwritten(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    asked = answer_approvals(daemon, ["deny", "allowAlways", "allow"])
    session = await open_session(daemon, workspace)  # the default: ask before writes
    for _ in range(3):
        model.reply(
            "",
            tool_calls=[
                {"name": "write_file", "arguments": {"path": "notes.txt", "content": "hi"}}
            ],
        )
    model.reply("", tool_calls=[{"name": "run_command", "arguments": {"argv": ["true"]}}])
    model.reply("ok")
    result = await turn(daemon, session, "write notes")

    assert asked[0]["tool"] == "write_file"
    assert asked[0]["arguments"] == {"path": "notes.txt", "content": "hi"}
    assert "notes.txt" in asked[0]["summary"] and asked[0]["turnId"] == result["turnId"]
    # deny, then allowAlways (written), then no question for the same write, then a command
    assert len(asked) == 3 and asked[2]["tool"] == "run_command"
    assert (workspace / "notes.txt").read_text() == "hi"
    decisions = [e["detail"]["decision"] for e in await events(daemon, result["runId"], "approval")]
    assert decisions == ["deny", "allowAlways", "allow"]
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert "did not approve" in steps[0]["result"]


async def test_never_is_read_only(daemon: Daemon, model: ModelServer, workspace: Path) -> None:
    session = await open_session(daemon, workspace, policy={"approval": "never"})
    model.reply(
        "", tool_calls=[{"name": "write_file", "arguments": {"path": "a.txt", "content": "x"}}]
    )
    model.reply("", tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}])
    model.reply("ok")
    result = await turn(daemon, session, "try")
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert "refused" in steps[0]["result"] and not (workspace / "a.txt").exists()
    assert steps[1]["result"] == "# demo project\n"


async def test_a_project_file_adds_a_layer(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    (workspace / ".trellisd.toml").write_text(
        '[[layers]]\nname = "repo"\ndenyRead = ["secrets/**"]\n'
    )
    (workspace / "secrets").mkdir()
    (workspace / "secrets" / "key").write_text("hunter2")
    session = await open_session(daemon, workspace)
    model.reply("", tool_calls=[{"name": "read_file", "arguments": {"path": "secrets/key"}}])
    model.reply("ok")
    result = await turn(daemon, session, "read the key")
    refusal = (await events(daemon, result["runId"], "refusal"))[0]["detail"]
    assert (refusal["layer"], refusal["rule"]) == ("repo", "secrets/**")
    assert "hunter2" not in str(model.requests[1])


async def test_bad_policies_are_refused_naming_the_field(daemon: Daemon, workspace: Path) -> None:
    error = await daemon.error(
        "session/open",
        {"root": str(workspace), "policy": {"layers": [{"name": "x", "denyWrite": "src"}]}},
    )
    assert error.code == -32602 and "policy.layers[0].denyWrite" in error.message


async def test_a_check_that_passes_ends_success_after_one_model_call(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    verify = {"argv": [sys.executable, "-c", "import sys; sys.exit(0)"], "expectExit": 0}
    result = await turn(daemon, session, "nothing to do", verify=verify, maxSteps=5)
    assert result["outcome"] == "success" and len(model.requests) == 1
    checks = await events(daemon, result["runId"], "check")
    assert checks[0]["detail"]["passed"] is True


async def test_a_check_that_never_passes_ends_failure_at_its_cap_and_the_next_turn_is_free(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace)
    verify = {"argv": [sys.executable, "-c", "print('3 tests failed'); raise SystemExit(1)"]}
    result = await turn(daemon, session, "make the tests pass", verify=verify, maxSteps=3)
    assert result["outcome"] == "failure"
    assert len(model.requests) == 3
    assert "3 tests failed" in str(model.requests[1]["messages"][-1])
    assert len(await events(daemon, result["runId"], "check")) == 3
    # The bound was that turn's alone.
    free = await turn(daemon, session, "just answer")
    assert free["outcome"] == "finished" and len(model.requests) == 4
    assert await events(daemon, free["runId"], "check") == []


async def test_cancel_kills_a_running_command(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=OPEN)
    marker = workspace / "started.txt"
    token = f"slow-{os.getpid()}-{id(marker)}"  # found on the host: inside, pids are the walls'
    script = f"import time; open({str(marker)!r}, 'w').write({token!r}); time.sleep(60)"
    model.reply(
        "Running. ",
        tool_calls=[{"name": "run_command", "arguments": {"argv": [sys.executable, "-c", script]}}],
    )
    running = asyncio.ensure_future(turn(daemon, session, "run a slow thing"))
    await eventually(lambda: marker.exists() and marker.read_text(), "the command starts")
    assert running_with(token)
    await daemon.call("session/cancel", {"sessionId": session["sessionId"]})
    result = await running
    assert result["outcome"] == "cancelled" and result["reply"] == "Running. "
    await eventually(lambda: not running_with(token), "the command is killed")


async def test_cancel_withdraws_a_pending_approval(
    spawn: DaemonFactory, model: ModelServer, workspace: Path
) -> None:
    daemon = await spawn()
    waiting = asyncio.Event()

    async def never_answers(ls: Any, params: dict[str, Any]) -> dict[str, str]:
        waiting.set()
        await asyncio.Event().wait()
        return {"decision": "allow"}

    daemon.client.feature("session/requestApproval")(never_answers)
    session = await open_session(daemon, workspace)
    model.reply(
        "", tool_calls=[{"name": "write_file", "arguments": {"path": "late.txt", "content": "x"}}]
    )
    running = asyncio.ensure_future(turn(daemon, session, "write"))
    await asyncio.wait_for(waiting.wait(), SAFETY_NET)
    await daemon.call("session/cancel", {"sessionId": session["sessionId"]})
    assert (await running)["outcome"] == "cancelled"
    assert not (workspace / "late.txt").exists()
