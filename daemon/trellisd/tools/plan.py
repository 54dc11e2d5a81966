"""The ``update_plan`` tool: the model keeps a short plan of the turn, each entry pending, in
progress or completed, and replaces it whole with each call.

The call touches nothing, so no policy judges it (``action`` is None) and it runs in every
approval mode, ``plan`` included. Its call is a step like any other (the plan is in the
run's steps, the log and the export); ``ToolContext.plan`` records the ``plan`` event a
turn's last plan is read back from and tells the editor (``session/plan``).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ..convert import Invalid
from ..plans import PlanEntry
from ..vocabulary import PlanStatus
from . import arguments as args
from .base import Action, ToolContext, ToolFailure

NAME = "update_plan"
MOST_ENTRIES = 100
MOST_CHARS = 2000
"""The most characters of one entry's ``content``."""

Priority = Literal["high", "medium", "low"]
Status = Literal["pending", "in_progress", "completed"]


def _content(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value.strip():
        raise Invalid.of(attribute, "must be a non-empty string")
    if len(value) > MOST_CHARS:
        raise Invalid.of(attribute, f"must be at most {MOST_CHARS} characters")


def _entries(_: Any, attribute: attrs.Attribute[Any], value: tuple[Any, ...]) -> None:
    if len(value) > MOST_ENTRIES:
        raise Invalid.of(attribute, f"must hold at most {MOST_ENTRIES} entries")


@attrs.frozen
class EntryArguments:
    content: str = attrs.field(validator=_content, metadata={"must": "be a string"})
    status: Status = attrs.field(
        metadata={"must": "be one of 'pending', 'in_progress' or 'completed'"}
    )
    priority: Priority | None = attrs.field(
        default=None, metadata={"must": "be one of 'high', 'medium' or 'low'"}
    )


@attrs.frozen
class PlanArguments:
    entries: tuple[EntryArguments, ...] = attrs.field(
        validator=_entries, metadata={"must": "be a list of {content, status, priority?}"}
    )
    explanation: str | None = args.optional_text()


class UpdatePlan:
    name = NAME
    description = (
        "Keep a short plan of this turn's work that the user sees beside the conversation:"
        " give the whole plan each time (each call replaces the one before), every entry a"
        " line with its status (pending, in_progress, completed), one in_progress at a time."
        " Make a plan before a task of several steps, and update it as each step is done."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "entries": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "the step, in a line"},
                        "status": {
                            "type": "string",
                            "enum": [s.value for s in PlanStatus],
                        },
                        "priority": {"type": "string", "enum": ["high", "medium", "low"]},
                    },
                    "required": ["content", "status"],
                },
            },
            "explanation": {"type": "string", "description": "why the plan changed, if it did"},
        },
        "required": ["entries"],
    }

    def entries(self, arguments: dict[str, Any]) -> tuple[PlanEntry, ...]:
        """The plan the model gave, or a ``ToolFailure`` naming the entry at fault."""
        given = args.read(arguments, PlanArguments)
        return tuple(PlanEntry(e.content, PlanStatus(e.status), e.priority) for e in given.entries)

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action | None:
        """Nothing to judge: the call touches nothing."""
        self.entries(arguments)
        return None

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        entries = self.entries(arguments)
        if context.plan is None:
            raise ToolFailure("this turn keeps no plan")
        await context.plan(entries)
        done = sum(1 for e in entries if e.status == PlanStatus.COMPLETED)
        return f"Plan updated: {done} of {len(entries)} done."
