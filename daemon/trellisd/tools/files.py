"""Read-only tools over the session root: ``read_file`` and ``list_dir``."""

from __future__ import annotations

import asyncio
import io
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import attrs

from . import arguments as args
from .base import Action, ToolContext, ToolFailure

MAX_READ_BYTES = 256 * 1024
MAX_ENTRIES = 1000
BINARY_SNIFF_BYTES = 8192
CHUNK_BYTES = 64 * 1024


@attrs.frozen
class ReadFileArguments:
    path: str = args.path()
    start_line: int | None = args.whole_number()
    end_line: int | None = args.whole_number()


class ReadFile:
    name = "read_file"
    description = (
        "Read a text file under the session root. Optional startLine and endLine "
        "(1-based, inclusive) select a range of lines; a large file is cut and the result "
        "says where to read on."
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

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        _, path = self._arguments(arguments, context)
        return Action("read", context.relative(path))

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        if context.editor is not None:
            given, path = self._arguments(arguments, context)
            text = await context.editor.read_text(path)
            if text is not None:  # the editor's buffer, saved or not
                data = text.encode("utf-8")
                if given.start_line is None and given.end_line is None:
                    return _whole(data[: MAX_READ_BYTES + 1])
                return _lines(io.BytesIO(data), given.start_line or 1, given.end_line, given.path)
        return await asyncio.to_thread(self._read, arguments, context)

    def _arguments(
        self, arguments: dict[str, Any], context: ToolContext
    ) -> tuple[ReadFileArguments, Path]:
        given = args.read(arguments, ReadFileArguments)
        start, end = given.start_line, given.end_line
        if start is not None and end is not None and end < start:
            raise ToolFailure(f"endLine ({end}) is before startLine ({start})")
        return given, context.resolve(given.path)

    def _read(self, arguments: dict[str, Any], context: ToolContext) -> str:
        given, path = self._arguments(arguments, context)
        shown, start, end = given.path, given.start_line, given.end_line
        try:
            fd = context.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError as exc:
            raise ToolFailure(f"{shown} does not exist") from exc
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            os.close(fd)
            if stat.S_ISDIR(info.st_mode):
                raise ToolFailure(f"{shown} is a folder; use list_dir to see what it holds")
            raise ToolFailure(f"{shown} is not a regular file")
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as f:
            if b"\0" in f.read(BINARY_SNIFF_BYTES):
                size = info.st_size
                raise ToolFailure(f"{shown} looks like a binary file ({size} bytes); not shown")
            f.seek(0)
            if start is None and end is None:
                return _whole(f.read(MAX_READ_BYTES + 1))
            return _lines(f, start or 1, end, shown)


def _whole(data: bytes) -> str:
    if not data:
        return "(empty file)"
    if len(data) <= MAX_READ_BYTES:
        return data.decode("utf-8", errors="replace")
    cut = data.rfind(b"\n", 0, MAX_READ_BYTES)
    if cut < 0:
        start = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
        return start + (
            f"\n[truncated: the file is larger than {MAX_READ_BYTES} bytes and its first line"
            " alone is longer than that; these are its first bytes]"
        )
    head = data[: cut + 1]
    lines = head.count(b"\n")
    return head.decode("utf-8", errors="replace") + (
        f"[truncated: the file is larger than {MAX_READ_BYTES} bytes; these are its first"
        f" {lines} lines; read on with startLine={lines + 1}]"
    )


def _lines(f: BinaryIO, start: int, end: int | None, shown: str) -> str:
    out: list[bytes] = []
    size = 0
    number = 0
    for number, line, whole in _bounded_lines(f, MAX_READ_BYTES):
        if number < start:
            continue
        if end is not None and number > end:
            break
        if not whole or size + len(line) > MAX_READ_BYTES:
            if not out:
                head = line[:MAX_READ_BYTES].decode("utf-8", errors="replace")
                return head + (
                    f"\n[truncated: line {number} alone is longer than {MAX_READ_BYTES} bytes;"
                    " this is its start]"
                )
            return b"".join(out).decode("utf-8", errors="replace") + (
                f"[truncated: the lines asked for are more than {MAX_READ_BYTES} bytes;"
                f" read on with startLine={number}]"
            )
        out.append(line)
        size += len(line)
    if number < start:
        return f"[{shown} has {number} lines; startLine {start} is past its end]"
    return b"".join(out).decode("utf-8", errors="replace")


def _bounded_lines(f: BinaryIO, keep: int) -> Iterator[tuple[int, bytes, bool]]:
    """The lines of ``f`` as (number, the line or its first ``keep + 1`` bytes, whether it
    is whole). The rest of a longer line is read ``CHUNK_BYTES`` at a time and dropped, so
    a file with one enormous line never sits in memory."""
    number = 0
    while line := f.readline(keep + 1):
        number += 1
        whole = line.endswith(b"\n") or len(line) <= keep
        while not whole and (rest := f.readline(CHUNK_BYTES)):
            if rest.endswith(b"\n"):
                break
        yield number, line, whole


@attrs.frozen
class ListDirArguments:
    path: str | None = args.optional_text()  # the root when left out


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

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        _, path = self._arguments(arguments, context)
        return Action("read", context.relative(path))

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        return await asyncio.to_thread(self._list, arguments, context)

    def _arguments(self, arguments: dict[str, Any], context: ToolContext) -> tuple[str, Path]:
        """The folder as the model named it, and where it really is."""
        shown = args.read(arguments, ListDirArguments).path or "."
        return shown, context.resolve(shown)

    def _list(self, arguments: dict[str, Any], context: ToolContext) -> str:
        shown, path = self._arguments(arguments, context)
        try:
            fd = context.folder(path)
        except FileNotFoundError as exc:
            raise ToolFailure(f"{shown} does not exist") from exc
        except NotADirectoryError as exc:
            raise ToolFailure(f"{shown} is not a folder") from exc
        try:
            entries = sorted(os.listdir(fd))
            names = [name + ("/" if _is_folder(fd, name) else "") for name in entries[:MAX_ENTRIES]]
        finally:
            os.close(fd)
        if len(entries) > MAX_ENTRIES:
            names.append(f"[truncated: {len(entries) - MAX_ENTRIES} more entries]")
        return "\n".join(names) if names else "(empty folder)"


def _is_folder(folder: int, name: str) -> bool:
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=folder).st_mode)
    except OSError:
        return False
