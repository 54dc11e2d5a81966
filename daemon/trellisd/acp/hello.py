"""The answer to ACP's ``initialize``: what ``TrellisAgent.initialize`` answers, and what
``trellisd acp`` answers to a first ``initialize`` before it loads the store and the agent
loop, so that an editor sees the agent ready as soon as the process runs."""

from __future__ import annotations

import json

from .. import __version__
from ..convert import structure, unstructure
from ..errors import InvalidParams
from . import wire

PROTOCOL_VERSION = 1


def capabilities() -> wire.InitializeResult:
    """``initialize``'s result: ACP v1, loading sessions, listing, resuming and forking them,
    images and embedded context in prompts, MCP servers over stdio and streamable HTTP, no
    sign-in."""
    return wire.InitializeResult(
        protocol_version=PROTOCOL_VERSION,
        agent_capabilities=wire.AgentCapabilities(
            load_session=True,
            prompt_capabilities=wire.PromptCapabilities(
                image=True, audio=False, embedded_context=True
            ),
            mcp_capabilities=wire.McpCapabilities(http=True, sse=False, acp=False),
            session_capabilities=wire.SessionCapabilities(
                list=wire.Capability(), fork=wire.Capability(), resume=wire.Capability()
            ),
            auth=wire.Capability(),
        ),
        auth_methods=(),
        agent_info=wire.Implementation("trellisd", __version__, "trellisd"),
    )


def answer_early(line: bytes) -> tuple[bytes, wire.Initialize] | None:
    """When ``line`` is a well-formed ``initialize`` request: the answer to write, and the
    request (what the client offers the agent: its files, its terminals). None for anything
    else, which the connection then reads and answers as usual."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    ident, params = message.get("id"), message.get("params")
    if not isinstance(ident, int | str) or isinstance(ident, bool) or not isinstance(params, dict):
        return None
    try:
        asked = structure(params, wire.Initialize)
    except InvalidParams:
        return None
    answer = {"jsonrpc": "2.0", "id": ident, "result": unstructure(capabilities())}
    line = (json.dumps(answer, separators=(",", ":")) + "\n").encode()
    return line, asked
