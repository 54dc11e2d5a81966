"""Rows of the step and event tables read back as records."""

from __future__ import annotations

import json
from typing import Any

from ..records import Event, Step, Tokens, ToolCall
from ..vocabulary import EventKind, StepKind

STEP_COLUMNS = (
    "n, decision, prompt, text, tool_call, result, input_tokens, output_tokens, cached_tokens"
)
EVENT_COLUMNS = "seq, kind, step, detail, created_at"


def step_of(row: tuple[Any, ...]) -> Step:
    """A step from its ``STEP_COLUMNS``."""
    call = json.loads(row[4]) if row[4] is not None else None
    return Step(
        step=row[0],
        decision=StepKind(row[1]),
        prompt=row[2],
        text=row[3],
        tool_call=ToolCall(**call) if call else None,
        result=row[5],
        tokens=Tokens(row[6], row[7], row[8]),
    )


def event_of(row: tuple[Any, ...]) -> Event:
    """An event from its ``EVENT_COLUMNS``."""
    seq, kind, step, detail, at = row
    return Event(
        int(seq),
        EventKind(kind),
        None if step is None else int(step),
        json.loads(str(detail)),
        str(at),
    )
