"""The protocol's words are defined once, in ``trellisd.vocabulary``: the schema carries them,
and the errors and the loop use them."""

from __future__ import annotations

import copy
import json

from tests import protocol_schema
from trellisd import errors
from trellisd.agent import loop
from trellisd.vocabulary import ErrorCode, Outcome, emit


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
