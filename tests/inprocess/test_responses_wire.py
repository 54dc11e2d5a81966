"""A turn through the daemon on OpenAI's Responses API: a session that chooses the
``openai-responses`` wire runs a tool call, and the model sees its result with the call's id."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.driver import TOOL_POLICY, DaemonFactory, open_session, turn
from tests.fixtures.provider_servers import Response
from tests.fixtures.responses_server import ResponsesServer, reply, usage

KEY = "sk-test-responses-wire"


async def test_a_session_on_the_responses_wire_runs_a_tool_call(
    spawn: DaemonFactory, workspace: Path
) -> None:
    (workspace / "hello.py").write_text("print('hi from hello')\n")
    with ResponsesServer() as server:
        server.queue(
            Response(
                chunks=reply(
                    ["Reading it."],
                    calls=[("call_read", "read_file", {"path": "hello.py"})],
                    figures=usage(120, 20),
                )
            ),
            Response(chunks=reply(["It prints a greeting."], figures=usage(180, 8, cached=96))),
        )
        daemon = await spawn(env={"OPENAI_API_KEY": KEY})
        choice = {"name": "openai-responses", "baseUrl": server.url + "/v1", "model": "gpt-5-mini"}
        session = await open_session(daemon, workspace, policy=TOOL_POLICY, provider=choice)

        result = await turn(daemon, session, "what does hello.py print?")

    assert server.invalid == []
    assert result["outcome"] == "finished"
    assert result["reply"] == "It prints a greeting."
    assert (result["model"], result["steps"]) == ("gpt-5-mini", 2)
    tokens = {"input": 300, "output": 28, "total": 328, "cached": 96, "reasoning": 0}
    assert result["tokens"] == tokens  # the wire reports its reasoning tokens: none here
    calls = [r for r in server.requests if r.path == "/v1/responses"]
    assert len(calls) == 2
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in calls)
    assert calls[0].body["model"] == "gpt-5-mini"
    sent = calls[1].body["input"]
    (call,) = [item for item in sent if item.get("type") == "function_call"]
    (output,) = [item for item in sent if item.get("type") == "function_call_output"]
    assert (call["call_id"], call["name"]) == ("call_read", "read_file")
    assert output["call_id"] == "call_read"
    assert "print('hi from hello')" in output["output"]
    assert sent.index(call) < sent.index(output)
    steps = (await daemon.call("run/steps", {"runId": result["runId"]}))["steps"]
    assert [s["toolCall"]["id"] for s in steps if s.get("toolCall")] == ["call_read"]
