"""Read-only tools over the session root: ``read_file`` and ``list_dir``."""

from __future__ import annotations

import asyncio
from typing import Any

from .base import ToolContext, ToolFailure

MAX_READ_BYTES = 256 * 1024
MAX_ENTRIES = 1000


def _int(arguments: dict[str, Any], name: str) -> int | None:
    value = arguments.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ToolFailure(f"{name} must be a whole number from 1")
    return value


class ReadFile:
    name = "read_file"
    description = (
        "Read a text file under the session root. Optional startLine and endLine "
        "(1-based, inclusive) select a range of lines."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "relative to the root"},
            "startLine": {"type": "integer", "minimum": 1},
            "endLine": {"type": "integer", "minimum": 1},
        },
        "required": ["path"],
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        return await asyncio.to_thread(self._read, arguments, context)

    def _read(self, arguments: dict[str, Any], context: ToolContext) -> str:
        path = context.resolve(arguments.get("path"))
        start, end = _int(arguments, "startLine"), _int(arguments, "endLine")
        if not path.is_file():
            raise ToolFailure(f"{arguments['path']} is not a file")
        with path.open("rb") as f:
            data = f.read(MAX_READ_BYTES + 1)
        truncated = len(data) > MAX_READ_BYTES
        text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        if start is not None or end is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[(start or 1) - 1 : end])
        if truncated:
            text += (
                f"\n[truncated: the file is larger than {MAX_READ_BYTES} bytes; read a"
                " line range for the rest]"
            )
        return text


class ListDir:
    name = "list_dir"
    description = "List a folder under the session root; folders end with '/'."
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {
                "type": "string",
                "description": "relative to the root; '.' for the root itself",
            }
        },
        "required": [],
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        return await asyncio.to_thread(self._list, arguments, context)

    def _list(self, arguments: dict[str, Any], context: ToolContext) -> str:
        path = context.resolve(arguments.get("path") or ".")
        if not path.is_dir():
            raise ToolFailure(f"{arguments.get('path')} is not a folder")
        entries = sorted(path.iterdir(), key=lambda p: p.name)
        names = [p.name + ("/" if p.is_dir() else "") for p in entries[:MAX_ENTRIES]]
        if len(entries) > MAX_ENTRIES:
            names.append(f"[truncated: {len(entries) - MAX_ENTRIES} more entries]")
        return "\n".join(names) if names else "(empty folder)"
