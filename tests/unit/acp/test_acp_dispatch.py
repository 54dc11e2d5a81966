"""The ACP agent's method table served in-process over real services: params are typed once,
at ``dispatch``; a missing field or one of the wrong type is a -32602 naming it, a field the
agent does not know (``_meta`` among them) is ignored, and each answer is ACP's shape."""

from __future__ import annotations

from typing import Any

import pytest

from tests import acp_schema
from trellisd.acp.agent import METHODS, TrellisAgent
from trellisd.acp.rpc import RpcError


async def answer(agent: TrellisAgent, ident: int, method: str, params: Any) -> Any:
    """What the agent answers, checked against the ACP schema as the client would read it."""
    result = await agent.dispatch(method, params, False)
    if acp_schema.available():
        acp_schema.check({"jsonrpc": "2.0", "id": ident, "result": result})
    return result


async def refusal(agent: TrellisAgent, method: str, params: Any) -> RpcError:
    with pytest.raises(RpcError) as refused:
        await agent.dispatch(method, params, False)
    return refused.value


@pytest.mark.parametrize(
    ("method", "params", "field", "words"),
    [
        ("session/close", {}, "sessionId", "sessionId is required"),
        ("session/close", None, "sessionId", "sessionId is required"),
        ("session/close", {"sessionId": 5}, "sessionId", "must be a string, not a number"),
        ("session/close", [1], "params", "params must be an object"),
        ("initialize", {"protocolVersion": "1"}, "protocolVersion", "must be a whole number"),
        ("session/new", {"cwd": "/w"}, "mcpServers", "mcpServers is required"),
        ("session/new", {"cwd": "/w", "mcpServers": {}}, "mcpServers", "must be an array"),
        (
            "session/prompt",
            {"sessionId": "s", "prompt": [{"type": "video"}]},
            "prompt[0].type",
            "must be one of 'text', 'image', 'audio', 'resource_link', 'resource'",
        ),
        (
            "session/prompt",
            {"sessionId": "s", "prompt": [{"type": "text", "text": 1}]},
            "prompt[0].text",
            "must be a string, not a number",
        ),
        (
            "session/prompt",
            {"sessionId": "s", "prompt": [{"type": "resource", "resource": {"uri": "u"}}]},
            "prompt[0].resource.text",
            "is required",
        ),
        (
            "session/set_config_option",
            {"sessionId": "s", "configId": "model", "type": "boolean", "value": "x"},
            "value",
            "must be true or false, not a string",
        ),
        (
            "session/set_config_option",
            {"sessionId": "s", "configId": "model", "type": "select", "value": 1},
            "value",
            "must be a string, not a number",
        ),
        (
            "session/new",
            {"cwd": "/w", "mcpServers": [{"name": "a__b", "command": "x", "args": [], "env": []}]},
            "mcpServers[0].name",
            "without '__'",
        ),
        (
            "session/new",
            {"cwd": "/w", "mcpServers": [{"type": "sse", "name": "s", "url": "u", "headers": []}]},
            "mcpServers[0]",
            "only stdio and streamable HTTP servers are served",
        ),
    ],
)
async def test_a_missing_or_mistyped_field_is_invalid_params_naming_it(
    agent: TrellisAgent, method: str, params: Any, field: str, words: str
) -> None:
    error = await refusal(agent, method, params)
    assert error.code == -32602 and error.data == {"field": field}
    assert words in error.message and "\n" not in error.message


async def test_unknown_fields_are_ignored_and_the_answers_are_acps_shape(
    agent: TrellisAgent, root: str
) -> None:
    hello = await answer(
        agent,
        0,
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": True, "writeTextFile": "yes"}},
            "_meta": {"x": 1},
        },
    )
    assert hello["protocolVersion"] == 1 and hello["agentCapabilities"]["loadSession"] is True
    assert agent.fs == (True, False)  # a capability of the wrong type is left at its default

    new = await answer(
        agent, 1, "session/new", {"cwd": root, "mcpServers": [], "_meta": {}, "later": True}
    )
    sid = new["sessionId"]
    assert new["modes"]["currentModeId"] == "ask"
    assert [o["type"] for o in new["configOptions"]] == ["select", "select"]

    listed = await answer(agent, 2, "session/list", {"cwd": root})
    assert [s["sessionId"] for s in listed["sessions"]] == [sid]
    assert await answer(agent, 3, "session/set_mode", {"sessionId": sid, "modeId": "auto"}) == {}
    state = await answer(
        agent, 4, "session/resume", {"sessionId": sid, "cwd": root, "mcpServers": None}
    )
    assert state["modes"]["currentModeId"] == "auto"


async def test_an_mcp_server_of_no_kind_acp_names_is_left_out(
    agent: TrellisAgent, root: str
) -> None:
    servers = [{"name": "odd"}, "not a server", {"type": "http", "name": "h", "url": 5}]
    new = await answer(agent, 1, "session/new", {"cwd": root, "mcpServers": servers})
    assert new["sessionId"]


async def test_a_method_out_of_the_table_is_method_not_found(agent: TrellisAgent) -> None:
    error = await refusal(agent, "session/teleport", {})
    assert (error.code, error.data) == (-32601, {"method": "session/teleport"})
    assert (await refusal(agent, "_trellis/x", {})).data == {"method": "trellis/x"}
    assert await agent.dispatch("_trellis/x", {}, True) is None
    assert "session/cancel" not in METHODS  # a notification, never answered


async def test_a_semantic_mistake_is_invalid_params_naming_the_field(
    agent: TrellisAgent, root: str
) -> None:
    new = await answer(agent, 1, "session/new", {"cwd": root, "mcpServers": []})
    error = await refusal(
        agent, "session/set_mode", {"sessionId": new["sessionId"], "modeId": "turbo"}
    )
    assert error.code == -32602 and error.data == {"field": "modeId"}
    assert error.message == "unknown mode 'turbo'; modes: ask, acceptEdits, auto, plan, read-only"
