"""The errors a client can see.

Every error raised across the wire is a ``TrellisError`` with a ``CODE``, a one-line
message a person understands, and structured ``data``. The tree:

    TrellisError (-32603, internal)
    +-- InvalidParams (-32602)        a param is missing or of the wrong type
    +-- NotFound (-32010)             unknown session, turn, run, or a root that is not a folder
    +-- Conflict (-32020)             the session already has a running turn
    +-- NotRunning (-32021)           steering a session with no running turn
    +-- StaleHead (-32022)            the session's head is not the one the write expected
    +-- LeaseHeld (-32030)            another process is the session's writer
    +-- StoreError (-32040)           the store cannot be used (newer schema, disk full, ...)
    +-- Dropped (-32800)              a queued prompt left its queue before it ran

``protocol/errors.md`` documents each code (``vocabulary.ErrorCode`` lists them all); the
server maps them onto JSON-RPC errors.
"""

from __future__ import annotations

from typing import Any

from .vocabulary import ErrorCode


class TrellisError(Exception):
    CODE: int = ErrorCode.INTERNAL

    def __init__(self, message: str, **data: Any) -> None:
        super().__init__(message)
        self.message = message
        self.data: dict[str, Any] = data


class InvalidParams(TrellisError):
    CODE: int = ErrorCode.INVALID_PARAMS


class NotFound(TrellisError):
    CODE: int = ErrorCode.NOT_FOUND


class Conflict(TrellisError):
    CODE: int = ErrorCode.CONFLICT


class NotRunning(TrellisError):
    CODE: int = ErrorCode.NOT_RUNNING


class StaleHead(TrellisError):
    CODE: int = ErrorCode.STALE_HEAD


class LeaseHeld(TrellisError):
    CODE: int = ErrorCode.LEASE_HELD


class StoreError(TrellisError):
    CODE: int = ErrorCode.STORE_ERROR


class Dropped(TrellisError):
    """A queued prompt that never ran: dropped (``session/unqueue``) or the daemon exited."""

    CODE: int = ErrorCode.REQUEST_CANCELLED
