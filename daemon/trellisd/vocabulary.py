"""The protocol's words, each defined once: a turn's outcomes, a step's kinds, the kinds of
a session's feed entries, a tool call's statuses, the user's decisions on an approval, and
the error codes.

``protocol/schema.json`` carries them as enums (``$defs`` ``Outcome``, ``StepKind``,
``FeedKind``, ``CallStatus``, ``Decision`` and ``Error.code``); ``python -m
trellisd.vocabulary`` writes them there, and the tests check the schema, the TypeScript and
the Lua copies against these.
"""

from __future__ import annotations

import json
import sys
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any


class Outcome(StrEnum):
    """How a turn (and its run) ended, or that it still runs."""

    RUNNING = "running"
    FINISHED = "finished"
    ERROR = "error"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"
    EXHAUSTED = "exhausted"
    SUCCESS = "success"
    FAILURE = "failure"
    PAUSED = "paused"
    FORKED = "forked"  # a fork's copy of a turn cut after one of its steps


class StepKind(StrEnum):
    """What a step is; on the wire, a step's ``decision`` field."""

    REPLY = "reply"
    TOOL = "tool"
    ERROR = "error"
    CANCELLED = "cancelled"
    COMPACTION = "compaction"


class Decision(StrEnum):
    """The user's answer to ``session/requestApproval``; ``timeout`` when none came."""

    ALLOW = "allow"
    ALLOW_ALWAYS = "allowAlways"
    ALLOW_ALWAYS_PROJECT = "allowAlwaysProject"
    DENY = "deny"
    TIMEOUT = "timeout"


class CallStatus(StrEnum):
    """Where a tool call stands; a ``session/toolCall`` notification's ``status``."""

    PROPOSED = "proposed"  # the model's call is complete; policy and approval come next
    RUNNING = "running"
    DONE = "done"
    REFUSED = "refused"  # by the policy or the user
    FAILED = "failed"  # the tool could not do it (its result says why)
    CANCELLED = "cancelled"  # the turn stopped before the call ended


class FeedKind(StrEnum):
    """What an entry of a session's feed (``session/events``) records."""

    TURN_STARTED = "turnStarted"
    STEP = "step"
    EVENT = "event"
    TURN_ENDED = "turnEnded"


ANSWERS = (Decision.ALLOW, Decision.ALLOW_ALWAYS, Decision.ALLOW_ALWAYS_PROJECT, Decision.DENY)
"""The decisions an editor may send; ``timeout`` is the daemon's own."""


class ErrorCode(IntEnum):
    """Every code an error answer may carry."""

    PARSE_ERROR = -32700
    INVALID_REQUEST = -32600
    METHOD_NOT_FOUND = -32601
    INVALID_PARAMS = -32602
    INTERNAL = -32603
    REQUEST_CANCELLED = -32800
    NOT_FOUND = -32010
    CONFLICT = -32020
    NOT_RUNNING = -32021
    STALE_HEAD = -32022
    LEASE_HELD = -32030
    STORE_ERROR = -32040


def emit(schema: dict[str, Any]) -> dict[str, Any]:
    """``schema`` with every vocabulary written into its enums."""
    defs = schema["$defs"]
    defs["Outcome"]["enum"] = [o.value for o in Outcome]
    defs["StepKind"]["enum"] = [k.value for k in StepKind]
    defs["Decision"]["enum"] = [d.value for d in Decision]
    defs["FeedKind"]["enum"] = [k.value for k in FeedKind]
    defs["CallStatus"]["enum"] = [s.value for s in CallStatus]
    answer = schema["clientRequests"]["session/requestApproval"]["result"]
    answer["properties"]["decision"]["enum"] = [d.value for d in ANSWERS]
    defs["Error"]["properties"]["code"]["enum"] = [c.value for c in ErrorCode]
    return schema


def main(argv: list[str]) -> int:
    """Rewrite the schema file named in ``argv`` (default: protocol/schema.json)."""
    path = Path(argv[0] if argv else "protocol/schema.json")
    schema = emit(json.loads(path.read_text(encoding="utf-8")))
    path.write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
