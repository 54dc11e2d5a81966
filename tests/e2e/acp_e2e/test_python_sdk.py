"""The Python ACP SDK (``agent-client-protocol``) drives ``trellisd acp`` as an editor
would: initialize, new, prompt with streamed chunks, a tool call needing permission, cancel,
list, load with replay, resume, fork, and a prompt after the agent restarts."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest
from acp import RequestError, schema, text_block

from tests.e2e.acp_e2e.conftest import AgentFactory
from tests.fixtures.model_server import ModelServer
from tests.fixtures.reachable import reachable


async def test_initialize_says_what_trellisd_speaks(spawn_acp: AgentFactory) -> None:
    agent = await spawn_acp(initialize=False)
    answer = await agent.initialize()
    assert answer.protocol_version == 1
    caps = answer.agent_capabilities
    assert caps is not None and caps.load_session
    assert caps.prompt_capabilities is not None and caps.prompt_capabilities.embedded_context
    sessions = caps.session_capabilities
    assert sessions is not None
    assert sessions.list is not None and sessions.resume is not None and sessions.fork is not None
    assert answer.auth_methods == []


async def test_prompt_streams_chunks_and_ends_the_turn(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    assert new.modes is not None and new.modes.current_mode_id == "ask"
    held = model.reply("hello from the model, word by word", hold=threading.Event(), hold_at=2)
    prompt = asyncio.ensure_future(
        agent.conn.prompt(session_id=new.session_id, prompt=[text_block("hi there")])
    )
    await agent.wait_for(  # the two chunks sent before the hold, each as it came
        lambda: agent.editor.text(new.session_id) == "hello from ",
        "text came before the reply ended",
    )
    assert not prompt.done()
    held.release()
    answer = await prompt
    assert answer.stop_reason == "end_turn"
    assert agent.editor.text(new.session_id) == "hello from the model, word by word"
    usage = agent.editor.of_kind("usage_update", new.session_id)
    assert usage and usage[-1].size > 0
    info = agent.editor.of_kind("session_info_update", new.session_id)
    assert info and info[-1].title == "hi there"


async def test_a_write_asks_permission_and_allow_once_writes(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    model.reply(
        "writing it",
        tool_calls=[{"name": "write_file", "arguments": {"path": "a.txt", "content": "one\n"}}],
    )
    model.reply("done")
    await agent.editor.answers.put("allow")
    answer = await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("write a")])
    assert answer.stop_reason == "end_turn"
    assert (workspace / "a.txt").read_text() == "one\n"
    [asked] = agent.editor.asked
    assert [o.kind for o in asked.options] == [
        "allow_once",
        "allow_always",
        "reject_once",
        "reject_always",
    ]
    [started] = agent.editor.of_kind("tool_call", new.session_id)
    assert started.status == "pending" and started.kind == "edit"
    assert started.tool_call_id == asked.tool_call.tool_call_id
    statuses = [u.status for u in agent.editor.of_kind("tool_call_update", new.session_id)]
    assert statuses == ["in_progress", "completed"]
    final = agent.editor.of_kind("tool_call_update", new.session_id)[-1]
    [diff] = final.content
    assert diff.type == "diff" and diff.new_text == "one\n" and diff.old_text is None
    assert diff.path == str(workspace.resolve() / "a.txt")


async def test_reject_always_denies_the_same_request_without_asking(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    call = {"name": "run_command", "arguments": {"argv": ["touch", "x"]}}
    model.reply("", tool_calls=[call])
    model.reply("", tool_calls=[call])
    model.reply("gave up")
    await agent.editor.answers.put("denyAlways")
    answer = await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("touch x")])
    assert answer.stop_reason == "end_turn"
    assert len(agent.editor.asked) == 1
    assert not (workspace / "x").exists()
    failed = [u for u in agent.editor.updates if getattr(u[1], "status", None) == "failed"]
    assert len(failed) == 2


async def test_cancel_stops_the_turn_and_the_prompt_answers_cancelled(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    held = model.reply("one two three four", hold=threading.Event(), hold_at=2)
    prompt = asyncio.ensure_future(
        agent.conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
    )
    await agent.wait_for(lambda: agent.editor.text(new.session_id), "the first chunk came")
    await agent.conn.cancel(session_id=new.session_id)
    answer = await prompt
    held.release()
    assert answer.stop_reason == "cancelled"


async def test_a_prompt_while_the_turn_runs_is_a_steer(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    await agent.conn.set_session_mode(session_id=new.session_id, mode_id="auto")
    held = model.reply(
        "reading",
        tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}],
        hold=threading.Event(),
        hold_at=1,
    )
    model.reply("steered reply")
    first = asyncio.ensure_future(
        agent.conn.prompt(session_id=new.session_id, prompt=[text_block("read it")])
    )
    await agent.wait_for(lambda: agent.editor.text(new.session_id), "the first chunk came")
    second = asyncio.ensure_future(
        agent.conn.prompt(session_id=new.session_id, prompt=[text_block("and be brief")])
    )
    await agent.wait_for(lambda: any("as a steer" in line for line in agent.log), "steer queued")
    held.release()
    assert (await first).stop_reason == "end_turn"
    assert (await second).stop_reason == "end_turn"
    assert len(model.requests) == 2  # the steer went into the turn's second model call
    assert any("and be brief" in m for m in model.user_messages())


async def test_list_load_resume_fork_and_a_prompt_after_a_restart(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path, tmp_path: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    other = tmp_path / "other"
    other.mkdir()
    await agent.conn.new_session(cwd=str(other), mcp_servers=[])
    model.reply("first answer")
    await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("first question")])
    listed = await agent.conn.list_sessions(cwd=str(workspace))
    assert [s.session_id for s in listed.sessions] == [new.session_id]
    everything = await agent.conn.list_sessions()
    assert len(everything.sessions) == 2
    await agent.stop()

    again = await spawn_acp(db=agent.db)
    await again.conn.load_session(cwd=str(workspace), session_id=new.session_id, mcp_servers=[])
    assert again.editor.text(new.session_id, "user_message_chunk") == "first question"
    assert again.editor.text(new.session_id) == "first answer"
    await again.conn.resume_session(cwd=str(workspace), session_id=new.session_id)
    model.reply("second answer")
    answer = await again.conn.prompt(session_id=new.session_id, prompt=[text_block("second")])
    assert answer.stop_reason == "end_turn"
    assert "first answer" in str(model.requests[-1]["messages"])
    fork = await again.conn.fork_session(session_id=new.session_id, cwd=str(workspace))
    assert fork.session_id != new.session_id
    await again.conn.load_session(cwd=str(workspace), session_id=fork.session_id, mcp_servers=[])
    assert again.editor.text(fork.session_id, "user_message_chunk") == "first questionsecond"


async def test_unknown_session_is_an_error_naming_it(
    spawn_acp: AgentFactory, workspace: Path
) -> None:
    agent = await spawn_acp()
    with pytest.raises(RequestError) as caught:
        await agent.conn.prompt(session_id="nope", prompt=[text_block("hi")])
    assert "nope" in str(caught.value)


async def test_a_session_this_client_never_opened_is_not_prompted_nor_set(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    first = await spawn_acp()
    new = await first.conn.new_session(cwd=str(workspace), mcp_servers=[])
    await first.stop()
    other = await spawn_acp(db=first.db)
    write = {"name": "write_file", "arguments": {"path": "w.txt", "content": "x"}}
    model.reply("", tool_calls=[write])
    model.reply("wrote it")
    for attempt in (
        other.conn.set_session_mode(session_id=new.session_id, mode_id="auto"),
        other.conn.prompt(session_id=new.session_id, prompt=[text_block("write w")]),
    ):
        with pytest.raises(RequestError) as caught:
            await attempt
        assert caught.value.code == -32010 and "load or resume it first" in str(caught.value)
        assert caught.value.data == {"sessionId": new.session_id}
    assert not model.requests and not (workspace / "w.txt").exists()

    await other.conn.resume_session(cwd=str(workspace), session_id=new.session_id)
    await other.editor.answers.put("deny")
    answer = await other.conn.prompt(session_id=new.session_id, prompt=[text_block("write w")])
    assert answer.stop_reason == "end_turn"
    assert len(other.editor.asked) == 1 and not (workspace / "w.txt").exists()


async def test_the_step_cap_is_max_turn_requests_and_a_provider_failure_an_error(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp(TRELLISD_MAX_STEPS="1")
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    model.reply("", tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}])
    answer = await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("read")])
    assert answer.stop_reason == "max_turn_requests"
    model.reply(status=400, error_body='{"error": {"message": "no such model"}}')
    with pytest.raises(RequestError) as caught:
        await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("again")])
    assert "no such model" in str(caught.value)
    assert caught.value.data["outcome"] == "error"


async def test_modes_and_the_model_option(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp(TRELLISD_MODELS="test-model,other-model")
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    assert new.modes is not None
    assert [m.id for m in new.modes.available_modes] == [
        "ask",
        "acceptEdits",
        "auto",
        "plan",
        "read-only",
    ]
    option, effort = new.config_options or []
    assert option.id == "model" and option.current_value == "test-model"
    assert effort.id == "effort" and effort.current_value == "default"
    changed = await agent.conn.set_config_option(
        config_id="model", session_id=new.session_id, value="other-model"
    )
    assert changed.config_options[0].current_value == "other-model"
    await agent.conn.set_session_mode(session_id=new.session_id, mode_id="read-only")
    model.reply("", tool_calls=[{"name": "write_file", "arguments": {"path": "b", "content": "x"}}])
    model.reply("could not")
    await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("write b")])
    assert model.requests[0]["model"] == "other-model"
    assert not agent.editor.asked and not (workspace / "b").exists()
    assert agent.editor.of_kind("current_mode_update")[-1].current_mode_id == "read-only"
    await agent.conn.set_session_mode(session_id=new.session_id, mode_id="auto")
    model.reply("", tool_calls=[{"name": "write_file", "arguments": {"path": "b", "content": "x"}}])
    model.reply("wrote it")
    await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("write b")])
    assert not agent.editor.asked and (workspace / "b").read_text() == "x"
    with pytest.raises(RequestError):
        await agent.conn.set_session_mode(session_id=new.session_id, mode_id="yolo")


async def test_embedded_context_reaches_the_model(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    resource = schema.EmbeddedResourceContentBlock(
        type="resource",
        resource=schema.TextResourceContents(uri="file:///x/notes.md", text="unsaved notes"),
    )
    await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("summarize"), resource])
    [user] = model.user_messages()[-1:]
    assert "summarize" in user and "unsaved notes" in user and "file:///x/notes.md" in user


async def test_file_tools_go_through_the_client_that_offers_fs(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp(fs=True)
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    readme = str(workspace.resolve() / "README.md")
    agent.editor.buffers[readme] = "# unsaved title\n"
    model.reply("", tool_calls=[{"name": "read_file", "arguments": {"path": "README.md"}}])
    model.reply(
        "",
        tool_calls=[
            {
                "name": "edit_file",
                "arguments": {"path": "README.md", "old": "unsaved", "new": "edited"},
            }
        ],
    )
    model.reply(
        "", tool_calls=[{"name": "write_file", "arguments": {"path": ".env", "content": "k"}}]
    )
    model.reply("done")
    await agent.editor.answers.put("allow")
    await agent.editor.answers.put("deny")
    await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("retitle")])
    # The model read the editor's buffer, and the edit was made to it, through the editor.
    assert "# unsaved title" in str(model.requests[1]["messages"])
    assert agent.editor.written == [(readme, "# edited title\n")]
    # The policy still decided first: the denied write never reached the editor.
    assert not (workspace / ".env").exists()
    final = [u for u in agent.editor.of_kind("tool_call_update") if u.status == "completed"]
    [diff] = final[-1].content
    assert diff.old_text == "# demo project\n" and diff.new_text == "# edited title\n"


async def test_a_steer_the_client_cancels_before_it_is_delivered_answers_cancelled(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    held = model.reply("one two three", hold=threading.Event(), hold_at=1)
    first = asyncio.ensure_future(
        agent.conn.prompt(session_id=new.session_id, prompt=[text_block("go")])
    )
    await agent.wait_for(lambda: agent.editor.text(new.session_id), "the first chunk came")
    second = asyncio.ensure_future(
        agent.conn.prompt(session_id=new.session_id, prompt=[text_block("and more")])
    )
    await agent.wait_for(lambda: any("as a steer" in line for line in agent.log), "steer queued")
    await agent.conn.cancel(session_id=new.session_id)
    assert (await first).stop_reason == "cancelled"
    assert (await second).stop_reason == "cancelled"
    held.release()
    assert len(model.requests) == 1  # the steer never reached the model


async def test_a_new_session_starts_in_ask_unless_the_project_is_stricter(
    spawn_acp: AgentFactory, workspace: Path, tmp_path: Path
) -> None:
    agent = await spawn_acp()
    plain = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    assert plain.modes is not None and plain.modes.current_mode_id == "ask"
    strict = tmp_path / "strict"
    strict.mkdir()
    (strict / ".trellisd.toml").write_text('approval = "never"\n')
    new = await agent.conn.new_session(cwd=str(strict), mcp_servers=[])
    assert new.modes is not None and new.modes.current_mode_id == "read-only"


async def test_an_mcp_server_from_session_new_gives_the_model_its_tools(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    server = str(reachable(Path(__file__).parents[2] / "fixtures" / "mcp_server.py"))
    agent = await spawn_acp()
    stdio = schema.McpServerStdio(
        name="t",
        command=sys.executable,
        args=[server, "stdio"],
        env=[schema.EnvVariable(name="GREETING", value="hello")],
    )
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[stdio])
    model.reply("", tool_calls=[{"name": "mcp__t__echo", "arguments": {"text": "hi there"}}])
    model.reply("done")
    await agent.editor.answers.put("allow")
    answer = await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("echo")])
    assert answer.stop_reason == "end_turn"
    offered = {t["function"]["name"] for t in model.requests[0]["tools"]}
    assert "mcp__t__echo" in offered
    [asked] = agent.editor.asked
    assert asked.tool_call.title is not None and "mcp__t__echo" in asked.tool_call.title
    assert model.requests[1]["messages"][-1]["content"] == "hi there"

    sse = schema.SseMcpServer(name="s", url="http://127.0.0.1:9/sse", headers=[], type="sse")
    with pytest.raises(RequestError) as refused:
        await agent.conn.new_session(cwd=str(workspace), mcp_servers=[sse])
    assert "mcpServers[0]" in str(refused.value.data)


async def test_a_command_is_announced_when_proposed_and_its_output_shown_while_it_runs(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    await agent.conn.set_session_mode(session_id=new.session_id, mode_id="auto")
    argv = [sys.executable, "-c", "print('first line', flush=True)"]
    model.reply("", tool_calls=[{"name": "run_command", "arguments": {"argv": argv}}])
    model.reply("done")
    answer = await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("run it")])
    assert answer.stop_reason == "end_turn"
    assert agent.editor.asked == []
    [started] = agent.editor.of_kind("tool_call", new.session_id)
    assert started.status == "pending" and started.kind == "execute"
    seen = agent.editor.of_kind("tool_call_update", new.session_id)
    assert [u.status for u in seen if u.status] == ["in_progress", "completed"]
    shown = [u.content[0].content.text for u in seen if u.status is None and u.content]
    assert shown and "first line" in shown[-1]


async def test_the_mode_the_model_and_reject_always_hold_after_a_restart(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp(TRELLISD_MODELS="test-model,other-model")
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    call = {"name": "run_command", "arguments": {"argv": ["touch", "x"]}}
    model.reply("", tool_calls=[call])
    model.reply("gave up")
    await agent.editor.answers.put("denyAlways")
    await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("touch x")])
    await agent.conn.set_config_option(
        config_id="model", session_id=new.session_id, value="other-model"
    )
    await agent.conn.set_session_mode(session_id=new.session_id, mode_id="read-only")
    await agent.stop()

    again = await spawn_acp(db=agent.db, TRELLISD_MODELS="test-model,other-model")
    loaded = await again.conn.load_session(
        cwd=str(workspace), session_id=new.session_id, mcp_servers=[]
    )
    assert loaded.modes is not None and loaded.modes.current_mode_id == "read-only"
    assert [o.current_value for o in loaded.config_options or []] == ["other-model", "default"]
    await again.conn.set_session_mode(session_id=new.session_id, mode_id="ask")
    model.reply("", tool_calls=[call])
    model.reply("still not")
    answer = await again.conn.prompt(session_id=new.session_id, prompt=[text_block("touch x")])
    assert answer.stop_reason == "end_turn"
    assert not again.editor.asked and not (workspace / "x").exists()  # rejected for good
    assert model.requests[-1]["model"] == "other-model"


async def test_plan_mode_sends_the_plan_and_refuses_a_write_without_asking(
    spawn_acp: AgentFactory, model: ModelServer, workspace: Path
) -> None:
    agent = await spawn_acp()
    new = await agent.conn.new_session(cwd=str(workspace), mcp_servers=[])
    await agent.conn.set_session_mode(session_id=new.session_id, mode_id="plan")
    entries = [
        {"content": "Read app.py", "status": "completed"},
        {"content": "Write notes.md", "status": "pending", "priority": "high"},
    ]
    model.reply("", tool_calls=[{"name": "update_plan", "arguments": {"entries": entries}}])
    model.reply(
        "", tool_calls=[{"name": "write_file", "arguments": {"path": "notes.md", "content": "x"}}]
    )
    model.reply("That is the plan.")
    answer = await agent.conn.prompt(session_id=new.session_id, prompt=[text_block("plan it")])
    assert answer.stop_reason == "end_turn"
    plans = agent.editor.of_kind("plan", new.session_id)
    assert [[(e.content, e.status, e.priority) for e in p.entries] for p in plans] == [
        [("Read app.py", "completed", "medium"), ("Write notes.md", "pending", "high")]
    ]
    assert agent.editor.asked == [] and not (workspace / "notes.md").exists()
