"""The protocol's words, each defined once: a turn's outcomes, a step's kinds, the kinds of
a run's events, the kinds of a session's feed entries, a tool call's statuses, the user's
decisions on an approval, the events hooks run at, what an approval asks, the walls' modes,
the approval modes, where a plan's entries stand, and the error codes.

``protocol/schema.json`` carries them as enums (``$defs`` ``Outcome``, ``StepKind``,
``EventKind``, ``HookEvent``, ``FeedKind``, ``CallStatus``, ``Decision``, ``ApprovalKind``,
``SandboxMode``, ``ApprovalMode``, ``PlanStatus`` and ``Error.code``); ``python -m
trellisd.vocabulary`` writes them there, and the tests check the schema, the TypeScript and
the Lua copies against these.
"""

from __future__ import annotations

import json
import sys
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any, TypeVar


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


class EventKind(StrEnum):
    """What an event of a run records; an ``Event``'s ``kind``."""

    MODEL = "model"  # the provider and settings the run used
    INSTRUCTIONS = "instructions"  # the session's instructions changed since its last run
    CONTEXT = "context"  # the editor context the turn's prompt carried
    RETRY = "retry"  # a failed model call is sent again
    STEERED = "steered"  # a steer joined a step's model call
    STEER_RETURNED = "steer-returned"  # the turn ended before delivering a steer
    STEER_HELD = "steer-held"  # a steer kept for a paused turn
    RESUMED = "resumed"  # an interrupted run went on
    REFUSAL = "refusal"  # the policy or the user refused a tool call
    APPROVAL = "approval"  # the editor's answer to session/requestApproval
    REVERTED = "reverted"  # turn/revert undid the turn's changes
    RECOVERY = "recovery"  # a cancel had to kill a running program: session/recover decides
    RECOVERED = "recovered"  # session/recover decided
    MCP = "mcp"  # an MCP server started, failed or was declined
    CHECK = "check"  # a bounded turn's check ran
    COMPACTION = "compaction"  # a step compacted the branch
    CACHE = "cache"  # a model call read part of its input from the provider's cache
    SANDBOX = "sandbox"  # the walls a command ran in
    PLAN = "plan"  # the model's update_plan call replaced the turn's plan
    PLAN_APPROVED = "plan-approved"  # session/plan/approve: the plan this turn carries out
    IMAGES = "images"  # the images the turn's prompt carried, by SHA-256
    THOUGHT = "thought"  # what the model reasoned in a step's call, and its reasoning tokens
    HOOK = "hook"  # a hook ran: its event, command, exit code, decision and reason
    COMMAND = "command"  # the custom command the turn runs, its arguments and its settings


class HookEvent(StrEnum):
    """The events a hook runs at (``hooks.spec``)."""

    SESSION_START = "sessionStart"
    SESSION_END = "sessionEnd"
    USER_PROMPT_SUBMIT = "userPromptSubmit"
    PRE_TOOL_USE = "preToolUse"
    PERMISSION_REQUEST = "permissionRequest"
    POST_TOOL_USE = "postToolUse"
    PRE_COMPACT = "preCompact"
    POST_COMPACT = "postCompact"
    STOP = "stop"
    TURN_END = "turnEnd"


class Decision(StrEnum):
    """The user's answer to ``session/requestApproval``; ``timeout`` when none came."""

    ALLOW = "allow"
    ALLOW_ALWAYS = "allowAlways"
    ALLOW_ALWAYS_PROJECT = "allowAlwaysProject"
    ALLOW_RULE = "allowRule"
    ALLOW_RULE_PROJECT = "allowRuleProject"
    DENY = "deny"
    TIMEOUT = "timeout"


class ApprovalKind(StrEnum):
    """What ``session/requestApproval`` asks: a tool call the policy says to ask about, or a
    command that asks to run outside the walls (never covered by a grant)."""

    TOOL = "tool"
    ESCALATE = "escalate"


class SandboxMode(StrEnum):
    """The walls around the programs a session starts; ``policy.sandbox``."""

    WORKSPACE_WRITE = "workspace-write"
    READ_ONLY = "read-only"
    OFF = "off"


class ApprovalMode(StrEnum):
    """When the user is asked; ``policy.approval``."""

    ALL = "all"
    AUTO = "auto"
    ACCEPT_EDITS = "acceptEdits"
    ASK = "ask"
    PLAN = "plan"
    NEVER = "never"


class PlanStatus(StrEnum):
    """Where an entry of a turn's plan stands (``update_plan``)."""

    PENDING = "pending"
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"


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


W = TypeVar("W", bound=StrEnum)


def stored(word: type[W], value: str) -> W:
    """``value`` read from the store as a word of ``word``. A word this build does not know
    (a newer build of the same store level wrote it) is kept as it is, so an older build
    reads and shows what a newer one added rather than failing the read."""
    try:
        return word(value)
    except ValueError:
        later = str.__new__(word, value)
        later._name_, later._value_ = value, value
        return later


ANSWERS = (
    Decision.ALLOW,
    Decision.ALLOW_ALWAYS,
    Decision.ALLOW_ALWAYS_PROJECT,
    Decision.ALLOW_RULE,
    Decision.ALLOW_RULE_PROJECT,
    Decision.DENY,
)
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
    defs["EventKind"]["enum"] = [k.value for k in EventKind]
    defs["HookEvent"]["enum"] = [e.value for e in HookEvent]
    defs["FeedKind"]["enum"] = [k.value for k in FeedKind]
    defs["CallStatus"]["enum"] = [s.value for s in CallStatus]
    defs["ApprovalKind"]["enum"] = [k.value for k in ApprovalKind]
    defs["SandboxMode"]["enum"] = [m.value for m in SandboxMode]
    defs["ApprovalMode"]["enum"] = [a.value for a in ApprovalMode]
    defs["PlanStatus"]["enum"] = [p.value for p in PlanStatus]
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
