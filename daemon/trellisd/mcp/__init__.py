"""MCP servers: the tools users bring, offered to the model beside the built-in ones.

spec        McpServerSpec: a server as written (``session/open``, ``.trellisd.toml``,
            the config file)
connection  Connection: one live server through the ``mcp`` SDK (the one module that
            imports it); launcher.py runs a stdio server in its own process group
tools       McpTool: a server's tool as ``mcp__<server>__<tool>``, an ``exec`` of
            ``mcp:<server>/<tool>`` for the policy; names and schemas judged
servers     McpServers: each session's servers, started when a turn needs them,
            restarted after a failure, stopped with the session or the daemon
"""

from __future__ import annotations

from .servers import Approvals, McpServers, SessionServers
from .spec import Configured, McpServerSpec
from .tools import McpTool

__all__ = [
    "Approvals",
    "Configured",
    "McpServerSpec",
    "McpServers",
    "McpTool",
    "SessionServers",
]
