"""A wire method: its name, its typed params, and the handler that serves it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from ..services import Services

P = TypeVar("P")


@dataclass(frozen=True)
class Method(Generic[P]):
    name: str
    params: type[P]
    serve: Callable[[Services, P], Awaitable[Any]]
    # Which session the calling window follows from then on (its turns' notifications and
    # approval questions): ``before`` the method runs (a turn it starts), once it ``answer``s
    # (the session named in the answer), or ``live``: as ``answer``, and the answer holds the
    # text of the session's running turn streamed so far.
    follow: Literal["before", "answer", "live"] | None = None
