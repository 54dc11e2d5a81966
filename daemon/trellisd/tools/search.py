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
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pathspec import GitIgnoreSpec

from . import arguments as args
from .base import Action, ToolContext, ToolFailure, within

MAX_MATCHES = 200
MAX_LINE_CHARS = 300
MAX_FILE_BYTES = 8 * 1024 * 1024
BINARY_SNIFF_BYTES = 8192


class Search:
    name = "search"
    description = (
        "Search the files under the session root for a regular expression (Python syntax), "
        "line by line, skipping what .gitignore ignores. Answers 'path:line: text' lines. "
        "Optional path narrows to a folder or file; optional glob keeps matching file names "
        "('*.py') or paths ('src/**/*.ts')."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "a Python regular expression"},
            "path": {"type": "string", "description": "a folder or file relative to the root"},
            "glob": {"type": "string", "description": "which files to search, e.g. '*.py'"},
        },
        "required": ["pattern"],
    }

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        start, _, _ = self._arguments(arguments, context)
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
    ) -> tuple[Path, re.Pattern[str], GitIgnoreSpec | None]:
        pattern = args.text(arguments, "pattern")
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolFailure(f"pattern is not a valid regular expression: {exc}") from exc
        start = context.resolve(args.optional_text(arguments, "path") or ".")
        glob = args.optional_text(arguments, "glob")
        return start, regex, GitIgnoreSpec.from_lines([glob]) if glob else None

    def _search(
        self, arguments: dict[str, Any], context: ToolContext, stop: threading.Event
    ) -> str:
        start, regex, glob = self._arguments(arguments, context)
        if not start.exists():
            raise ToolFailure(f"{arguments.get('path')} does not exist")
        lines: list[str] = []
        cut = False
        for path in _files(start, context, glob, stop):
            for number, text in _matches(path, regex):
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
            among = f" in files matching {arguments.get('glob')!r}" if glob else ""
            return f"no matches for {regex.pattern!r}{where}{among}"
        if cut:
            lines.append(
                f"[cut: stopped after {MAX_MATCHES} matches; narrow the pattern, path or glob]"
            )
        return "\n".join(lines)


def _files(
    start: Path, context: ToolContext, glob: GitIgnoreSpec | None, stop: threading.Event
) -> Iterator[Path]:
    """The searchable files under ``start`` (or ``start`` itself), in a stable order."""
    root = context.real_root
    ignores = _Ignores(root)

    def wanted(path: Path) -> bool:
        rel = context.relative(path)
        if glob is not None and not glob.match_file(rel):
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


def _matches(path: Path, regex: re.Pattern[str]) -> Iterator[tuple[int, str]]:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return
        with path.open("rb") as f:
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
                text = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace")
            except OSError:
                pass
            else:
                spec = GitIgnoreSpec.from_lines(text.splitlines())
            self.specs[folder] = spec
        return self.specs[folder]
