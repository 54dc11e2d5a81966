"""An MCP server's tools as tools of the agent loop: ``mcp__<server>__<tool>``.

What a server lists is untrusted: a tool is offered only if its name is 1 to 64 letters,
digits, ``-`` and ``_`` (and the whole name, ``mcp__<server>__<tool>``, fits the 64
characters the model services take), its schema is a JSON object of type ``object`` of at
most ``MAX_SCHEMA_BYTES`` once written out, nested at most ``MAX_SCHEMA_DEPTH`` deep; its
description is cut at ``MAX_DESCRIPTION_CHARS``. A server offers at most ``MAX_TOOLS``
tools. What is left out is logged and counted (``skipped``).

A call is an ``exec`` of ``mcp:<server>/<tool>`` for the policy, so command globs judge it
(``mcp:*``, ``mcp:github/*``). Its answer is cut at ``MAX_RESULT_CHARS`` as a command's
output is.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..tools.base import Action, ToolContext, ToolFailure
from ..tools.command import MAX_OUTPUT_BYTES
from .answers import Answer, RemoteTool

log = logging.getLogger(__name__)

PREFIX = "mcp__"
TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
MAX_NAME_CHARS = 64
MAX_TOOLS = 128
MAX_SCHEMA_BYTES = 32 * 1024
MAX_SCHEMA_DEPTH = 16
MAX_DESCRIPTION_CHARS = 2000
MAX_RESULT_CHARS = MAX_OUTPUT_BYTES
MAX_ARGUMENT_BYTES = 1024 * 1024

Caller = Callable[[str, str, dict[str, Any]], Awaitable[Answer]]


def tool_name(server: str, tool: str) -> str:
    return f"{PREFIX}{server}__{tool}"


def target(server: str, tool: str) -> str:
    """The policy's target of a call: ``mcp:<server>/<tool>``."""
    return f"mcp:{server}/{tool}"


@dataclass
class McpTool:
    """One tool of one server, as the loop's ``Tool``."""

    server: str
    remote: str
    description: str
    parameters: dict[str, Any]
    call: Caller = field(repr=False)
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = tool_name(self.server, self.remote)

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        return Action("exec", target(self.server, self.remote))

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        if len(json.dumps(arguments)) > MAX_ARGUMENT_BYTES:
            raise ToolFailure(f"the arguments are larger than {MAX_ARGUMENT_BYTES} bytes")
        answer = await self.call(self.server, self.remote, arguments)
        text = cap(answer.text)
        if answer.is_error:
            raise ToolFailure(text or f"{self.name} failed and said nothing")
        return text


def cap(text: str) -> str:
    if len(text) <= MAX_RESULT_CHARS:
        return text
    half = MAX_RESULT_CHARS // 2
    dropped = len(text) - 2 * half
    return f"{text[:half]}\n[… {dropped} characters left out …]\n{text[-half:]}"


@dataclass(frozen=True)
class Offered:
    tools: list[McpTool]
    skipped: int


def offer(server: str, listed: list[RemoteTool], call: Caller) -> Offered:
    """The tools of ``listed`` fit to offer the model, and how many were left out."""
    tools: list[McpTool] = []
    seen: set[str] = set()
    skipped = 0
    for remote in listed:
        problem = _problem(server, remote, seen)
        if problem is None and len(tools) >= MAX_TOOLS:
            problem = f"the server offers more than {MAX_TOOLS} tools"
        if problem is not None:
            skipped += 1
            log.warning("MCP server %s: a tool was left out: %s", server, problem)
            continue
        seen.add(remote.name)
        description = remote.description if isinstance(remote.description, str) else ""
        if len(description) > MAX_DESCRIPTION_CHARS:
            description = description[:MAX_DESCRIPTION_CHARS] + "…"
        tools.append(McpTool(server, remote.name, description, remote.schema, call))
    return Offered(tools, skipped)


def _problem(server: str, remote: RemoteTool, seen: set[str]) -> str | None:
    name = remote.name
    if not isinstance(name, str) or not TOOL_NAME.fullmatch(name):
        return f"its name {str(name)[:80]!r} is not 1 to 64 letters, digits, '-' or '_'"
    if len(tool_name(server, name)) > MAX_NAME_CHARS:
        return f"{tool_name(server, name)} is longer than {MAX_NAME_CHARS} characters"
    if name in seen:
        return f"{name} is listed twice"
    schema = remote.schema
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return f"{name}'s input schema is not a JSON object schema of type object"
    try:
        written = json.dumps(schema)
    except (TypeError, ValueError, RecursionError):
        return f"{name}'s input schema is not JSON"
    if len(written) > MAX_SCHEMA_BYTES:
        return f"{name}'s input schema is larger than {MAX_SCHEMA_BYTES} bytes"
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        return f"{name}'s input schema is nested deeper than {MAX_SCHEMA_DEPTH}"
    return None


def _depth(value: Any) -> int:
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        deepest = max(deepest, depth)
        if isinstance(item, dict):
            todo.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            todo.extend((v, depth + 1) for v in item)
    return deepest
