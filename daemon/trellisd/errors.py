"""The errors a client can see.

Every error raised across the wire is a ``TrellisError`` with a ``CODE``, a one-line
message a person understands, and structured ``data``. The tree:

    TrellisError (-32603, internal)
    +-- InvalidParams (-32602)        a param is missing or of the wrong type
    +-- NotFound (-32010)             unknown session, turn, run, or a root that is not a folder
    +-- Conflict (-32020)             the session already has a running turn
    +-- NotRunning (-32021)           steering a session with no running turn
    +-- LeaseHeld (-32030)            another process is the session's writer
    +-- StoreError (-32040)           the store cannot be used (newer schema, disk full, ...)

``protocol/README.md`` documents each code; the server maps them onto JSON-RPC errors.
"""

from __future__ import annotations

from typing import Any


class TrellisError(Exception):
    CODE = -32603

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data: dict[str, Any] = data


class InvalidParams(TrellisError):
    CODE = -32602


class NotFound(TrellisError):
    CODE = -32010


class Conflict(TrellisError):
    CODE = -32020


class NotRunning(TrellisError):
    CODE = -32021


class LeaseHeld(TrellisError):
    CODE = -32030


class StoreError(TrellisError):
    CODE = -32040
