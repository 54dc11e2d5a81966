"""The walls over the wire: a command the policy allows still cannot leave them, each
command records its walls, a way out is asked of a person every time, and approval ``auto``
runs what the walls hold without asking."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from pygls.exceptions import JsonRpcException

from tests.fixtures.driver import (
    ALLOW_MCP,
    Daemon,
    DaemonFactory,
    answer_approvals,
    events,
    open_session,
    stdio,
    turn,
)
from tests.fixtures.model_server import ModelServer

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bwrap is not installed")

ALLOW_ALL = {
    "layers": [{"name": "all", "allowRead": ["**"], "allowWrite": ["**"], "allowExec": ["*"]}],
    "approval": "all",
}


def command(*argv: str, **extra: Any) -> dict[str, Any]:
    return {"name": "run_command", "arguments": {"argv": list(argv), **extra}}


async def one_command(
    daemon: Daemon, model: ModelServer, session: dict[str, Any], tool: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    model.reply("", tool_calls=[tool])
    model.reply("done")
    result = await turn(daemon, session, "run it")
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    return [s["result"] for s in steps if s.get("toolCall")][-1], result


async def test_an_allowed_command_still_cannot_write_outside_the_root(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    outside = workspace.parent / "outside.txt"
    session = await open_session(daemon, workspace, policy=ALLOW_ALL)
    said, result = await one_command(
        daemon, model, session, command("sh", "-c", f"echo in > in.txt; echo out > {outside}")
    )
    assert (workspace / "in.txt").read_text() == "in\n"
    assert not outside.exists(), said  # it wrote the walls' own /tmp, if anything
    [event] = await events(daemon, result["runId"], "sandbox")
    assert event["detail"]["sandbox"] == {
        "mode": "workspace-write",
        "network": False,
        "via": "bubblewrap",
    }
    assert event["step"] == 1


async def test_session_policy_shows_the_walls(daemon: Daemon, workspace: Path) -> None:
    session = await open_session(daemon, workspace, policy={"network": ["pypi.org:443"]})
    policy = await daemon.call("session/policy", {"sessionId": session["sessionId"]})
    assert policy["sandbox"] == "workspace-write" and policy["network"] == ["pypi.org:443"]
    walls = policy["walls"]
    assert walls["writable"][0] == str(workspace.resolve()) and "/tmp" in walls["writable"]
    assert ".git/hooks" in walls["protected"]
    assert any(path.endswith(".ssh") for path in walls["hidden"])


async def test_a_project_file_cannot_turn_the_walls_off(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    (workspace / ".trellisd.toml").write_text('sandbox = "off"\nnetwork = true\n')
    session = await open_session(daemon, workspace)
    policy = await daemon.call("session/policy", {"sessionId": session["sessionId"]})
    assert policy["sandbox"] == "workspace-write" and policy["network"] is False
    (workspace / ".trellisd.toml").write_text('sandbox = "read-only"\n')
    stricter = await open_session(daemon, workspace)
    policy = await daemon.call("session/policy", {"sessionId": stricter["sessionId"]})
    assert policy["sandbox"] == "read-only"


async def test_an_escalation_is_asked_every_time_and_allow_always_keeps_no_grant(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    outside = workspace.parent / "outside.txt"
    asked = answer_approvals(daemon, ["allowAlways", "deny"])
    session = await open_session(daemon, workspace, policy=ALLOW_ALL)
    escalate = command(
        "sh", "-c", f"echo out > {outside}", escalate=True, reason="write the shared cache"
    )
    said, result = await one_command(daemon, model, session, escalate)
    assert outside.read_text() == "out\n", said
    assert asked[0]["kind"] == "escalate"
    assert asked[0]["reason"] == "write the shared cache"
    assert asked[0]["command"] == f"sh -c 'echo out > {outside}'"
    [approval] = await events(daemon, result["runId"], "approval")
    assert approval["detail"]["kind"] == "escalate" and approval["detail"]["decision"] == (
        "allowAlways"
    )
    [walls] = await events(daemon, result["runId"], "sandbox")
    assert walls["detail"]["sandbox"] == {"mode": "off", "network": True}
    policy = await daemon.call("session/policy", {"sessionId": session["sessionId"]})
    assert policy["grants"] == []

    outside.unlink()
    said, _ = await one_command(daemon, model, session, escalate)
    assert len(asked) == 2 and said.startswith("refused: the user did not approve")
    assert not outside.exists()


async def test_auto_runs_commands_inside_the_walls_and_still_asks_for_protected_paths(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    asked = answer_approvals(daemon, ["deny"])
    layer = {"name": "all", "allowRead": ["**"], "allowWrite": ["**", ".vscode/**"]}
    policy = {"layers": [{**layer, "allowExec": ["*"]}], "approval": "auto"}
    session = await open_session(daemon, workspace, policy=policy)
    said, _ = await one_command(daemon, model, session, command("sh", "-c", "echo ok > ok.txt"))
    assert (workspace / "ok.txt").read_text() == "ok\n" and asked == []
    write = {"name": "write_file", "arguments": {"path": ".vscode/tasks.json", "content": "{}"}}
    said, _ = await one_command(daemon, model, session, write)
    assert len(asked) == 1 and asked[0]["kind"] == "tool"
    assert not (workspace / ".vscode").exists()


async def test_a_command_that_creates_a_protected_path_is_refused_and_it_is_removed(
    daemon: Daemon, model: ModelServer, workspace: Path
) -> None:
    session = await open_session(daemon, workspace, policy=ALLOW_ALL)
    said, _ = await one_command(
        daemon, model, session, command("sh", "-c", "mkdir .vscode && echo {} > .vscode/t.json")
    )
    assert said.startswith("error: refused: the command created protected paths (.vscode)")
    assert not (workspace / ".vscode").exists()
    moved = Path(said.split("they were moved to ")[1].split(",")[0])
    assert (moved / ".vscode" / "t.json").read_text() == "{}\n"


async def test_an_mcp_server_runs_inside_the_walls_unless_the_user_opts_it_out(
    daemon: Daemon, workspace: Path
) -> None:
    server = stdio()
    session = await open_session(daemon, workspace, mcpServers=[server], policy=ALLOW_MCP)
    [state] = (await daemon.call("session/tools", {"sessionId": session["sessionId"]}))["servers"]
    assert state["state"] == "running"
    assert state["sandbox"] == {"mode": "workspace-write", "network": False}
    unwalled = await open_session(
        daemon, workspace, mcpServers=[server], policy={**ALLOW_MCP, "sandbox": "off"}
    )
    listed = await daemon.call("session/tools", {"sessionId": unwalled["sessionId"]})
    assert "sandbox" not in listed["servers"][0]


async def test_initialization_options_set_the_windows_walls(
    spawn: DaemonFactory, workspace: Path
) -> None:
    daemon = await spawn(options={"sandbox": "read-only", "network": True, "model": "m"})
    session = await open_session(daemon, workspace)
    policy = await daemon.call("session/policy", {"sessionId": session["sessionId"]})
    assert (policy["sandbox"], policy["network"]) == ("read-only", True)
    own = await open_session(daemon, workspace, policy={"sandbox": "workspace-write"})
    policy = await daemon.call("session/policy", {"sessionId": own["sessionId"]})
    assert policy["sandbox"] == "workspace-write"
    with pytest.raises(JsonRpcException) as caught:
        await spawn(options={"sandbox": "none"})
    assert caught.value.message.startswith("initializationOptions.sandbox must be one of")
