"""The wire's shapes: typed params from raw JSON, and JSON from the daemon's records.

Fields are camelCase on the wire and snake_case in Python; ``camel`` maps one to the other.
Every param error is an ``InvalidParams`` that names the field.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .daemon import TurnRef, TurnResult
from .errors import InvalidParams
from .pricing import cost
from .store.records import Event, RunSummary, Session, SessionSummary, Step, Tokens, Turn

_MISSING = object()


class Params:
    """A request's params, read one field at a time with a clear error per field."""

    def __init__(self, raw: Any) -> None:
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise InvalidParams("params must be an object", field="params")
        self.raw: dict[str, Any] = raw

    def _get(self, name: str, kind: type | tuple[type, ...], what: str, required: bool) -> Any:
        value = self.raw.get(name, _MISSING)
        if value is _MISSING or value is None:
            if required:
                raise InvalidParams(f"{name} is required", field=name)
            return None
        if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
            raise InvalidParams(f"{name} must be {what}, not {_json_type(value)}", field=name)
        return value

    def string(self, name: str, *, required: bool = False, nonempty: bool = False) -> Any:
        value = self._get(name, str, "a string", required)
        if nonempty and value is not None and not value.strip():
            raise InvalidParams(f"{name} must not be empty", field=name)
        return value

    def nullable_string(self, name: str) -> str | None:
        if name not in self.raw:
            raise InvalidParams(f"{name} is required (null for before the first turn)", field=name)
        value: str | None = self._get(name, str, "a string or null", False)
        return value

    def integer(self, name: str, *, low: int, high: int) -> int | None:
        value: int | None = self._get(name, int, "a whole number", False)
        if value is not None and not low <= value <= high:
            raise InvalidParams(f"{name} must be from {low} to {high}", field=name)
        return value

    def number(self, name: str) -> float | None:
        value = self._get(name, (int, float), "a number", False)
        return None if value is None else float(value)

    def obj(self, name: str) -> dict[str, Any] | None:
        value: dict[str, Any] | None = self._get(name, dict, "an object", False)
        return value


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return "null"


def verify(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """A bounded turn's ``verify``: ``{argv: [str, ...], expectExit?: int}``."""
    if value is None:
        return None
    argv = value.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        raise InvalidParams("verify.argv must be a non-empty array of strings", field="verify.argv")
    expect = value.get("expectExit", 0)
    if not isinstance(expect, int) or isinstance(expect, bool):
        raise InvalidParams("verify.expectExit must be a whole number", field="verify.expectExit")
    return {"argv": argv, "expectExit": expect}


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


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
    out: dict[str, Any] = to_wire(value)
    out["provider"] = out.pop("settings")
    del out["policy"]
    return out


def session_summary(value: SessionSummary) -> dict[str, Any]:
    return {**session(value.session), "turns": value.turns}


def turn(value: Turn) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    if out["error"] is None:
        del out["error"]
    out["cost"] = cost(value.model, value.tokens)
    return out


def turns(values: list[Turn]) -> dict[str, Any]:
    return {"turns": [turn(t) for t in values]}


def turn_result(value: TurnResult) -> dict[str, Any]:
    out: dict[str, Any] = to_wire(value)
    if out["error"] is None:
        del out["error"]
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
