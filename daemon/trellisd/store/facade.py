"""The store as the services see it: named async methods over one worker thread.

The store is apsw and blocking; every call here runs on the store's own thread, one at a time,
so a slow disk or another process holding the write lock never stalls the event loop. The
services call ``await store.runs.add_event(...)``; nothing else reaches the blocking store.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..changes.content import Content
from ..errors import TrellisError
from ..policy.layers import PolicySpec
from ..policy.rules import Grant
from ..records import (
    ANY_HEAD,
    Budget,
    Event,
    ExpectHead,
    FeedEntry,
    ImageRef,
    ProviderChoice,
    RunSummary,
    Session,
    SessionSummary,
    Spend,
    Step,
    Turn,
    Worktree,
)
from ..vocabulary import EventKind
from . import Store, archive
from .acp_choices import AcpChoice
from .chain import LogVerdict
from .changes import Marks, Recorded, TurnRun
from .leases import STALE_SECONDS
from .worktrees import WorktreeRow

log = logging.getLogger(__name__)
T = TypeVar("T")


class _Thread:
    """The store's thread; ``after`` runs on it after each call (the anchoring of the logs
    the call moved, once it committed)."""

    def __init__(self, after: Callable[[], None] = lambda: None) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(1, "trellisd-store")
        self.after = after

    async def __call__(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self._then, fn, args)

    def _then(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            return fn(*args)
        finally:
            try:
                self.after()
            except Exception:  # the write stands; its log is anchored at the next one
                log.warning("could not anchor the session logs", exc_info=True)


class AsyncSessions:
    def __init__(self, store: Store, thread: _Thread) -> None:
        self._store, self._run = store, thread

    async def create(
        self,
        root: str,
        title: str,
        provider: ProviderChoice,
        policy: PolicySpec | None,
        instructions: str | None = None,
        worktree: str | None = None,
        parent_session_id: str | None = None,
    ) -> Session:
        """A new session over ``root``, written by this daemon; with ``worktree``, the
        session of the worktree being made at that path; ``parent_session_id``: the session
        whose ``task`` call started it."""
        return await self._run(
            self._store.sessions.create,
            root,
            title,
            provider,
            self._store.leases.daemon_id,
            policy,
            instructions,
            worktree,
            parent_session_id,
        )

    async def get(self, session_id: str) -> Session:
        return await self._run(self._store.sessions.get, session_id)

    async def page(
        self, root: str | None, limit: int, cursor: str | None, parent: str | None = None
    ) -> tuple[list[SessionSummary], str | None]:
        return await self._run(self._store.sessions.page, root, limit, cursor, parent)

    async def search(
        self, query: str, root: str | None, limit: int, cursor: str | None
    ) -> tuple[list[SessionSummary], str | None]:
        return await self._run(self._store.search.page, query, root, limit, cursor)

    async def export(self, session_id: str, path: Path) -> tuple[int, int]:
        """Write the session to ``path`` from a snapshot on a connection of its own, so the
        store's other work goes on meanwhile; ``(bytes, turns)``."""
        return await asyncio.to_thread(archive.export_file, self._store.db, session_id, path)

    async def import_(self, path: Path, root: str | None, as_new: bool) -> str:
        """Import the session file at ``path`` in one transaction; its id in this store."""
        return await self._run(archive.import_file, self._store.db, path, root, as_new)

    async def turn(self, session_id: str, turn_id: str) -> Turn:
        return await self._run(self._store.sessions.turn, session_id, turn_id)

    async def image(self, session_id: str, sha256: str) -> tuple[ImageRef, bytes]:
        return await self._run(self._store.sessions.image, session_id, sha256)

    async def history(self, session_id: str) -> list[Turn]:
        return await self._run(self._store.sessions.history, session_id)

    async def reopen(
        self, session_id: str, limit: int | None
    ) -> tuple[Session, list[Turn], str | None, str]:
        return await self._run(self._store.sessions.reopen, session_id, self._store.leases, limit)

    async def verify(self, session_id: str) -> LogVerdict:
        return await self._run(self._store.verify, session_id)

    async def history_page(
        self, session_id: str, limit: int, cursor: str | None
    ) -> tuple[list[Turn], str | None]:
        return await self._run(self._store.sessions.history_page, session_id, limit, cursor)

    async def turns_page(
        self, session_id: str, limit: int, cursor: str | None
    ) -> tuple[list[Turn], str | None]:
        return await self._run(self._store.sessions.turns_page, session_id, limit, cursor)

    async def history_to(self, session_id: str, turn_id: str | None) -> list[Turn]:
        return await self._run(self._store.sessions.history_to, session_id, turn_id)

    async def turns(self, session_id: str) -> list[Turn]:
        return await self._run(self._store.sessions.turns, session_id)

    async def branch(
        self, session_id: str, turn_id: str | None, expect_head: ExpectHead = ANY_HEAD
    ) -> Session:
        return await self._run(
            self._store.sessions.branch, session_id, turn_id, self._store.leases, expect_head
        )

    async def fork(self, session_id: str, turn_id: str | None, step: int | None = None) -> Session:
        """A new session, written by this daemon, holding a copy of the path to ``turn_id``
        (with ``step``: that turn's first ``step`` steps)."""
        return await self._run(
            self._store.sessions.fork, session_id, turn_id, self._store.leases, step
        )

    async def rename(self, session_id: str, title: str) -> Session:
        return await self._run(self._store.sessions.rename, session_id, title, self._store.leases)

    async def pin(self, session_id: str, turn_id: str, pin: bool) -> Session:
        return await self._run(
            self._store.sessions.pin, session_id, turn_id, pin, self._store.leases
        )

    async def instruct(self, session_id: str, instructions: str | None) -> Session:
        return await self._run(
            self._store.sessions.instruct, session_id, instructions, self._store.leases
        )

    async def delete(self, session_id: str) -> None:
        await self._run(self._store.sessions.delete, session_id, self._store.leases)
        if self._store.anchors is not None:
            await self._run(self._store.anchors.forget, session_id)

    async def feed(
        self, session_id: str, after: int, limit: int
    ) -> tuple[list[FeedEntry], int | None]:
        return await self._run(self._store.sessions.feed, session_id, after, limit)


