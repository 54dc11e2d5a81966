"""The wire's methods, one module per family; each handler is three lines: typed params in
(structured at the wire), one service call, the wire's JSON out. ``server`` registers them."""

from __future__ import annotations

from typing import Any

from . import process, run, session, turn, view, worktree
from .base import Method

METHODS: tuple[Method[Any], ...] = (
    *session.METHODS,
    *worktree.METHODS,
    *run.METHODS,
    *turn.METHODS,
    *process.METHODS,
    *view.METHODS,
)

__all__ = ["METHODS", "Method"]
