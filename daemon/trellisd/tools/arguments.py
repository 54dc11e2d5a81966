"""Reading a tool's arguments as the model sent them.

Each tool's arguments are a frozen attrs class whose fields come from the factories here,
structured by the one converter (``convert``): camelCase names, strict types. Every wrong
value is a ``ToolFailure`` that names the argument (``startLine must be a whole number from
1``); it goes back to the model as the call's result, so the model can correct its call.
"""

from __future__ import annotations

from typing import Any, TypeVar

import attrs

from ..convert import Invalid, nonempty, structure
from ..errors import InvalidParams
from .base import ToolFailure

T = TypeVar("T")


def read(arguments: dict[str, Any], cls: type[T]) -> T:
    """The model's arguments as ``cls``, or a ``ToolFailure`` naming the argument."""
    try:
        return structure(arguments, cls, "")
    except InvalidParams as exc:
        raise ToolFailure(exc.message) from None


def text(*, empty: bool = False) -> Any:
    """A required string (non-empty unless ``empty``)."""
    if empty:
        return attrs.field(metadata={"must": "be a string"})
    return attrs.field(
        validator=nonempty("must be a non-empty string"), metadata={"must": "be a string"}
    )


def path() -> Any:
    """A required path, relative to the root: ``ToolContext.resolve`` judges where it leads."""
    problem = "must be a non-empty string"
    return attrs.field(validator=nonempty(problem), metadata={"must": problem[5:]})


def _blank_is_none(value: str | None) -> str | None:
    return value or None


def optional_text() -> Any:
    """An optional string; an empty one counts as left out."""
    return attrs.field(default=None, converter=_blank_is_none, metadata={"must": "be a string"})


def whole_number() -> Any:
    """An optional whole number from 1."""
    problem = "must be a whole number from 1"

    def check(_: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
        if value is not None and value < 1:
            raise Invalid.of(attribute, problem)

    return attrs.field(default=None, validator=check, metadata={"must": problem[5:]})


def seconds(most: float) -> Any:
    """An optional number of seconds, more than 0 and at most ``most``."""
    problem = f"must be a number of seconds above 0 and at most {most:g}"

    def check(_: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
        if value is not None and not 0 < value <= most:
            raise Invalid.of(attribute, problem)

    return attrs.field(default=None, validator=check, metadata={"must": problem[5:]})


def strings() -> Any:
    """A required non-empty list of strings."""
    problem = "must be a non-empty list of strings"
    return attrs.field(validator=nonempty(problem), metadata={"must": problem[5:]})
