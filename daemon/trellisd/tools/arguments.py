"""Reading a tool's arguments as the model sent them: every wrong type is a ``ToolFailure``
that names the argument, so the model can correct its call."""

from __future__ import annotations

from typing import Any

from .base import ToolFailure


def text(arguments: dict[str, Any], name: str, *, empty: bool = False) -> str:
    """A required string argument (non-empty unless ``empty``)."""
    value = arguments.get(name)
    if not isinstance(value, str):
        raise ToolFailure(f"{name} must be a string")
    if not value and not empty:
        raise ToolFailure(f"{name} must be a non-empty string")
    return value


def optional_text(arguments: dict[str, Any], name: str) -> str | None:
    value = arguments.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ToolFailure(f"{name} must be a string")
    return value


def whole_number(arguments: dict[str, Any], name: str) -> int | None:
    """An optional whole number from 1."""
    value = arguments.get(name)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ToolFailure(f"{name} must be a whole number from 1")
    return value


def seconds(arguments: dict[str, Any], name: str, *, default: float, most: float) -> float:
    """An optional number of seconds, more than 0 and at most ``most``."""
    value = arguments.get(name)
    if value is None:
        return default
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value <= most:
        raise ToolFailure(f"{name} must be a number of seconds above 0 and at most {most:g}")
    return float(value)


def strings(arguments: dict[str, Any], name: str) -> list[str]:
    """A required non-empty list of strings."""
    value = arguments.get(name)
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        raise ToolFailure(f"{name} must be a non-empty list of strings")
    return list(value)
