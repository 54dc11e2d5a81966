"""A wire method: its name, its typed params, and the handler that serves it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..services import Services

P = TypeVar("P")


@dataclass(frozen=True)
class Method(Generic[P]):
    name: str
    params: type[P]
    serve: Callable[[Services, P], Awaitable[Any]]
