"""A wire method: its name, its typed params, and the handler that serves it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from ..services import Services

P = TypeVar("P")


class Deferred:
    """An answer completed at the instant it is written: what it holds of a live turn (the text
    streamed so far) and the window's following that turn are taken together, so no piece of
    the turn is both in the answer and in a notification after it, or in neither. A process's
    output read back is taken so too."""

    def __init__(self, complete: Callable[[], Any]) -> None:
        self.complete = complete


@dataclass(frozen=True)
class Method(Generic[P]):
    name: str
    params: type[P]
    serve: Callable[[Services, P], Awaitable[Any]]
    # Which session the calling window follows from then on (its turns' notifications and
    # approval questions): ``before`` the method runs (a turn it starts), once it ``answer``s
    # (the session named in the answer), or ``live``: as ``answer``, and the answer holds the
    # text of the session's running turn streamed so far. Or the session is let go of: by the
    # calling window (``leave``) or by every window (``forget``: it is gone).
    follow: Literal["before", "answer", "live", "leave", "forget"] | None = None