class AsyncRuns:
    def __init__(self, store: Store, thread: _Thread) -> None:
        self._store, self._run = store, thread

    async def begin(
        self,
        session_id: str,
        prompt: str,
        model: str | None,
        expect_head: ExpectHead = ANY_HEAD,
        title: str = "",
    ) -> tuple[str, str, str | None]:
        return await self._run(
            self._store.runs.begin, session_id, prompt, model, expect_head, title
        )

    async def add_step(self, run_id: str, step: Step) -> None:
        await self._run(self._store.runs.add_step, run_id, step)

    async def add_event(
        self, run_id: str, kind: EventKind, step: int | None, detail: dict[str, Any]
    ) -> None:
        await self._run(self._store.runs.add_event, run_id, kind, step, detail)

    async def add_images(self, run_id: str, given: list[tuple[ImageRef, bytes]]) -> None:
        await self._run(self._store.runs.add_images, run_id, given)

    async def hold_steer(self, run_id: str, detail: dict[str, str]) -> bool:
        return await self._run(self._store.runs.hold_steer, run_id, detail)

    async def held_steers(self, run_id: str) -> list[dict[str, str]]:
        return await self._run(self._store.runs.held_steers, run_id)

    async def finish(self, run_id: str, outcome: str, error: str | None) -> None:
        await self._run(self._store.runs.finish, run_id, outcome, error)

    async def resume(self, run_id: str) -> None:
        await self._run(self._store.runs.resume, run_id)

    async def mark_interrupted(self) -> list[str]:
        return await self._run(self._store.runs.mark_interrupted)

    async def summary(self, run_id: str) -> RunSummary:
        return await self._run(self._store.runs.summary, run_id)

    async def compaction(self, run_ids: list[str]) -> tuple[str, int] | None:
        return await self._run(self._store.runs.compaction, run_ids)

    async def steps(self, run_id: str) -> list[Step]:
        return await self._run(self._store.runs.steps, run_id)

    async def transcripts(self, run_ids: list[str]) -> dict[str, list[Step]]:
        return await self._run(self._store.runs.transcripts, run_ids)

    async def events(self, run_id: str) -> list[Event]:
        return await self._run(self._store.runs.events, run_id)

    async def events_page(
        self, run_id: str, after: int, limit: int
    ) -> tuple[list[Event], int | None]:
        return await self._run(self._store.runs.events_page, run_id, after, limit)


class AsyncChanges:
    def __init__(self, store: Store, thread: _Thread) -> None:
        self._store, self._run = store, thread

    async def record(
        self,
        run_id: str,
        step: int | None,
        source: str,
        files: list[tuple[str, Content, Content]],
        shared: Marks | None = None,
    ) -> None:
        await self._run(self._store.changes.record, run_id, step, source, files, shared)

    async def share(self, run_id: str, step: int, marks: Marks) -> None:
        await self._run(self._store.changes.share, run_id, step, marks)

    async def unshare(self, run_id: str, step: int, marks: Marks) -> None:
        await self._run(self._store.changes.unshare, run_id, step, marks)

    async def turn_run(self, turn_id: str) -> TurnRun:
        return await self._run(self._store.changes.turn_run, turn_id)

    async def of_turns(self, turn_ids: list[str]) -> list[Recorded]:
        return await self._run(self._store.changes.of_turns, turn_ids)

    async def load(self, content: Content) -> Content:
        return await self._run(self._store.changes.load, content)


class AsyncBudgets:
    def __init__(self, store: Store, thread: _Thread) -> None:
        self._store, self._run = store, thread

    async def get(self, session_id: str) -> Budget | None:
        return await self._run(self._store.budgets.get, session_id)

    async def set(self, session_id: str, budget: Budget | None) -> None:
        await self._run(self._store.budgets.set, session_id, budget, self._store.leases)

    async def spent(self, session_id: str) -> Spend:
        return await self._run(self._store.budgets.spent, session_id)


