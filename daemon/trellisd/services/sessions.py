"""Sessions: opening, reading back, listing, branching, taking over, and a session's life
after that: forking, renaming, instructing, closing and deleting it."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import Conflict, InvalidParams, NotFound
from ..mcp import McpServers, McpServerSpec
from ..mcp.servers import project_servers
from ..policy import Policy, PolicySpec
from ..policy.rules import Grant
from ..records import (
    ANY_HEAD,
    ExpectHead,
    FeedEntry,
    ProviderChoice,
    Restored,
    Session,
    SessionSummary,
    Step,
    Turn,
)
from ..store.chain import LogVerdict
from ..store.facade import AsyncStore
from ..store.recoveries import DECIDED
from ..store.sessions import expect
from .changes import ChangeService, StepEdit
from .hooks import HookService, project_hooks
from .policies import Policies
from .processes import ProcessService
from .running import Running, Snapshot
from .settings import Defaults
from .titles import title_of
from .worktrees import WorktreeService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Replayed:
    """A turn as a joining window is shown it: its steps and the files each step edited."""

    turn: Turn
    steps: list[Step]
    edits: list[StepEdit]


class SessionService:
    def __init__(
        self,
        store: AsyncStore,
        defaults: Defaults,
        running: Running,
        policies: Policies,
        changes: ChangeService,
        mcp: McpServers,
        processes: ProcessService | None = None,
        hooks: HookService | None = None,
    ) -> None:
        self.store, self.defaults, self.running, self.policies = store, defaults, running, policies
        self.hooks = hooks  # sessionStart, sessionEnd
        self.changes, self.mcp, self.processes = changes, mcp, processes
        self.worktrees = WorktreeService(store, running, defaults.settings.daemon.git_environment)

    async def open(
        self,
        root: str,
        title: str | None,
        provider: ProviderChoice | None,
        policy: PolicySpec | None,
        instructions: str | None = None,
        mcp_servers: Sequence[McpServerSpec] = (),
        worktree: bool | str | None = None,
    ) -> Session:
        """A new session over ``root``; with ``worktree`` (True, or its name), over the
        same folder of a new git worktree of root's repository (``worktrees``)."""
        folder = workspace(root)
        choice = provider or ProviderChoice()
        self.defaults.provider.merged(choice, "provider")  # refuse bad values now
        effective = await asyncio.to_thread(self.policies.load, folder, policy)
        await asyncio.to_thread(project_servers, folder)  # refuse a bad [[mcp]] now
        await asyncio.to_thread(project_hooks, folder)  # and a bad [[hooks]]
        if worktree is None or worktree is False:
            session = await self.store.sessions.create(
                str(folder), title or "", choice, policy, instructions or None
            )
        else:
            made = await self.worktrees.make(folder, worktree)
            try:
                session = await self.store.sessions.create(
                    str(made.root),
                    title or "",
                    choice,
                    policy,
                    instructions or None,
                    made.worktree.path,
                )
            except BaseException:
                await self.worktrees.undo(made.worktree)
                raise
        await self.policies.remember(session, effective)
        self.mcp.give(session.session_id, mcp_servers)
        if self.hooks is not None:
            await self.hooks.session_start(session, "open")
        return session

    async def policy(self, session_id: str) -> Policy:
        """The session's policy, with the walls its programs run in, for the read-back."""
        session = await self.store.sessions.get(session_id)
        policy = await self.policies.of(session)
        return replace(policy, seen=await self.policies.walls(session))

    async def revoke(self, session_id: str, grant: Grant, scope: str | None) -> Policy:
        """Take back a remembered approval; the session's policy after it."""
        return await self.policies.revoke(await self.store.sessions.get(session_id), grant, scope)

    async def reopen(
        self, session_id: str, limit: int | None, mcp_servers: Sequence[McpServerSpec] = ()
    ) -> tuple[Session, list[Turn], str | None, str]:
        """The session with its history (all of it, or its newest ``limit`` turns and a
        cursor to the older ones) and how its log's tail checked. ``mcp_servers`` are given
        to it as ``open`` gives them (they hold once the session's servers have started)."""
        reopened = await self.store.sessions.reopen(session_id, limit)
        self.mcp.give(session_id, mcp_servers)
        return reopened

    async def verify(self, session_id: str) -> LogVerdict:
        """Check the session's whole log."""
        return await self.store.sessions.verify(session_id)

    async def takeover(self, session_id: str) -> Session:
        previous = await self.store.leases.take(session_id)
        if previous is not None and previous != os.getpid():
            log.info("took session %s over from pid %d", session_id, previous)
        stopped = await self.store.runs.mark_interrupted()
        if stopped:
            log.info("marked %d turn(s) interrupted: their daemon stopped", len(stopped))
        return await self.store.sessions.get(session_id)

    async def page(
        self,
        root: str | None,
        limit: int,
        cursor: str | None,
        query: str | None = None,
        parent: str | None = None,
    ) -> tuple[list[SessionSummary], str | None]:
        """Sessions most recently used first; with ``query``, those it finds, best first;
        with ``parent``, only the children that session's ``task`` calls started."""
        if root is not None:
            root = str(_folder(root).resolve())
        if query is not None:
            return await self.store.sessions.search(query, root, limit, cursor)
        return await self.store.sessions.page(root, limit, cursor, parent)

    async def history(self, session_id: str) -> list[Turn]:
        return await self.store.sessions.history(session_id)

    async def history_page(
        self, session_id: str, limit: int, cursor: str | None
    ) -> tuple[list[Turn], str | None]:
        """The newest ``limit`` turns of the path to the head (or of the path before
        ``cursor``), oldest first, and a cursor to the turns before them."""
        return await self.store.sessions.history_page(session_id, limit, cursor)

    async def turns(self, session_id: str) -> list[Turn]:
        return await self.store.sessions.turns(session_id)

    async def turn(self, session_id: str, turn_id: str) -> Turn:
        """One turn of the session (``NotFound`` for an unknown turn or another session's)."""
        return await self.store.sessions.turn(session_id, turn_id)

    async def turns_page(
        self, session_id: str, limit: int, cursor: str | None
    ) -> tuple[list[Turn], str | None]:
        return await self.store.sessions.turns_page(session_id, limit, cursor)

    async def branch(
        self,
        session_id: str,
        turn_id: str | None,
        restore_files: bool = False,
        force: bool = False,
        expect_head: ExpectHead = ANY_HEAD,
    ) -> tuple[Session, Restored | None]:
        """Move the head to ``turn_id``; with ``restore_files``, first put every file the
        turns between the old head and the new one changed as it is at the new head. With
        ``expect_head``, nothing is done (``StaleHead``) unless the head is that turn."""
        self.running.refuse(session_id, "branch")
        if not restore_files:
            return await self.store.sessions.branch(session_id, turn_id, expect_head), None
        await self.store.leases.claim(session_id)
        session = await self.store.sessions.get(session_id)
        expect(session, expect_head)
        restored = await self.changes.restore(session, session.head, turn_id, force)
        return await self.store.sessions.branch(session_id, turn_id, expect_head), restored

    async def feed(
        self, session_id: str, after: int, limit: int
    ) -> tuple[list[FeedEntry], int | None]:
        """What the session committed after entry ``after``, in order, ``limit`` at most,
        and the ``after`` that reads on when more are committed already."""
        return await self.store.sessions.feed(session_id, after, limit)

    async def fork(self, session_id: str, turn_id: str | None, step: int | None = None) -> Session:
        """A new session whose history is the path from the first turn of ``session_id`` to
        ``turn_id`` (None: empty), copied so that it owns it, and which names its origin
        (``forked_from``). With ``step``, its copy of ``turn_id`` holds only that turn's first
        ``step`` steps and ends ``forked``: its next turn goes on from there. The origin is
        only read: it may be running another turn."""
        return await self.store.sessions.fork(session_id, turn_id, step)

    async def recover(
        self, session_id: str, decision: str, force: bool = False
    ) -> tuple[Session, Restored | None]:
        """Decide about the command a cancel killed mid-run: ``keep`` what it left, or
        ``revert`` its turn's change set (as ``turn/revert``: a file changed since is a
        ``Conflict`` with ``data.paths`` unless ``force``). The decision is an event of that
        turn's run (``recovered``), and the session's turns may run again."""
        self.running.refuse(session_id, "decide about it")
        session = await self.store.sessions.get(session_id)
        pending = session.recovery
        if pending is None:
            raise Conflict(
                f"session {session_id} has nothing to recover: no cancelled command of it"
                " waits for a decision",
                sessionId=session_id,
            )
        await self.store.leases.claim(session_id)
        restored = None
        if decision == "revert":
            restored = await self.changes.revert(pending.turn_id, force)
        detail = {"decision": decision, "tool": pending.tool, "argv": list(pending.argv)}
        await self.store.runs.add_event(pending.run_id, DECIDED, None, detail)
        return await self.store.sessions.get(session_id), restored

    async def get(self, session_id: str) -> Session:
        return await self.store.sessions.get(session_id)

    async def rename(self, session_id: str, title: str) -> Session:
        return await self.store.sessions.rename(session_id, title)

    async def name_after(self, session_id: str, prompt: str) -> Session | None:
        """Name an untitled session after ``prompt`` (``title_of``), as its first turn
        would; the renamed session, or None when it had a title."""
        session = await self.store.sessions.get(session_id)
        if session.title:
            return None
        return await self.store.sessions.rename(session_id, title_of(prompt))

    async def joined(
        self, session_id: str, replay: bool, live: Snapshot | None, instant: int
    ) -> list[Replayed]:
        """What a window joining the session at ``instant`` is shown before its turns come
        live: with ``replay``, the history; and the turn ``live`` was running then. The turns
        that started after ``instant`` come live, so they are left out."""
        turns = await self.store.sessions.history(session_id) if replay else []
        later = self.running.started_since(session_id, instant)
        turns = [t for t in turns if t.turn_id not in later]
        if live is not None and not replay:
            turns = [await self.store.sessions.turn(session_id, live.ref.turn_id)]
        out: list[Replayed] = []
        for turn in turns:
            steps = await self.store.runs.steps(turn.run_id)
            edits = await self.changes.step_edits(turn.turn_id)
            out.append(Replayed(turn, steps, edits))
            if live is not None and turn.turn_id == live.ref.turn_id:
                break
        return out

    async def pin(self, session_id: str, turn_id: str) -> Session:
        """Pin a turn of the session's tree: on the path, a turn sends it verbatim whatever
        is compacted, and the prompt cache's breakpoint follows the last one."""
        return await self.store.sessions.pin(session_id, turn_id, True)

    async def unpin(self, session_id: str, turn_id: str) -> Session:
        return await self.store.sessions.pin(session_id, turn_id, False)

    async def instruct(self, session_id: str, instructions: str | None) -> Session:
        """New standing instructions (None or empty: none), sent from the next turn on,
        which records them."""
        return await self.store.sessions.instruct(session_id, instructions or None)

    async def close(self, session_id: str) -> None:
        """Let go of the session: its lease and what this daemon keeps of it (its policy
        with the grants given, its MCP servers, its processes and its loopback, stopped).
        Reopening it later works as for any other session."""
        self.running.refuse(session_id, "close it")
        if self.hooks is not None:
            await self.hooks.session_end(await self.store.sessions.get(session_id), "close")
        await self.store.leases.release(session_id)
        self.policies.forget(session_id)
        await self.mcp.close(session_id)
        if self.processes is not None:
            await self.processes.close(session_id)
        await self.policies.loopbacks.close(session_id)

    async def delete(self, session_id: str) -> None:
        """Remove the session and all it owns, here and in every daemon on the store; its
        worktree, if it has one, with its branch."""
        self.running.refuse(session_id, "delete it")
        if self.hooks is not None:
            await self.hooks.session_end(await self.store.sessions.get(session_id), "delete")
        worktree = await self.store.worktrees.removing(session_id)
        try:
            await self.store.sessions.delete(session_id)
        except BaseException:
            if worktree is not None:
                await self.store.worktrees.keep(session_id)
            raise
        if worktree is not None:
            await self.worktrees.deleted(worktree)
        self.policies.forget(session_id)
        await self.mcp.close(session_id)
        if self.processes is not None:
            await self.processes.close(session_id)
        await self.policies.loopbacks.close(session_id)


def workspace(root: str) -> Path:
    """``root`` as a session's folder: resolved, refused unless absolute and existing."""
    folder = _folder(root)
    if not folder.is_absolute():
        raise InvalidParams(f"root must be an absolute path, not {root}", field="root")
    if not folder.is_dir():
        raise NotFound(f"root {root} is not an existing folder", root=root)
    return folder.resolve()


def _folder(root: str) -> Path:
    """``root`` with ``~`` expanded; a home folder that cannot be found is named."""
    try:
        return Path(root).expanduser()
    except RuntimeError as exc:  # ~user of a user this machine does not have
        raise NotFound(f"root {root} is not an existing folder: {exc}", root=root) from exc
