"""Tools that change files under the session root: ``write_file`` and ``edit_file``.

Every write is atomic: the new content goes to a temporary file in the same folder, is
flushed to disk, then replaces the target with ``os.replace``. A reader sees the old file
or the new one, never half of either, and a cancelled or failed write leaves the target as
it was. A replaced file keeps its permission bits; a new one gets the usual ones (0666
less the umask).

A daemon killed in the middle of a write leaves its temporary file behind. Its name says
whose it is (``.trellisd-write-<12 hex digits>-<name>``), and
``remove_leftover_writes(root)`` removes those under a root.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

import attrs

from . import arguments as args
from .base import Action, ToolContext, ToolFailure

TEMPORARY_PREFIX = ".trellisd-write-"
_TEMPORARY = re.compile(re.escape(TEMPORARY_PREFIX) + r"[0-9a-f]{12}-.*", re.DOTALL)


def temporary_name(name: str) -> str:
    """The name of a write's temporary file beside the file ``name``."""
    return f"{TEMPORARY_PREFIX}{secrets.token_hex(6)}-{name[:100]}"


def remove_leftover_writes(root: Path) -> list[Path]:
    """Remove the temporary files that writes interrupted by a crash left under ``root``
    (no write may be running under it); answers what was removed. Symlinks are not
    followed, and only regular files with a write's temporary name are touched."""
    removed: list[Path] = []
    for folder, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            if not _TEMPORARY.fullmatch(name):
                continue
            path = Path(folder) / name
            with contextlib.suppress(OSError):
                if stat.S_ISREG(path.lstat().st_mode):
                    path.unlink()
                    removed.append(path)
    return removed


def atomic_write(path: Path, data: bytes, context: ToolContext) -> None:
    """Write ``data`` to ``path`` (a real path from ``context.resolve``), creating its
    folders under the root; every step goes through descriptors (``ToolContext.folder``)."""
    shown = context.relative(path)
    if path == context.real_root:
        raise ToolFailure("the session root itself cannot be written as a file")
    try:
        parent = context.folder(path.parent, make=True)
    except (FileExistsError, NotADirectoryError) as exc:
        raise ToolFailure(f"cannot create the folder for {shown}: a file is in the way") from exc
    try:
        _replace(parent, path.name, data, shown)
    finally:
        os.close(parent)


def _replace(parent: int, name: str, data: bytes, shown: str) -> None:
    try:
        before = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        mode = None
    else:
        if stat.S_ISDIR(before.st_mode):
            raise ToolFailure(f"{shown} is a folder")
        mode = stat.S_IMODE(before.st_mode) if stat.S_ISREG(before.st_mode) else None
    temporary = temporary_name(name)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(temporary, flags, 0o666, dir_fd=parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        os.replace(temporary, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=parent)
        raise
    # make the rename durable; best effort, as not every file system allows it
    with contextlib.suppress(OSError):
        os.fsync(parent)


def remove_file(path: Path, context: ToolContext) -> None:
    """Remove the file ``path`` (a real path from ``context.resolve``) through descriptors,
    as ``atomic_write`` writes: a file already gone is no error."""
    if path == context.real_root:
        raise ToolFailure("the session root itself cannot be removed as a file")
    try:
        parent = context.folder(path.parent)
    except (FileNotFoundError, NotADirectoryError):
        return
    try:
        if stat.S_ISDIR(os.stat(path.name, dir_fd=parent, follow_symlinks=False).st_mode):
            raise ToolFailure(f"{context.relative(path)} is a folder")
        os.unlink(path.name, dir_fd=parent)
    except FileNotFoundError:
        pass
    finally:
        os.close(parent)


def proposed(
    tool: str, arguments: dict[str, Any], context: ToolContext
) -> tuple[Path, bytes] | None:
    """What ``write_file`` or ``edit_file`` would write with these arguments, and where;
    None for another tool, or an edit that would fail (it is then not shown)."""
    try:
        if tool == WriteFile.name:
            path, content = WriteFile()._arguments(arguments, context)
            return path, content.encode("utf-8")
        if tool == EditFile.name:
            path, data, _ = EditFile()._replace(arguments, context)
            return path, data
    except (ToolFailure, OSError):
        return None
    return None


@attrs.frozen
class WriteFileArguments:
    path: str = args.path()
    content: str = args.text(empty=True)


class WriteFile:
    name = "write_file"
    description = (
        "Write a text file under the session root, replacing it whole if it exists; "
        "missing folders are created. To change part of a file, use edit_file."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "relative to the root"},
            "content": {"type": "string", "description": "the whole new content"},
        },
        "required": ["path", "content"],
    }

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        path, _ = self._arguments(arguments, context)
        return Action("write", context.relative(path))

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        if context.editor is None:
            return await asyncio.to_thread(self._write, arguments, context)
        path, content = self._arguments(arguments, context)
        existed = path.exists()
        if not await context.editor.write_text(path, content):
            return await asyncio.to_thread(self._write, arguments, context)
        return _wrote(context.relative(path), len(content.encode("utf-8")), existed)

    def _arguments(self, arguments: dict[str, Any], context: ToolContext) -> tuple[Path, str]:
        given = args.read(arguments, WriteFileArguments)
        return context.resolve(given.path), given.content

    def _write(self, arguments: dict[str, Any], context: ToolContext) -> str:
        path, content = self._arguments(arguments, context)
        existed = path.exists()
        data = content.encode("utf-8")
        atomic_write(path, data, context)
        return _wrote(context.relative(path), len(data), existed)


