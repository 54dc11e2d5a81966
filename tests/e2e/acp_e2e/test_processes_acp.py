"""A process the model starts (``start_process``) runs in the editor's terminal when the ACP
client offers ``terminal``: the call embeds the terminal, the model reads what it printed
from there, and stopping it kills and releases the terminal."""

from __future__ import annotations

import sys
from pathlib import Path

from acp import text_block

from tests.e2e.acp_e2e.conftest import Agent, AgentFactory
from tests.fixtures.model_server import ModelServer
from tests.fixtures.waits import eventually

PRINTS = "import time; print('ready', flush=True); time.sleep(300)"


def embedded(agent: Agent, session_id: str) -> list[str]:
    """The terminals the session's tool calls embed."""
    found = []
    for update in agent.editor.of_kind("tool_call_update", session_id):
        for content in update.content or []:
            terminal = getattr(content, "terminal_id", None)
            if terminal is not None:
                found.append(terminal)
    return found


def results(agent: Agent, session_id: str) -> list[str]:
    return [
        str(u.raw_output)
        for u in agent.editor.of_kind("tool_call_update", session_id)
        if u.raw_output
    ]


async def test_a_process_runs_in_the_editors_terminal(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp(terminal=True)
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    sid = new.session_id
    argv = [sys.executable, "-c", PRINTS]
    model.reply("", tool_calls=[{"name": "start_process", "arguments": {"argv": argv}}])
    model.reply("It runs.")
    await agent.editor.answers.put("allow")
    first = await agent.conn.prompt(session_id=sid, prompt=[text_block("start it")])
    assert first.stop_reason == "end_turn"
    assert agent.editor.terminals.asked[0] == "terminal/create"
    assert embedded(agent, sid) == ["term-1", "term-1"]  # while it runs, and once it answered
    [started] = results(agent, sid)
    process_id = started.split()[2].rstrip(":")
    terminal = agent.editor.terminals.open["term-1"]
    await eventually(lambda: b"ready" in terminal.output, "the terminal shows its first line")

    model.reply(
        "", tool_calls=[{"name": "read_process_output", "arguments": {"processId": process_id}}]
    )
    model.reply("", tool_calls=[{"name": "stop_process", "arguments": {"processId": process_id}}])
    model.reply("Stopped.")
    second = await agent.conn.prompt(session_id=sid, prompt=[text_block("read it, stop it")])
    assert second.stop_reason == "end_turn"
    _, read, stopped = results(agent, sid)
    assert "still running" in read and "\nready\n" in read
    assert "killed by signal 9" in stopped
    asked = agent.editor.terminals.asked
    assert asked.index("terminal/kill") < asked.index("terminal/release")
    assert agent.editor.terminals.open == {}
