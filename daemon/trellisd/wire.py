"""The wire's shapes: one frozen request type per method, structured once from the raw JSON
by the one converter (``convert``), and JSON written from the daemon's records.

Fields are camelCase on the wire and snake_case in Python. A request that does not have its
method's shape is an ``InvalidParams`` that names the field; the services only ever see the
typed requests.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import re
from typing import Any, Literal, TypeVar

import attrs

from .agent.attached import ContextEntry
from .commands import CustomCommand
from .convert import Invalid, camel, converter, structure, turn_or_null, unstructure
from .errors import InvalidParams
from .mcp.spec import McpServerSpec
from .policy.layers import Approval, PolicySpec
from .policy.rules import Grant, grant_of
from .records import (
    ANY_HEAD,
    Budget,
    Compacted,
    Effort,
    Event,
    ExpectHead,
    Exported,
    FeedEntry,
    FileChange,
    ImageRef,
    ProviderChoice,
    Recovery,
    Restored,
    RunSummary,
    Session,
    SessionSummary,
    Spend,
    Step,
    Tokens,
    ToolCall,
    Turn,
    TurnRef,
    TurnResult,
    effort_field,
)
from .services.approvals import PROGRAMS, Program
from .services.images import ImageInput
from .services.queue import Queued
from .services.running import LiveCall
from .services.worktrees import Merged
from .store.chain import LogVerdict
from .store.search import check_query
from .tools.processes import Printed, ProcessState
from .vocabulary import FeedKind

R = TypeVar("R")
log = logging.getLogger(__name__)
turn_or_null(ExpectHead)  # expectHead: null expects no head; left out, expects nothing
WorktreeChoice = bool | str | None
"""``session/open``'s ``worktree``: true (a name made up), a name, or false or null (none)."""


def _worktree_choice(value: Any, _: Any) -> bool | str | None:
    if value is None or isinstance(value, bool | str):
        return value
    raise Invalid("must be true, false, null or a name")


converter.register_structure_hook_func(lambda t: t == WorktreeChoice, _worktree_choice)

_SHA256 = re.compile(r"[0-9a-f]{64}")
LIST_LIMIT = 50
EVENTS_LIMIT = 200
MAX_STEPS = 10_000
MAX_ARGUMENT_CHARS = 64 * 1024  # what follows a command's name


def parse(cls: type[R], raw: Any) -> R:
    """A request's params as its typed request; ``[]`` (Lua's ``{}``) counts as none. Keys
    the request does not have are ignored, and named in a debug log line."""
    if isinstance(raw, dict) and attrs.has(cls):
        unknown = sorted(set(raw) - {camel(a.name) for a in attrs.fields(cls)})
        if unknown:
            log.debug("ignored params that %s does not have: %s", cls.__name__, ", ".join(unknown))
    return structure(None if raw == [] else raw, cls)


def _nonempty(name: str, value: str) -> None:
    if not value.strip():
        raise InvalidParams(f"{name} must not be empty", field=name)


def _one_prompt(prompt: str | None, command: str | None, arguments: str | None) -> None:
    """A turn's prompt is given, or made by a command: one of the two."""
    if command is None:
        if prompt is None:
            raise InvalidParams("give a prompt, or a command to run", field="prompt")
        _nonempty("prompt", prompt)
        if arguments is not None:
            raise InvalidParams("arguments go with a command", field="arguments")
        return
    if prompt is not None:
        raise InvalidParams(
            "give a prompt or a command, not both: the command's expansion is the prompt",
            field="prompt",
        )
    _nonempty("command", command)
    if arguments is not None and len(arguments) > MAX_ARGUMENT_CHARS:
        raise InvalidParams(
            f"arguments must be at most {MAX_ARGUMENT_CHARS} characters", field="arguments"
        )


def _affordable(name: str, budget: Budget | None) -> None:
    """A budget caps something, with a positive figure."""
    if budget is None:
        return
    if budget.tokens is not None and budget.tokens < 1:
        raise InvalidParams(f"{name}.tokens must be at least 1", field=f"{name}.tokens")
    if budget.usd is not None and not 0 < budget.usd < float("inf"):
        raise InvalidParams(f"{name}.usd must be more than 0", field=f"{name}.usd")


