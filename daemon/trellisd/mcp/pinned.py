"""What the user's approval of a project's MCP server covers: its command line, and the
contents of the files among its command and arguments that lie inside the session root.

A repository's server is usually a script of the repository (``python tools/server.py``):
approving the command line alone would let a later commit (or a command the model ran)
change what that script does and have it run unasked. So the approval is kept for the
command line followed by the SHA-256 of each such file; a file whose content changed no
longer matches, and the user is asked again. Files outside the root (the interpreter, a
globally installed server) are the user's own and are not pinned.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .spec import McpServerSpec

CHUNK = 1024 * 1024


def approval_line(spec: McpServerSpec, root: Path, search_path: str = os.defpath) -> str:
    """``spec``'s command line, with a line ``sha256 <path> <hex>`` for each file among its
    command and arguments inside ``root`` (the path relative to the root); a command without
    a folder is looked for on its entry's ``PATH``, else ``search_path`` (the daemon's).
    Blocking: it reads those files."""
    line = spec.command_line
    if spec.command is None:
        return line
    real_root = root.resolve()
    cwd = root / spec.cwd if spec.cwd is not None else root
    pinned = []
    words = [_program(spec, cwd, search_path), *(cwd / arg for arg in spec.args)]
    for path in words:
        inside = _file_inside(path, real_root)
        if inside is not None:
            pinned.append(f"sha256 {inside.relative_to(real_root)} {_digest(inside)}")
    return "\n".join([line, *pinned])


def approved_command(line: str) -> str:
    """The command line an approval line (``approval_line``'s) was kept for: without the
    lines that pin the root's files."""
    words = line.split("\n")
    while len(words) > 1 and words[-1].startswith("sha256 "):
        words.pop()
    return "\n".join(words)


def _program(spec: McpServerSpec, cwd: Path, search_path: str) -> Path | None:
    """The file the command names: a path (relative to ``cwd``), or the first match on the
    ``PATH`` the server gets (its entry's, else the daemon's)."""
    assert spec.command is not None
    if os.sep in spec.command:
        return cwd / spec.command
    search = (spec.env or {}).get("PATH", search_path)
    for folder in search.split(os.pathsep):
        candidate = cwd / (folder or ".") / spec.command
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    return None


def _file_inside(path: Path | None, real_root: Path) -> Path | None:
    """``path`` resolved, when it is a regular file inside the root."""
    if path is None:
        return None
    try:
        real = path.resolve()
        if not real.is_relative_to(real_root) or not real.is_file():
            return None
    except (OSError, ValueError, RuntimeError):
        return None
    return real


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return digest.hexdigest()
