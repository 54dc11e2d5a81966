"""An ACP client's ``allow_always`` for a command saves the rule the daemon proposes: the
option's name says the rule, and the commands it covers run without asking again."""

from __future__ import annotations

from pathlib import Path

from acp import text_block

from tests.e2e.acp_e2e.conftest import AgentFactory
from tests.fixtures.model_server import ModelServer


async def test_allow_always_for_a_command_carries_and_saves_its_rule(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    for name in ("a.txt", "b.txt"):
        call = {"name": "run_command", "arguments": {"argv": ["touch", name]}}
        model.reply("", tool_calls=[call])
    model.reply("done")
    await agent.editor.answers.put("allowRule")
    answer = await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("touch")])
    assert answer.stop_reason == "end_turn"
    [asked] = agent.editor.asked
    always = [o for o in asked.options if o.kind == "allow_always"]
    assert [(o.option_id, o.name) for o in always] == [("allowRule", "Always allow `touch …`")]
    assert (workspace / "a.txt").exists() and (workspace / "b.txt").exists()
