"""The wire's methods, one module per family; each handler is three lines."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..server import TrellisServer


def register_all(server: TrellisServer) -> None:
    from . import run, session

    session.register(server)
    run.register(server)