def _wrote(shown: str, size: int, existed: bool) -> str:
    if existed:
        return f"wrote {shown} ({size} bytes, replacing what was there)"
    return f"created {shown} ({size} bytes)"


@attrs.frozen
class EditFileArguments:
    path: str = args.path()
    old: str = args.text()
    new: str = args.text(empty=True)


class EditFile:
    name = "edit_file"
    description = (
        "Replace one exact snippet of a text file under the session root. `old` must occur "
        "exactly once in the file, whitespace included; add surrounding lines to make it "
        "unique. `new` replaces it (an empty `new` deletes it)."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "relative to the root"},
            "old": {"type": "string", "description": "the exact text to replace"},
            "new": {"type": "string", "description": "the text to put in its place"},
        },
        "required": ["path", "old", "new"],
    }

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        path, _, _ = self._arguments(arguments, context)
        return Action("write", context.relative(path))

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        if context.editor is None:
            return await asyncio.to_thread(self._edit, arguments, context)
        path, old, new = self._arguments(arguments, context)
        shown = context.relative(path)
        _readable(context, shown)
        text = await context.editor.read_text(path)
        if text is None:
            _, data, line = await asyncio.to_thread(self._replace, arguments, context)
            text = data.decode("utf-8")
        else:
            text, line = _swap(text, old, new, shown)
        if not await context.editor.write_text(path, text):
            await asyncio.to_thread(atomic_write, path, text.encode("utf-8"), context)
        return f"edited {shown}: replaced the snippet at line {line}"

    def _arguments(self, arguments: dict[str, Any], context: ToolContext) -> tuple[Path, str, str]:
        given = args.read(arguments, EditFileArguments)
        if given.old == given.new:
            raise ToolFailure("old and new are the same; there is nothing to change")
        return context.resolve(given.path), given.old, given.new

    def _edit(self, arguments: dict[str, Any], context: ToolContext) -> str:
        path, data, line = self._replace(arguments, context)
        atomic_write(path, data, context)
        return f"edited {context.relative(path)}: replaced the snippet at line {line}"

    def _replace(self, arguments: dict[str, Any], context: ToolContext) -> tuple[Path, bytes, int]:
        """The file, its content with the snippet replaced, and the snippet's line."""
        path, old, new = self._arguments(arguments, context)
        shown = context.relative(path)
        _readable(context, shown)
        if not path.is_file():
            raise ToolFailure(
                f"{shown} does not exist" if not path.exists() else f"{shown} is not a file"
            )
        try:
            with os.fdopen(context.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    raise ToolFailure(f"{shown} is not a file")
                os.set_blocking(f.fileno(), True)
                text = f.read().decode("utf-8")
        except FileNotFoundError as exc:
            raise ToolFailure(f"{shown} does not exist") from exc
        except UnicodeDecodeError as exc:
            raise ToolFailure(f"{shown} is not UTF-8 text; it cannot be edited") from exc
        text, line = _swap(text, old, new, shown)
        return path, text.encode("utf-8"), line


def _readable(context: ToolContext, shown: str) -> None:
    if not context.readable(shown):
        # asked before anything about the file is looked at: "not found" or "edited"
        # would tell the model what a file it may not read holds, one guess at a time
        raise ToolFailure(
            f"{shown} cannot be edited: editing reads the file, and the session's policy"
            " refuses reading it"
        )


def _swap(text: str, old: str, new: str, shown: str) -> tuple[str, int]:
    """``text`` with its one ``old`` replaced by ``new``, and the line it was at."""
    count = text.count(old)
    if count == 0:
        raise ToolFailure(
            f"the snippet was not found in {shown}; read the file and copy the text exactly,"
            " whitespace included"
        )
    if count > 1:
        raise ToolFailure(
            f"the snippet occurs {count} times in {shown}; include more of the surrounding"
            " lines so that it occurs once"
        )
    at = text.index(old)
    line = text.count("\n", 0, at) + 1
    return text[:at] + new + text[at + len(old) :], line
