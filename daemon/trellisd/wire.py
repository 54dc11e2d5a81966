"""The wire's shapes: one frozen request type per method, structured once from the raw JSON
by the one converter (``convert``), and JSON written from the daemon's records.

Fields are camelCase on the wire and snake_case in Python. A request that does not have its
method's shape is an ``InvalidParams`` that names the field; the services only ever see the
typed requests.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal, TypeVar

import attrs

from .convert import camel, structure, turn_or_null, unstructure
from .errors import InvalidParams
from .policy.layers import PolicySpec
from .pricing import cost
from .records import (
    ANY_HEAD,
    Event,
    ExpectHead,
    ProviderChoice,
    RunSummary,
    Session,
    SessionSummary,
    Step,
    Tokens,
    Turn,
    TurnRef,
    TurnResult,
)
from .store.chain import Verdict

R = TypeVar("R")
turn_or_null(ExpectHead)  # expectHead: null expects no head; left out, expects nothing

LIST_LIMIT = 50
MAX_STEPS = 10_000


def parse(cls: type[R], raw: Any) -> R:
    """A request's params as its typed request; ``[]`` (Lua's ``{}``) counts as none."""
    return structure(None if raw == [] else raw, cls)


def _nonempty(name: str, value: str) -> None:
    if not value.strip():
        raise InvalidParams(f"{name} must not be empty", field=name)


def _within(name: str, value: int | None, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise InvalidParams(f"{name} must be from {low} to {high}", field=name)


@attrs.frozen
class SessionOpen:
    root: str
    title: str | None = None
    provider: ProviderChoice | None = None
    policy: PolicySpec | None = None


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

    def __attrs_post_init__(self) -> None:
        _within("limit", self.limit, 1, 1000)


@attrs.frozen
class SessionList:
    root: str | None = None
    limit: int | None = None
    cursor: str | None = None

    def __attrs_post_init__(self) -> None:
        _within("limit", self.limit, 1, 1000)


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
    session_id: str
    prompt: str
    model: str | None = None
    temperature: float | None = None
    max_steps: int | None = None
    verify: Verify | None = None
    step_mode: bool | None = None
    expect_head: ExpectHead = ANY_HEAD
    on_conflict: Literal["fork"] | None = None

    def __attrs_post_init__(self) -> None:
        _nonempty("prompt", self.prompt)
        _within("maxSteps", self.max_steps, 1, MAX_STEPS)

    @property
    def choice(self) -> ProviderChoice:
        """What this turn alone overrides of the session's model choice."""
        return ProviderChoice(model=self.model, temperature=self.temperature)


@attrs.frozen
class SessionBranch:
    session_id: str
    turn_id: str | None  # required, but null: before the first turn
    expect_head: ExpectHead = ANY_HEAD


@attrs.frozen
class SessionSteer:
    session_id: str
    text: str
    client_msg_id: str | None = None

    def __attrs_post_init__(self) -> None:
        _nonempty("text", self.text)


@attrs.frozen
class SessionResume:
    session_id: str
    turn_id: str
    step_mode: bool | None = None


@attrs.frozen
class RunRef:
    """The params of every ``run/*`` request."""

    run_id: str


def to_wire(value: Any) -> Any:
    """Records to JSON: dataclasses become objects with camelCase keys."""
    if isinstance(value, Tokens):
        return {
            "input": value.input,
            "output": value.output,
            "total": value.total,
            "cached": value.cached,
        }
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
    if out["forkedFrom"] is None:
        del out["forkedFrom"]
    return out


def session_summary(value: SessionSummary) -> dict[str, Any]:
    return {**session(value.session), "turns": value.turns}


def turn(value: Turn) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    if out["error"] is None:
        del out["error"]
    out["cost"] = cost(value.model, value.tokens)
    return out


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


def verdict(value: Verdict) -> dict[str, Any]:
    """``session/verify``'s answer: the first bad entry only when there is one."""
    out: dict[str, Any] = {"ok": value.ok, "entries": value.entries, "headHash": value.head_hash}
    if value.first_bad is not None:
        out["firstBad"] = to_wire(value.first_bad)
        out["reason"] = value.reason
    return out


def turn_result(value: TurnResult) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    for optional in ("error", "sessionId", "forkedFrom"):
        if out[optional] is None:
            del out[optional]
    out["cost"] = cost(value.model, value.tokens)
    return out


def step(value: Step) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    return out


def event(value: Event) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    return out


def run_summary(value: RunSummary) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    if out["error"] is None:
        del out["error"]
    return out


def turn_ref(value: TurnRef) -> dict[str, Any]:
    """Written out rather than reflected: every token notification starts with it."""
    return {"sessionId": value.session_id, "turnId": value.turn_id, "runId": value.run_id}


def session_list(page: list[SessionSummary], cursor: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"sessions": [session_summary(s) for s in page]}
    if cursor:
        out["nextCursor"] = cursor
    return out


def steer_receipt(ref: TurnRef, new: bool) -> dict[str, Any]:
    """``duplicate`` when the steer's clientMsgId was already queued in this turn."""
    receipt = {"turnId": ref.turn_id, "runId": ref.run_id, "queued": True}
    return receipt if new else {**receipt, "duplicate": True}


def cancelled(ref: TurnRef | None) -> dict[str, Any]:
    return {"cancelled": False} if ref is None else {"cancelled": True, **turn_ref(ref)}


def pausing(ref: TurnRef | None) -> dict[str, Any]:
    return {"pausing": False} if ref is None else {"pausing": True, **turn_ref(ref)}
