"""Custom commands over ACP: ``available_commands_update`` once a session is created, loaded,
resumed or forked, and a prompt that starts with ``/name`` runs that command."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.unit.acp.test_acp_dispatch import answer
from tests.unit.acp.test_acp_thoughts import Client
from trellisd.acp.agent import TrellisAgent

FIX = """---
description: Make the tests pass
argument-hint: [test path]
maxSteps: 4
---
Make the tests in $ARGUMENTS pass.
"""


def project_command(root: str, name: str, text: str) -> None:
    folder = Path(root) / ".trellisd" / "commands"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.md").write_text(text)


def connected(agent: TrellisAgent) -> Client:
    client = Client()
    agent.notifier.connect(client)
    return client


def commands_told(client: Client) -> list[list[dict[str, Any]]]:
    return [
        u["availableCommands"]
        for u in client.updates
        if u["sessionUpdate"] == "available_commands_update"
    ]


FIX_SHOWN = {
    "name": "fix-tests",
    "description": "Make the tests pass",
    "input": {"hint": "[test path]"},
}


async def test_the_commands_follow_new_load_resume_and_fork(agent: TrellisAgent, root: str) -> None:
    project_command(root, "fix-tests", FIX)
    client = connected(agent)
    await answer(agent, 0, "initialize", {"protocolVersion": 1})
    sid = (await answer(agent, 1, "session/new", {"cwd": root, "mcpServers": []}))["sessionId"]
    await agent.notifier.flush()
    assert commands_told(client) == [[FIX_SHOWN]]

    project_command(root, "review", "Review the diff.")
    opened = {"sessionId": sid, "cwd": root, "mcpServers": []}
    await answer(agent, 2, "session/load", opened)
    await answer(agent, 3, "session/resume", opened)
    await answer(agent, 4, "session/fork", opened)
    await agent.notifier.flush()

    review = {"name": "review", "description": "project command review"}
    assert commands_told(client)[1:] == [[FIX_SHOWN, review]] * 3


async def test_a_slash_prompt_runs_the_command_with_the_rest_as_its_arguments(
    agent: TrellisAgent, root: str
) -> None:
    project_command(root, "fix-tests", FIX)
    connected(agent)
    await answer(agent, 0, "initialize", {"protocolVersion": 1})
    sid = (await answer(agent, 1, "session/new", {"cwd": root, "mcpServers": []}))["sessionId"]

    text = "/fix-tests tests/unit -x"
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    result = await answer(agent, 2, "session/prompt", prompt)

    assert result == {"stopReason": "end_turn"}
    [turn] = await agent.app.sessions.history(sid)
    assert turn.prompt == "Make the tests in tests/unit -x pass."
    [ran] = [e for e in await agent.app.runs.events(turn.run_id) if e.kind == "command"]
    assert ran.detail == {
        "name": "fix-tests",
        "source": "project",
        "arguments": "tests/unit -x",
        "settings": {"maxSteps": 4},
    }


async def test_a_slash_prompt_that_names_no_command_is_a_plain_prompt(
    agent: TrellisAgent, root: str
) -> None:
    client = connected(agent)
    await answer(agent, 0, "initialize", {"protocolVersion": 1})
    sid = (await answer(agent, 1, "session/new", {"cwd": root, "mcpServers": []}))["sessionId"]
    await agent.notifier.flush()
    assert commands_told(client) == []  # a session with no commands is told of none
    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "/usr/bin holds what?"}]}
    await answer(agent, 2, "session/prompt", prompt)
    [turn] = await agent.app.sessions.history(sid)
    assert turn.prompt == "/usr/bin holds what?"
