"""``search``: a regular expression over the files of the session root, line by line.

What git ignores is skipped: the root ``.gitignore`` and the nested ones, each relative to
its own folder, a deeper file overriding a shallower one (``!`` patterns included), as git
does. ``.git/`` is always skipped, and so are binary files, symlinks that lead out of the
root and files the context's ``may_read`` refuses. A file named in ``path`` is searched
even if git ignores it, and a folder named in ``path`` that git ignores is searched whole
(the model asked for it: ``build``, ``node_modules/lib``).
"""

from __future__ import annotations

import asyncio
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import attrs
from pathspec import GitIgnoreSpec

from ..policy.globs import GlobError, matches_path, path_pattern
from . import arguments as args
from .base import Action, ToolContext, ToolFailure, within
from .linear import LinearPattern, PatternError, compile_linear

MAX_MATCHES = 200
MAX_LINE_CHARS = 300
MAX_FILE_BYTES = 8 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192
MAX_IGNORE_FILE_BYTES = 1024 * 1024


@attrs.frozen
class SearchArguments:
    pattern: str = args.text()
    path: str | None = args.optional_text()  # the root when left out
    glob: str | None = args.optional_text()


class Search:
    name = "search"
    description = (
        "Search the files under the session root for a regular expression (RE2 syntax: "
        "Python's without backreferences and lookaround), line by line, skipping what "
        ".gitignore ignores. Answers 'path:line: text' lines. Optional path narrows to a "
        "folder or file; optional glob keeps matching paths, anchored at the root: "
        "'**/*.py' is any Python file, '*.py' those at the top, 'src/**/*.ts' under src."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "a regular expression (RE2 syntax)"},
            "path": {"type": "string", "description": "a folder or file relative to the root"},
            "glob": {"type": "string", "description": "which files to search, e.g. '**/*.py'"},
        },
        "required": ["pattern"],
    }

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        _, start, _ = self._arguments(arguments, context)
        return Action("read", context.relative(start))

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        stop = threading.Event()
        try:
            return await asyncio.to_thread(self._search, arguments, context, stop)
        except asyncio.CancelledError:
            stop.set()
            raise

    def _arguments(
        self, arguments: dict[str, Any], context: ToolContext
    ) -> tuple[SearchArguments, Path, LinearPattern]:
        given = args.read(arguments, SearchArguments)
        try:
            regex = compile_linear(given.pattern)
        except PatternError as exc:
            raise ToolFailure(
                f"pattern is not a regular expression this search can run: {exc}"
            ) from exc
        start = context.resolve(given.path or ".")
        if given.glob is not None:
            try:
                path_pattern(given.glob)
            except GlobError as exc:
                raise ToolFailure(f"glob {exc}") from exc
        return given, start, regex

    def _search(
        self, arguments: dict[str, Any], context: ToolContext, stop: threading.Event
    ) -> str:
        given, start, regex = self._arguments(arguments, context)
        glob = given.glob
        if not start.exists():
            raise ToolFailure(f"{given.path} does not exist")
        lines: list[str] = []
        cut = False
        for path in _files(start, context, glob, stop):
            for number, text in _matches(path, regex, context):
                if len(lines) == MAX_MATCHES:
                    cut = True
                    break
                if len(text) > MAX_LINE_CHARS:
                    text = text[:MAX_LINE_CHARS] + "…"
                lines.append(f"{context.relative(path)}:{number}: {text}")
            if cut or stop.is_set():
                break
        if not lines:
            where = f" under {context.relative(start)}" if start != context.real_root else ""
            among = f" in files matching {glob!r}" if glob else ""
            return f"no matches for {given.pattern!r}{where}{among}"
        if cut:
            lines.append(
                f"[cut: stopped after {MAX_MATCHES} matches; narrow the pattern, path or glob]"
            )
        return "\n".join(lines)


def _files(
    start: Path, context: ToolContext, glob: str | None, stop: threading.Event
) -> Iterator[Path]:
    """The searchable files under ``start`` (or ``start`` itself), in a stable order."""
    root = context.real_root
    ignores = _Ignores(root)

    def wanted(path: Path) -> bool:
        rel = context.relative(path)
        if glob is not None and not matches_path(glob, rel):
            return False
        real = Path(os.path.realpath(path))
        if not within(real, root) or not real.is_file():
            return False
        return context.readable(context.relative(real))

    if start.is_file():
        if wanted(start):
            yield start
        return
    # a folder named in ``path`` that git ignores is searched whole, as asked
    honour = start == root or not ignores.ignored(start, folder=True)
    for folder, dirnames, filenames in os.walk(start):
        if stop.is_set():
            return
        here = Path(folder)
        dirnames[:] = sorted(
            d
            for d in dirnames
            if d != ".git" and not (honour and ignores.ignored(here / d, folder=True))
        )
        for name in sorted(filenames):
            path = here / name
            if not (honour and ignores.ignored(path, folder=False)) and wanted(path):
                yield path


def _matches(path: Path, regex: LinearPattern, context: ToolContext) -> Iterator[tuple[int, str]]:
    try:
        f = _open_regular(Path(os.path.realpath(path)), MAX_FILE_BYTES, context)
        if f is None:
            return
        with f:
            if b"\0" in f.read(BINARY_SNIFF_BYTES):
                return
            f.seek(0)
            for number, raw in enumerate(f, 1):
                text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if regex.search(text):
                    yield number, text
    except OSError:
        return


class _Ignores:
    """The ``.gitignore`` files of a tree, read once per folder as the walk reaches it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.specs: dict[Path, GitIgnoreSpec | None] = {}

    def ignored(self, path: Path, *, folder: bool) -> bool:
        for base in path.parents:
            if not within(base, self.root):
                break
            spec = self._spec(base)
            if spec is None:
                continue
            rel = path.relative_to(base).as_posix() + ("/" if folder else "")
            include = spec.check_file(rel).include
            if include is not None:
                return include
        return False

    def _spec(self, folder: Path) -> GitIgnoreSpec | None:
        if folder not in self.specs:
            spec = None
            try:
                f = _open_regular(folder / ".gitignore", MAX_IGNORE_FILE_BYTES)
                if f is not None:
                    with f:
                        text = f.read().decode("utf-8", errors="replace")
                    spec = GitIgnoreSpec.from_lines(text.splitlines(), backend="re2")
            except (OSError, ValueError):
                pass
            self.specs[folder] = spec
        return self.specs[folder]


def _open_regular(path: Path, most: int, context: ToolContext | None = None) -> BinaryIO | None:
    """``path`` open for reading if it is a regular file of at most ``most`` bytes, else
    None. Opened without blocking and without following a symlink (through the root's
    descriptors with a ``context``: see ``ToolContext.open``), then judged by what was
    opened: a FIFO (which would block a reader for good), a device or a file swapped in
    since the walk saw it are never read."""
    flags = os.O_RDONLY | os.O_NONBLOCK
    try:
        if context is None:
            fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
        elif within(path, context.real_root):
            fd = context.open(path, flags)
        else:
            return None
    except (OSError, ToolFailure):
        return None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > most:
        os.close(fd)
        return None
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")
