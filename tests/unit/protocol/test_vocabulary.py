"""The protocol's words are defined once, in ``trellisd.vocabulary``: the schema carries them,
and the errors and the loop use them."""

from __future__ import annotations

import ast
import copy
import json
from enum import StrEnum
from pathlib import Path
from typing import Any, get_type_hints

import pytest

import trellisd
from tests import protocol_schema
from trellisd import errors
from trellisd.agent import loop
from trellisd.agent.loop import TurnEnd
from trellisd.records import Event, FeedEntry, RunSummary, Step, Turn, TurnResult
from trellisd.store.rows import event_of
from trellisd.vocabulary import (
    CallStatus,
    Decision,
    ErrorCode,
    EventKind,
    FeedKind,
    Outcome,
    StepKind,
    emit,
)

PACKAGE = Path(trellisd.__file__).resolve().parent


def test_the_schema_carries_every_vocabulary_as_python_defines_it() -> None:
    schema = protocol_schema.schema()
    emitted = emit(copy.deepcopy(schema))
    assert json.dumps(emitted, sort_keys=True) == json.dumps(schema, sort_keys=True), (
        "protocol/schema.json is out of date: run python -m trellisd.vocabulary"
    )


def test_every_error_a_client_can_see_has_a_code_of_the_vocabulary() -> None:
    classes = [
        c
        for c in vars(errors).values()
        if isinstance(c, type) and issubclass(c, errors.TrellisError)
    ]
    assert len(classes) == 9
    for cls in classes:
        assert cls.CODE in set(ErrorCode), cls


def test_the_loop_ends_turns_with_outcomes_of_the_vocabulary() -> None:
    ends = (
        loop.FINISHED,
        loop.ERROR,
        loop.CANCELLED,
        loop.EXHAUSTED,
        loop.SUCCESS,
        loop.FAILURE,
        loop.PAUSED,
    )
    assert all(isinstance(end, Outcome) for end in ends)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("Outcome", Outcome),
        ("StepKind", StepKind),
        ("EventKind", EventKind),
        ("Decision", Decision),
        ("FeedKind", FeedKind),
        ("CallStatus", CallStatus),
    ],
)
def test_each_vocabulary_is_the_schemas_enum(name: str, words: type[StrEnum]) -> None:
    assert protocol_schema.schema()["$defs"][name]["enum"] == [w.value for w in words]


def test_an_events_kind_on_the_wire_is_the_schemas_event_kind() -> None:
    kind = protocol_schema.schema()["$defs"]["Event"]["properties"]["kind"]
    assert kind == {"$ref": "#/$defs/EventKind"}


@pytest.mark.parametrize(
    ("record", "field", "words"),
    [
        (Step, "decision", StepKind),
        (Event, "kind", EventKind),
        (TurnEnd, "outcome", Outcome),
        (Turn, "outcome", Outcome),
        (TurnResult, "outcome", Outcome),
        (RunSummary, "outcome", Outcome),
        (FeedEntry, "kind", FeedKind),
        (FeedEntry, "outcome", Outcome | None),
    ],
)
def test_the_records_hold_words_of_the_vocabulary(
    record: type[Any], field: str, words: Any
) -> None:
    assert get_type_hints(record)[field] == words


_RECORDERS = {"add_event", "_insert_event"}


def _literal_event_kinds() -> list[str]:
    """Every call that records an event with its kind written as a string literal."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "attr", getattr(node.func, "id", None))
            if name not in _RECORDERS:
                continue
            literals = [
                a.value
                for a in [*node.args, *(k.value for k in node.keywords)]
                if isinstance(a, ast.Constant) and isinstance(a.value, str)
            ]
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno} {v!r}" for v in literals]
    return found


def test_the_daemon_records_every_event_by_its_kind_in_the_vocabulary() -> None:
    assert _literal_event_kinds() == []


def test_an_event_of_every_kind_reads_back_as_its_word() -> None:
    assert [event_of((1, k.value, None, "{}", "t")).kind for k in EventKind] == list(EventKind)
    with pytest.raises(ValueError):
        event_of((1, "no-such-kind", None, "{}", "t"))