class AsyncLeases:
    def __init__(self, store: Store, thread: _Thread) -> None:
        self._store, self._run = store, thread

    async def register(self) -> None:
        await self._run(self._store.leases.register)

    async def heartbeat(self) -> None:
        await self._run(self._store.leases.heartbeat)

    async def claim(self, session_id: str) -> None:
        """Become the session's writer, or ``LeaseHeld`` naming the live one."""
        await self._run(self._store.leases.claim, session_id)

    async def take(self, session_id: str) -> int | None:
        return await self._run(self._store.leases.take, session_id)

    async def release(self, session_id: str) -> None:
        await self._run(self._store.leases.release, session_id)


class AsyncMcpApprovals:
    def __init__(self, store: Store, thread: _Thread) -> None:
        self._store, self._run = store, thread

    async def approved(self, root: str, command_line: str) -> bool:
        return await self._run(self._store.mcp_approvals.approved, root, command_line)

    async def approve(self, root: str, command_line: str) -> None:
        await self._run(self._store.mcp_approvals.approve, root, command_line)

    async def revoke(self, root: str, chosen: Callable[[str], bool]) -> int:
        return await self._run(self._store.mcp_approvals.revoke, root, chosen)


class AsyncGrants:
    def __init__(self, store: Store, thread: _Thread) -> None:
        self._store, self._run = store, thread

    async def add(self, session_id: str, root: str, grant: Grant, project: bool) -> None:
        await self._run(self._store.grants.add, session_id, root, grant, project)

    async def of(self, session_id: str, root: str) -> tuple[frozenset[Grant], frozenset[Grant]]:
        return await self._run(self._store.grants.of, session_id, root)

    async def remove(self, session_id: str, root: str, grant: Grant, scope: str | None) -> int:
        return await self._run(self._store.grants.remove, session_id, root, grant, scope)


class AsyncAcpChoices:
    def __init__(self, store: Store, thread: _Thread) -> None:
        self._store, self._run = store, thread

    async def of(self, session_id: str) -> AcpChoice:
        return await self._run(self._store.acp_choices.of, session_id)

    async def choose_mode(self, session_id: str, mode: str) -> None:
        await self._run(self._store.acp_choices.choose_mode, session_id, mode)

    async def choose_model(self, session_id: str, model: str) -> None:
        await self._run(self._store.acp_choices.choose_model, session_id, model)

    async def reject(self, session_id: str, summary: str) -> None:
        await self._run(self._store.acp_choices.reject, session_id, summary)

    async def copy(self, origin_id: str, fork_id: str) -> None:
        await self._run(self._store.acp_choices.copy, origin_id, fork_id)


class AsyncWorktrees:
    def __init__(self, store: Store, thread: _Thread) -> None:
        self._store, self._run = store, thread

    async def begin(self, worktree: Worktree) -> None:
        await self._run(self._store.worktrees.begin, worktree)

    async def removing(self, session_id: str) -> Worktree | None:
        return await self._run(self._store.worktrees.removing, session_id)

    async def keep(self, session_id: str) -> None:
        await self._run(self._store.worktrees.keep, session_id)

    async def forget(self, path: str) -> None:
        await self._run(self._store.worktrees.forget, path)

    async def rows(self) -> list[WorktreeRow]:
        return await self._run(self._store.worktrees.rows)

    async def leftovers(self) -> list[Worktree]:
        return await self._run(self._store.worktrees.leftovers)


class AsyncStore:
    """The store's aggregates, each with named async methods."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._thread = _Thread(store.anchor)
        self.sessions = AsyncSessions(store, self._thread)
        self.runs = AsyncRuns(store, self._thread)
        self.leases = AsyncLeases(store, self._thread)
        self.changes = AsyncChanges(store, self._thread)
        self.mcp_approvals = AsyncMcpApprovals(store, self._thread)
        self.grants = AsyncGrants(store, self._thread)
        self.budgets = AsyncBudgets(store, self._thread)
        self.acp_choices = AsyncAcpChoices(store, self._thread)
        self.worktrees = AsyncWorktrees(store, self._thread)

    @property
    def folder(self) -> Path:
        """The folder the store's file is in: the daemon's own (for a store in memory, a
        temporary one)."""
        return self._store.db.folder

    @property
    def read_only(self) -> bool:
        """Whether the store only serves reads (a newer trellisd wrote it)."""
        return self._store.db.read_only or self._store.db.newer is not None

    @classmethod
    async def open(
        cls,
        path: str | Path,
        alive: Callable[[int], bool],
        anchors: Path | None = None,
        stale_seconds: float = STALE_SECONDS,
    ) -> AsyncStore:
        """Open (and create or migrate) the store at ``path``; ``StoreError`` if it cannot.
        ``anchors``: the folder where its sessions' logs are anchored (``store.anchors``);
        ``stale_seconds``: as ``Store``'s."""
        return cls(await asyncio.to_thread(Store, path, alive, anchors, stale_seconds))

    async def close(self) -> None:
        """A clean exit: release this daemon's leases, then close the database."""
        try:
            await self._thread(self._store.leases.unregister)
        except TrellisError as exc:
            log.warning("could not release the leases: %s", exc.message)
        await self._thread(self._store.close)
        self._thread.pool.shutdown(wait=True)