def _within(name: str, value: int | None, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise InvalidParams(f"{name} must be from {low} to {high}", field=name)


@attrs.frozen
class SessionOpen:
    root: str
    title: str | None = None
    provider: ProviderChoice | None = None
    policy: PolicySpec | None = None
    instructions: str | None = None
    mcp_servers: tuple[McpServerSpec, ...] = attrs.field(
        default=(), metadata={"must": "be a list of MCP servers"}
    )
    budget: Budget | None = None  # what all the session's turns together may spend
    worktree: WorktreeChoice = None  # a git worktree of its own: true, or its name

    def __attrs_post_init__(self) -> None:
        _affordable("budget", self.budget)


@attrs.frozen
class SessionRef:
    """The params of every request about one session as a whole."""

    session_id: str


@attrs.frozen
class SessionPage:
    """``session/history`` and ``session/turns``: everything, or a page at a time when
    ``limit`` or ``cursor`` is given."""

    session_id: str
    limit: int | None = None
    cursor: str | None = None

    def __attrs_post_init__(self) -> None:
        _within("limit", self.limit, 1, 1000)

    @property
    def paged(self) -> bool:
        return self.limit is not None or self.cursor is not None

    @property
    def size(self) -> int:
        return self.limit or LIST_LIMIT


@attrs.frozen
class SessionReopen:
    session_id: str
    limit: int | None = None  # the newest turns of the history; all when left out
    # as session/open's: for a session this daemon has not started MCP servers for yet
    mcp_servers: tuple[McpServerSpec, ...] = attrs.field(
        default=(), metadata={"must": "be a list of MCP servers"}
    )

    def __attrs_post_init__(self) -> None:
        _within("limit", self.limit, 1, 1000)


@attrs.frozen
class SessionList:
    root: str | None = None
    limit: int | None = None
    cursor: str | None = None
    query: str | None = None  # words to find in titles, prompts and replies
    parent_session_id: str | None = None  # only the children of this session

    def __attrs_post_init__(self) -> None:
        _within("limit", self.limit, 1, 1000)
        if self.query is not None:
            check_query(self.query)
            if self.parent_session_id is not None:
                raise InvalidParams(
                    "session/list takes query or parentSessionId, not both",
                    field="parentSessionId",
                )


@attrs.frozen
class SessionExport:
    session_id: str
    path: str


@attrs.frozen
class SessionImport:
    path: str
    root: str | None = None
    as_new: bool | None = None  # new ids for the session, its turns and runs


@attrs.frozen
class Verify:
    """A bounded turn's check: run ``argv`` in the session root, expect ``expect_exit``."""

    argv: list[str]
    expect_exit: int | None = None

    def __attrs_post_init__(self) -> None:
        if not self.argv:
            raise InvalidParams(
                "verify.argv must be a non-empty array of strings", field="verify.argv"
            )

    @property
    def exit_code(self) -> int:
        return 0 if self.expect_exit is None else self.expect_exit


@attrs.frozen
class SessionTurn:
    """``session/turn``: a ``prompt``, or a custom ``command`` run with its ``arguments``
    (its expansion the prompt): one of the two, never both."""

    session_id: str
    prompt: str | None = None
    model: str | None = None
    temperature: float | None = None
    max_steps: int | None = None
    verify: Verify | None = None
    step_mode: bool | None = None
    expect_head: ExpectHead = ANY_HEAD
    on_conflict: Literal["fork"] | None = None
    context: tuple[ContextEntry, ...] | None = None
    budget: Budget | None = None  # what this turn may spend
    queue: bool | None = None  # while another turn runs: wait for it, in line
    images: tuple[ImageInput, ...] | None = None  # checked and read by ``services.images``
    effort: Effort | None = effort_field()  # how hard a reasoning model thinks, this turn
    command: str | None = None  # a custom command's name (``services.commands``)
    arguments: str | None = None  # what follows the command's name

    def __attrs_post_init__(self) -> None:
        _one_prompt(self.prompt, self.command, self.arguments)
        _within("maxSteps", self.max_steps, 1, MAX_STEPS)
        _affordable("budget", self.budget)

    @property
    def choice(self) -> ProviderChoice:
        """What this turn alone overrides of the session's model choice."""
        return ProviderChoice(model=self.model, temperature=self.temperature, effort=self.effort)


@attrs.frozen
class SessionImage:
    """``session/image``: the bytes of an image a turn of the session carried."""

    session_id: str
    sha256: str

    def __attrs_post_init__(self) -> None:
        if not _SHA256.fullmatch(self.sha256):
            raise InvalidParams("sha256 must be 64 lowercase hex digits", field="sha256")


@attrs.frozen
class SessionApprovalMode:
    """``session/mode``: the session's approval mode from its next tool call on."""

    session_id: str
    approval: Approval = attrs.field(
        metadata={"must": "be one of 'all', 'auto', 'acceptEdits', 'ask', 'plan' or 'never'"}
    )


@attrs.frozen
class SessionPlanApprove:
    """``session/plan/approve``: run a planned turn's plan in a new turn."""

    session_id: str
    turn_id: str
    approval: Approval | None = attrs.field(
        default=None,
        metadata={"must": "be one of 'all', 'auto', 'acceptEdits', 'ask' or 'never'"},
    )
    max_steps: int | None = None
    verify: Verify | None = None
    budget: Budget | None = None

    def __attrs_post_init__(self) -> None:
        _within("maxSteps", self.max_steps, 1, MAX_STEPS)
        _affordable("budget", self.budget)


@attrs.frozen
class SessionBranch:
    session_id: str
    turn_id: str | None  # required, but null: before the first turn
    restore_files: bool = False
    force: bool = False
    expect_head: ExpectHead = ANY_HEAD


@attrs.frozen
class SessionChanges:
    """``from`` and ``to``: turns of the session, or null for before the first turn."""

    session_id: str
    from_: str | None
    to: str | None


@attrs.frozen
class TurnChanges:
    turn_id: str


@attrs.frozen
class TurnRevert:
    turn_id: str
    force: bool = False


@attrs.frozen
class SessionFork:
    session_id: str
    turn_id: str | None  # required, but null: an empty fork
    step: int | None = None  # the copy of turn_id keeps its first ``step`` steps

    def __attrs_post_init__(self) -> None:
        if self.step is not None and self.step < 0:
            raise InvalidParams("step must be 0 or more", field="step")


@attrs.frozen
class SessionRecover:
    """``session/recover``: the decision about a command a cancel killed mid-run."""

    session_id: str
    decision: Literal["keep", "revert"] = attrs.field(
        metadata={"must": "be one of 'keep' or 'revert'"}
    )
    force: bool = False


@attrs.frozen
class RevokedGrant:
    """A remembered approval to take back, as ``session/policy`` lists it: a rule by its
    ``target``, the rule as a JSON array."""

    kind: Literal["read", "write", "exec", "rule", "hook", "mcpServer"] = attrs.field(
        metadata={"must": "be one of 'read', 'write', 'exec', 'rule', 'hook' or 'mcpServer'"}
    )
    target: str
    scope: Literal["policy", "session", "project"] | None = attrs.field(
        default=None, metadata={"must": "be one of 'session' or 'project'"}
    )

    def __attrs_post_init__(self) -> None:
        _nonempty("grant.target", self.target)
        if self.program is None:
            self.grant()
        elif self.scope not in (None, "project"):
            raise InvalidParams(
                f"a {self.kind} approval is the project's: its scope is 'project'",
                field="grant.scope",
            )

    @property
    def program(self) -> Program | None:
        """``hook`` or ``mcpServer``: the approval of a project's program, not a grant."""
        return next((p for p in PROGRAMS if p == self.kind), None)

    def grant(self) -> Grant:
        """The grant to take back: an exact action, or a rule."""
        found = None if self.program else grant_of(self.kind, self.target)
        if found is None:
            raise InvalidParams(
                "grant.target must be a rule: a JSON array of words, the program first",
                field="grant.target",
            )
        return found


@attrs.frozen
class SessionRevoke:
    """``session/revoke``: one grant of the session (or of its root) taken back."""

    session_id: str
    grant: RevokedGrant


@attrs.frozen
class SessionPin:
    session_id: str
    turn_id: str


@attrs.frozen
class SessionRename:
    session_id: str
    title: str

    def __attrs_post_init__(self) -> None:
        _nonempty("title", self.title)


@attrs.frozen
class SessionInstructions:
    session_id: str
    instructions: str | None  # required, but null (or empty): none


@attrs.frozen
class After:
    """Entries numbered after ``after``, ``limit`` at most: ``session/events`` and
    ``run/events`` page this way."""

    after: int | None = attrs.field(default=None, kw_only=True)
    limit: int | None = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        _within("after", self.after, 0, 2**62)
        _within("limit", self.limit, 1, 1000)

    @property
    def paged(self) -> bool:
        return self.after is not None or self.limit is not None


@attrs.frozen
class SessionEvents(After):
    """``session/events``: the session's feed, ``EVENTS_LIMIT`` entries unless ``limit``."""

    session_id: str


@attrs.frozen
class SessionSteer:
    session_id: str
    text: str
    client_msg_id: str | None = None

    def __attrs_post_init__(self) -> None:
        _nonempty("text", self.text)


@attrs.frozen
class SessionBudget:
    session_id: str
    budget: Budget | None  # required, but null: none

    def __attrs_post_init__(self) -> None:
        _affordable("budget", self.budget)


@attrs.frozen
class SessionUnqueue:
    session_id: str
    queue_id: str


@attrs.frozen
class SessionResume:
    session_id: str
    turn_id: str
    step_mode: bool | None = None


@attrs.frozen
class RunRef:
    """The params of every ``run/*`` request."""

    run_id: str


@attrs.frozen
class RunEvents(After):
    """``run/events``: all the run's events unless paged."""

    run_id: str


def to_wire(value: Any) -> Any:
    """Records to JSON: dataclasses become objects with camelCase keys."""
    if isinstance(value, Tokens):
        tokens = {
            "input": value.input,
            "output": value.output,
            "total": value.total,
            "cached": value.cached,
        }
        if value.reasoning is not None:  # of ``output``: left out when the provider said none
            tokens["reasoning"] = value.reasoning
        return tokens
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {camel(f.name): to_wire(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    if isinstance(value, dict):
        return {k: to_wire(v) for k, v in value.items()}
    return value


def session(value: Session) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(dataclasses.replace(value, provider=ProviderChoice()))
    out["provider"] = unstructure(value.provider)
    del out["policy"]
    if value.imported_from is None:
        del out["importedFrom"]
    if value.recovery is None:
        del out["recovery"]
    if value.parent_session_id is None:
        del out["parentSessionId"]
    if value.worktree is None:
        del out["worktree"]
    return out


def merged(value: Merged) -> dict[str, Any]:
    """``session/worktree/merge``'s answer."""
    out: dict[str, Any] = to_wire(value)
    out["paths"] = list(value.paths)
    return out


def required(value: Recovery | None) -> dict[str, Any] | None:
    """A turn's ``recovery``: its cancel had to kill ``tool``'s running program ``argv``."""
    if value is None:
        return None
    return {"required": True, "tool": value.tool, "argv": list(value.argv)}


def recovered(value: Session, files: Restored | None) -> dict[str, Any]:
    """``session/recover``'s answer: the session; ``files`` when the decision reverted."""
    return branched(value, files)


def session_summary(value: SessionSummary) -> dict[str, Any]:
    out = {**session(value.session), "turns": value.turns}
    if value.match is not None:
        out["match"] = to_wire(value.match)
    return out


def turn(value: Turn) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(dataclasses.replace(value, plan=None))
    if out["error"] is None:
        del out["error"]
    if not value.images:
        del out["images"]
    if value.command is None:
        del out["command"]
    _recovery(out, value.recovery)
    del out["plan"], out["followsPlan"]
    if value.plan is not None:
        out["plan"] = value.plan.to_wire()
    if value.follows_plan is not None:
        out["followsPlan"] = {"turnId": value.follows_plan}
    return out


def image(session_id: str, ref: ImageRef, data: bytes) -> dict[str, Any]:
    """``session/image``'s answer: the image's record and its bytes in base64."""
    encoded = base64.b64encode(data).decode("ascii")
    return {"sessionId": session_id, **to_wire(ref), "data": encoded}


def turns(values: list[Turn], cursor: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"turns": [turn(t) for t in values]}
    if cursor:
        out["nextCursor"] = cursor
    return out


def reopened(
    value: Session, history: list[Turn], cursor: str | None, integrity: str
) -> dict[str, Any]:
    out = {**session(value), "history": [turn(t) for t in history], "integrity": integrity}
    if cursor:
        out["historyCursor"] = cursor
    return out


def verdict(value: LogVerdict) -> dict[str, Any]:
    """``session/verify``'s answer: the first bad entry only when there is one."""
    out: dict[str, Any] = {"ok": value.ok, "entries": value.entries, "headHash": value.head_hash}
    if value.first_bad is not None:
        out["firstBad"] = to_wire(value.first_bad)
        out["reason"] = value.reason
    out["verified"] = value.verified
    if value.check is not None:
        out["check"] = value.check
    out["anchored"] = value.anchored
    return out


def turn_result(value: TurnResult) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    for optional in ("error", "sessionId", "forkedFrom"):
        if out[optional] is None:
            del out[optional]
    _recovery(out, value.recovery)
    return out


def _recovery(out: dict[str, Any], value: Recovery | None) -> None:
    """A turn's or a turn result's ``recovery``, only when its cancel had to kill."""
    if value is None:
        del out["recovery"]
    else:
        out["recovery"] = required(value)


def turn_ended(ref: TurnRef, value: TurnResult) -> dict[str, Any]:
    """``session/turnEnded``: how the turn ended, told to every window following its session."""
    out = {
        **turn_ref(ref),
        "outcome": value.outcome,
        "reply": value.reply,
        "tokens": to_wire(value.tokens),
        "cost": value.cost,
    }
    if value.recovery is not None:
        out["recovery"] = required(value.recovery)
    return out


def step(value: Step) -> dict[str, Any]:
    """A step; ``thought`` (what the model reasoned in its call) only when it did."""
    out: dict[str, Any] = to_wire(dataclasses.replace(value, thought=None))
    del out["thought"]
    if value.thought is not None:
        out["thought"] = value.thought.text
    return out


def event(value: Event) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    return out


def events(values: list[Event]) -> dict[str, Any]:
    return {"events": [event(e) for e in values]}


def events_page(values: list[Event], after: int | None) -> dict[str, Any]:
    """A page of ``run/events``: ``next`` is the ``after`` that reads on, or None when these
    are all the events recorded so far."""
    return {**events(values), "next": after}


def feed_entry(value: FeedEntry) -> dict[str, Any]:
    """One entry of ``session/events``, with only the fields of its kind."""
    out: dict[str, Any] = {
        "seq": value.seq,
        "kind": value.kind,
        "turnId": value.turn_id,
        "runId": value.run_id,
        "createdAt": value.created_at,
    }
    if value.kind == FeedKind.TURN_STARTED:
        out |= {"prompt": value.prompt, "parentTurnId": value.parent_turn_id}
    elif value.step is not None:
        out["step"] = step(value.step)
    elif value.event is not None:
        out["event"] = event(value.event)
    elif value.kind == FeedKind.TURN_ENDED:
        out["outcome"] = value.outcome
        if value.error is not None:
            out["error"] = value.error
    return out


def feed(values: list[FeedEntry], after: int | None) -> dict[str, Any]:
    return {"events": [feed_entry(e) for e in values], "next": after}


def run_summary(value: RunSummary) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    if out["error"] is None:
        del out["error"]
    return out


def turn_ref(value: TurnRef) -> dict[str, Any]:
    """Written out rather than reflected: every token notification starts with it."""
    return {"sessionId": value.session_id, "turnId": value.turn_id, "runId": value.run_id}


def call_id(step: int, call: ToolCall) -> str:
    """The provider's id of a tool call; a provider that gives none gets one from its step."""
    return call.id or f"step-{step}"


def tool_call(turn: TurnRef, step: int, call: ToolCall, status: str) -> dict[str, Any]:
    return {
        **turn_ref(turn),
        "step": step,
        "callId": call_id(step, call),
        "tool": call.name,
        "arguments": call.arguments,
        "status": status,
    }


def tool_output(turn: TurnRef, step: int, call: ToolCall, text: str) -> dict[str, Any]:
    return {**turn_ref(turn), "step": step, "callId": call_id(step, call), "text": text}


def live_call(call: LiveCall) -> dict[str, Any]:
    """A call of the running turn's uncommitted steps, in a reopen's ``running``."""
    return {
        "step": call.step,
        "callId": call.call_id,
        "tool": call.tool,
        "arguments": call.arguments,
        "status": call.status,
        "output": "".join(call.output),
    }


def session_list(page: list[SessionSummary], cursor: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"sessions": [session_summary(s) for s in page]}
    if cursor:
        out["nextCursor"] = cursor
    return out


def exported(value: Exported) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    return out


def steer_receipt(ref: TurnRef, new: bool) -> dict[str, Any]:
    """``duplicate`` when the steer's clientMsgId was already queued in this turn."""
    receipt = {"turnId": ref.turn_id, "runId": ref.run_id, "queued": True}
    return receipt if new else {**receipt, "duplicate": True}


def compacted(value: Compacted) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    out["compacted"] = value.step is not None
    return out


def cancelled(ref: TurnRef | None) -> dict[str, Any]:
    return {"cancelled": False} if ref is None else {"cancelled": True, **turn_ref(ref)}


def file_change(value: FileChange) -> dict[str, Any]:
    out: dict[str, Any] = {"path": value.path, "status": value.status, "diff": value.diff}
    if value.binary:
        out["binary"] = True
    if value.too_large:
        out["tooLarge"] = True
    if value.shared_with:
        out["shared"] = True
        out["sharedWith"] = [
            {"sessionId": s.session_id, "turnId": s.turn_id} for s in value.shared_with
        ]
    return out


def file_changes(values: list[FileChange]) -> dict[str, Any]:
    return {"files": [file_change(f) for f in values]}


def restored(value: Restored) -> dict[str, Any]:
    return {
        "restored": value.restored,
        "skipped": [{"path": s.path, "reason": s.reason} for s in value.skipped],
    }


def branched(value: Session, files: Restored | None) -> dict[str, Any]:
    """The session with its new head; ``files`` when the branch restored them."""
    out = session(value)
    if files is not None:
        out["files"] = restored(files)
    return out


def pausing(ref: TurnRef | None) -> dict[str, Any]:
    return {"pausing": False} if ref is None else {"pausing": True, **turn_ref(ref)}


def budget(session_id: str, value: Budget | None, spend: Spend) -> dict[str, Any]:
    """A session's budget (null: none) and what its turns have spent."""
    return {
        "sessionId": session_id,
        "budget": None if value is None else unstructure(value),
        "spent": spent(spend),
    }


def spent(value: Spend) -> dict[str, Any]:
    return {"tokens": value.tokens, "usd": round(value.usd, 6) if value.priced else None}


def queued(value: Queued, position: int) -> dict[str, Any]:
    return {
        "sessionId": value.session_id,
        "queueId": value.queue_id,
        "position": position,
        "prompt": value.prompt,
        "queuedAt": value.queued_at,
    }


def queue(session_id: str, values: list[Queued]) -> dict[str, Any]:
    """A session's queued prompts, first to run first."""
    return {"sessionId": session_id, "queued": [queued(v, n) for n, v in enumerate(values, 1)]}


@attrs.frozen
class SessionProcessStop:
    """``session/process/stop``: one of the session's processes stopped from the editor."""

    session_id: str
    process_id: str


def process(value: ProcessState) -> dict[str, Any]:
    """A process a session's turn started (``start_process``), as it stands."""
    return {
        "processId": value.process_id,
        "argv": list(value.argv),
        "cwd": value.cwd,
        "startedAt": value.started_at,
        "turnId": value.turn_id,
        "running": value.running,
        "exitCode": value.exit_code,
    }


def process_exited(value: ProcessState) -> dict[str, Any]:
    """``session/processExited``: the process as it ended."""
    return {"sessionId": value.session_id, **process(value)}


@attrs.frozen
class SessionProcessOutput:
    """``session/process/output``: what a process printed, for an editor that opens it late."""

    session_id: str
    process_id: str
    since: int = 0

    def __attrs_post_init__(self) -> None:
        if self.since < 0:
            raise InvalidParams("since must be 0 or more", field="since")


def process_output(session_id: str, value: Printed) -> dict[str, Any]:
    """What a process printed from ``since`` up to ``next``, and how it stands."""
    return {
        "sessionId": session_id,
        "processId": value.state.process_id,
        "text": value.text,
        "next": value.next,
        "dropped": value.dropped,
        "running": value.state.running,
        "exitCode": value.state.exit_code,
    }


def processes(session_id: str, values: list[ProcessState]) -> dict[str, Any]:
    """A session's processes, the oldest first."""
    return {"sessionId": session_id, "processes": [process(v) for v in values]}


def commands(session_id: str, values: list[CustomCommand]) -> dict[str, Any]:
    """``session/commands``: the custom commands of a session, by name."""
    return {"sessionId": session_id, "commands": [c.to_wire() for c in values]}
