"""The agent's tools, confined to the session root."""

from __future__ import annotations

from .base import Tool, ToolContext, ToolFailure
from .files import ListDir, ReadFile


def default_tools() -> list[Tool]:
    return [ReadFile(), ListDir()]


__all__ = ["Tool", "ToolContext", "ToolFailure", "default_tools"]
