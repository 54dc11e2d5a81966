"""The answer to ACP's ``initialize``, as plain JSON: what ``TrellisAgent.initialize`` answers,
and what ``trellisd acp`` answers before the ACP SDK is loaded (its pydantic models take most
of a start), so that an editor sees the agent ready as soon as the process runs."""

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
    SDK then reads and answers as usual."""
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
    caps = params.get("clientCapabilities")
    fs = caps.get("fs") if isinstance(caps, dict) else None
    offered = (
        (bool(fs.get("readTextFile")), bool(fs.get("writeTextFile")))
        if isinstance(fs, dict)
        else (False, False)
    )
    answer = {"jsonrpc": "2.0", "id": ident, "result": capabilities()}
    return (json.dumps(answer, separators=(",", ":")) + "\n").encode(), offered
