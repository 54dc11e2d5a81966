"""Child sessions: what the ``task`` tool (``tools.task``) starts.

A child is an ordinary session in the store, over its parent's root, under its parent's
policy (the same ``session/open`` policy, so the same layers, approval and project file; none
of the parent's grants), with ``parentSessionId`` naming the parent. Its turn runs through
the same ``TurnService`` as any turn, in a task of its own: ``session/cancel`` of the child
stops the child alone, and cancelling the parent's turn cancels its running children through
the same path (each records ``cancelled``).

- Tools: the parent's (built-in and MCP), or the subset the call names; never ``task``, so a
  child starts no children of its own.
- Spending: the child's turn has a ledger whose parent is the parent turn's (``agent.budget``):
  its calls must stay within the parent's budgets too, and what it spends counts against them.
  ``budgetUsd`` bounds the child's turn on its own.
- At once: at most the policy's ``task.maxConcurrent`` children of one turn run; the others
  wait their turn (the session is made when its turn comes).
- Windows: every window following the parent follows the child from its start (as it follows
  a fork: ``Notifier.forked``), so it is told of the child's tokens, steps and tool calls as
  they happen, and asked the child's approvals.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..agent.budget import Ledger
from ..errors import TrellisError
from ..policy.layers import PolicySpec
from ..records import Session, TurnResult
from ..store.facade import AsyncStore
from ..tools.base import ToolFailure
from ..tools.task import TaskRequest
from ..vocabulary import Outcome
from .seams import Notifier
from .worktrees import WorktreeService

ANSWERED = (Outcome.FINISHED, Outcome.SUCCESS)


@dataclass(frozen=True)
class Within:
    """A child turn's place under its parent's: the ledger its spending also counts against
    (None: the parent's turn has no budget) and the names of the tools it may use."""

    parent_session_id: str
    ledger: Ledger | None
    tools: tuple[str, ...]


class ChildTurns(Protocol):
    """Where a child's turn runs (``TurnService``)."""

    async def child_turn(
        self, session: Session, request: TaskRequest, within: Within
    ) -> TurnResult: ...

    async def child_policy(self, parent: Session) -> PolicySpec | None:
        """What a child of ``parent`` is opened with: its policy, in the mode it is in."""
        ...


class ChildSessions:
    """The children of one running turn (the ``task`` tool's ``Children`` seam)."""

    def __init__(
        self,
        turns: ChildTurns,
        store: AsyncStore,
        notifier: Notifier,
        parent: Session,
        ledger: Ledger | None,
        tools: tuple[str, ...],
        limit: int,
        worktrees: WorktreeService | None = None,
    ) -> None:
        self.turns, self.store, self.notifier = turns, store, notifier
        self.parent, self.ledger, self._tools = parent, ledger, tools
        self._slots = asyncio.Semaphore(limit)
        self.worktrees = worktrees

    def tool_names(self) -> tuple[str, ...]:
        return self._tools

    async def run(self, request: TaskRequest, started: Callable[[str], None] | None = None) -> str:
        """Run ``request`` as a child session once a slot is free; ``started`` is told its
        id as soon as its followers follow it, before its turn says anything."""
        async with self._slots:
            child = await self._child(request)
            self.notifier.forked(self.parent.session_id, child.session_id)
            if started is not None:
                started(child.session_id)
            tools = self._tools if request.tools is None else request.tools
            within = Within(self.parent.session_id, self.ledger, tools)
            running = asyncio.ensure_future(self.turns.child_turn(child, request, within))
            try:
                result = await running
            finally:
                if not running.done():  # the parent's turn was cancelled: so is the child's
                    running.cancel()
                    await asyncio.wait([running])
        return answer(child.session_id, result)

    async def _child(self, request: TaskRequest) -> Session:
        """The child's session: over the parent's root, or over the same folder of a git
        worktree of its own (``request.worktree``), made as ``session/open`` makes one."""
        parent = self.parent
        policy = await self.turns.child_policy(parent)
        if request.worktree is None:
            return await self.store.sessions.create(
                parent.root,
                "",
                parent.provider,
                policy,
                parent.instructions,
                parent_session_id=parent.session_id,
            )
        if self.worktrees is None:
            raise ToolFailure("a child in a worktree of its own is not offered here")
        try:
            made = await self.worktrees.make(Path(parent.root), request.worktree)
        except TrellisError as exc:
            raise ToolFailure(f"no worktree for the child: {exc.message}") from None
        try:
            return await self.store.sessions.create(
                str(made.root),
                "",
                parent.provider,
                policy,
                parent.instructions,
                made.worktree.path,
                parent_session_id=parent.session_id,
            )
        except BaseException:
            await self.worktrees.undo(made.worktree)
            raise


def answer(session_id: str, result: TurnResult) -> str:
    """The child's reply for the model; a ``ToolFailure`` saying how it ended otherwise."""
    if result.outcome in ANSWERED:
        return result.reply or f"(the child session {session_id} ended without a reply)"
    why = f": {result.error}" if result.error else ""
    raise ToolFailure(
        f"the child session {session_id} ended {result.outcome} without an answer{why}"
    )
