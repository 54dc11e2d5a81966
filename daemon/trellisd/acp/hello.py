"""The answer to ACP's ``initialize``: what ``TrellisAgent.initialize`` answers, and what
``trellisd acp`` answers to a first ``initialize`` before it loads the store and the agent
loop, so that an editor sees the agent ready as soon as the process runs."""

from __future__ import annotations

import json
from typing import Any

from .. import __version__

PROTOCOL_VERSION = 1


def capabilities() -> dict[str, Any]:
    """``initialize``'s result: ACP v1, loading sessions, listing, resuming and forking them,
    embedded context in prompts, MCP servers over stdio and streamable HTTP, no sign-in."""
    return {
        "protocolVersion": PROTOCOL_VERSION,
        "agentCapabilities": {
            "loadSession": True,
            "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
            "mcpCapabilities": {"http": True, "sse": False, "acp": False},
            "sessionCapabilities": {"list": {}, "fork": {}, "resume": {}},
            "auth": {},
        },
        "authMethods": [],
        "agentInfo": {"name": "trellisd", "title": "trellisd", "version": __version__},
    }


def answer_early(line: bytes) -> tuple[bytes, tuple[bool, bool]] | None:
    """When ``line`` is a well-formed ``initialize`` request: the answer to write, and whether
    the client reads and writes text files for the agent. None for anything else, which the
    connection then reads and answers as usual."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "initialize":
        return None
    ident, params = message.get("id"), message.get("params")
    if not isinstance(ident, int | str) or isinstance(ident, bool) or not isinstance(params, dict):
        return None
    version = params.get("protocolVersion")
    if not isinstance(version, int) or isinstance(version, bool):
        return None
    answer = {"jsonrpc": "2.0", "id": ident, "result": capabilities()}
    line = (json.dumps(answer, separators=(",", ":")) + "\n").encode()
    return line, offered(params.get("clientCapabilities"))


def offered(capabilities: Any) -> tuple[bool, bool]:
    """Whether the client reads and writes text files for the agent, as ``initialize``'s
    ``clientCapabilities`` say."""
    fs = capabilities.get("fs") if isinstance(capabilities, dict) else None
    if not isinstance(fs, dict):
        return False, False
    return fs.get("readTextFile") is True, fs.get("writeTextFile") is True
