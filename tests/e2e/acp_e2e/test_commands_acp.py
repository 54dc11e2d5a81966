"""Custom commands through the Python ACP SDK against ``trellisd acp``: the session's
commands arrive as ``available_commands_update`` once it is created, and a prompt that starts
with ``/name`` runs that command with the rest as its arguments."""

from __future__ import annotations

from pathlib import Path

from acp import text_block

from tests.e2e.acp_e2e.conftest import AgentFactory
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually


async def test_the_commands_are_offered_and_a_slash_prompt_runs_one(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    user = tmp_path / "home" / ".config" / "trellisd" / "commands"
    user.mkdir(parents=True)
    (user / "explain.md").write_text(
        "---\ndescription: Explain a file\nargument-hint: <path>\n---\nExplain $1 briefly."
    )
    project = workspace / ".trellisd" / "commands"
    project.mkdir(parents=True)
    (project / "release.md").write_text("Release it.")
    agent = await spawn_acp()
    sid = (await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])).session_id

    [told] = await eventually(
        lambda: agent.editor.of_kind("available_commands_update", sid), "the commands are told"
    )
    offered = [(c.name, c.description, c.input) for c in told.available_commands]
    assert [(name, description) for name, description, _ in offered] == [
        ("explain", "Explain a file"),
        ("release", "project command release"),
    ]
    assert offered[0][2].root.hint == "<path>" and offered[1][2] is None

    model.reply("It is the readme.")
    answer = await agent.conn.prompt(session_id=sid, prompt=[text_block("/explain README.md")])

    assert answer.stop_reason == "end_turn"
    assert model.requests[0]["messages"][-1]["content"] == "Explain README.md briefly."
