"""What a turn changes in its workspace: the content of a file at one moment (``content``),
the git work tree's snapshots that show what a command changed (``git``), who else was at
work in a work tree while a command ran (``sharing``), and unified diffs (``diff``). Nothing
here knows the store or the wire."""

from __future__ import annotations

from .content import ABSENT, MAX_STORED_BYTES, Content, Kind, read_content
from .diff import unified_diff
from .git import GitTree

__all__ = [
    "ABSENT",
    "MAX_STORED_BYTES",
    "Content",
    "GitTree",
    "Kind",
    "read_content",
    "unified_diff",
]
