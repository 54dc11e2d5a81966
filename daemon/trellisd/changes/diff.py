"""Unified diffs of a file's two contents, for a person to read."""

from __future__ import annotations

import difflib

from .content import Content, Kind


def unified_diff(path: str, before: Content, after: Content) -> str:
    """The unified diff from ``before`` to ``after`` (``/dev/null`` for an absent side);
    empty when either side's text is not kept (binary, too large)."""
    if before.data is None and before.kind != Kind.ABSENT:
        return ""
    if after.data is None and after.kind != Kind.ABSENT:
        return ""
    old = before.text().splitlines(keepends=True)
    new = after.text().splitlines(keepends=True)
    lines = difflib.unified_diff(
        old,
        new,
        "/dev/null" if before.kind == Kind.ABSENT else f"a/{path}",
        "/dev/null" if after.kind == Kind.ABSENT else f"b/{path}",
    )
    return "".join(
        line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
    )
