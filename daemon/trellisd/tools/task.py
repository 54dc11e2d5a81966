"""The ``task`` tool: the model hands a piece of work to a child session, which runs as an
ordinary session over the same root under the same policy (never a wider one), and answers
with the child's reply.

The tool is thin: what a child is, how it runs, what it may spend and how many run at once
is the ``Children`` seam's (``services.tasks``). Its calls are ``concurrent``: the loop starts
every ``task`` call of one model call at once, and the seam makes the ones past the policy's
limit wait their turn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import attrs

from ..convert import Invalid
from . import arguments as args
from .base import Action, ToolContext, ToolFailure

NAME = "task"


@dataclass(frozen=True)
class TaskRequest:
    """What the model asked of a child: its prompt, its bounds, and the tools it may use
    (None: all of the parent's but ``task``)."""

    prompt: str
    max_steps: int | None = None
    budget_usd: float | None = None
    tools: tuple[str, ...] | None = None
    worktree: bool | str | None = None
    """A git worktree of its own (True, or its name): the child works on a branch of its
    own instead of in the parent's folder."""


class Children(Protocol):
    """Where a turn's children are started (``services.tasks``)."""

    def tool_names(self) -> tuple[str, ...]:
        """The tools the parent's turn has, which a child's ``tools`` may choose among."""
        ...

    async def run(self, request: TaskRequest, started: Callable[[str], None] | None = None) -> str:
        """Run a child turn to its end; its reply, or a ``ToolFailure`` saying how it ended.
        ``started`` is told the child session's id as soon as it exists."""
        ...


def _worktree(_: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and not isinstance(value, bool) and not (isinstance(value, str) and value):
        raise Invalid.of(attribute, "must be true, false or a name")


def _positive(_: Any, attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not value > 0:
        raise Invalid.of(attribute, "must be a number above 0")


@attrs.frozen
class TaskArguments:
    prompt: str = args.text()
    max_steps: int | None = args.whole_number()
    budget_usd: float | None = attrs.field(
        default=None, validator=_positive, metadata={"must": "be a number above 0"}
    )
    tools: tuple[str, ...] | None = attrs.field(
        default=None, metadata={"must": "be a list of tool names"}
    )
    worktree: Any = attrs.field(default=None, validator=_worktree)


class Task:
    name = NAME
    concurrent = True  # the loop runs a step's ``task`` calls at the same time
    description = (
        "Hand a self-contained piece of work to a child session that works in the same folder"
        " under the same rules and answers with its final reply. Give it everything it needs"
        " in the prompt: it does not see this conversation. Several task calls in one reply"
        " run at the same time."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "prompt": {"type": "string", "description": "the child's task, in full"},
            "maxSteps": {"type": "integer", "minimum": 1, "description": "its most steps"},
            "budgetUsd": {"type": "number", "description": "the most it may spend, in USD"},
            "tools": {
                "type": "array",
                "items": {"type": "string"},
                "description": "the names of the tools it may use, among yours; all by default",
            },
            "worktree": {
                "type": ["boolean", "string"],
                "description": "true (or a name): the child works in a git worktree of its own,"
                " on a branch trellisd/<name>, instead of in your folder",
            },
        },
        "required": ["prompt"],
    }

    def __init__(self, children: Children) -> None:
        self.children = children

    def request(self, arguments: dict[str, Any]) -> TaskRequest:
        """The model's arguments as a request, or a ``ToolFailure`` naming the argument."""
        given = args.read(arguments, TaskArguments)
        if given.tools is not None:
            known = self.children.tool_names()
            unknown = [t for t in given.tools if t not in known]
            if unknown:
                raise ToolFailure(
                    f"tools names {', '.join(map(repr, unknown))}, which you do not have;"
                    f" choose among {', '.join(known)}"
                )
        worktree = given.worktree or None  # false: none
        return TaskRequest(given.prompt, given.max_steps, given.budget_usd, given.tools, worktree)

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        """A child reads the root at least; what it does beyond is judged call by call."""
        self.request(arguments)
        return Action("read", ".")

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        return await self.children.run(self.request(arguments), context.child)
