"""Change sets: what each turn changed in the workspace, the net change between two turns,
and putting files back (branching with ``restoreFiles``, reverting one turn).

While a turn runs, ``Watch`` sits around each tool call: for ``write_file`` and
``edit_file`` it reads the file before and after; in a git work tree, for ``run_command``
it snapshots the work tree before and after (``changes.git``). Outside git only the file
tools are tracked. A tracking failure is logged and never fails the tool.

Several sessions may work in one work tree at once, and a command's snapshots see what the
others do meanwhile. Each command and each file write is told to the work tree's ``Folder``
(``changes.sharing``), which judges a command's diff against the other sessions' work that
overlapped it: what another session's file tool wrote is left out, and what another session's
command running at the same time changed too is marked shared on both sides. A restore of a
shared path is a ``Conflict`` (``data.shared`` names the other turns), unless ``force``; a
restore's own writes count as its session's.

The snapshot after a command, and the reading of what it changed, go on while the model
is asked its next step: the next tool call waits for them before it starts, and so do the
turn's check and its end, so a turn's change set is whole when the turn answers.

Putting files back never overwrites a person's edit: each file must be as the agent left it
(the state the change sets say it has at the head, or after the reverted turn); otherwise
nothing is done and the answer is ``Conflict`` with ``data.paths``, unless ``force``.
Writes go through the tools' own helpers: no symlink followed, nothing outside the root, and
paths the session's policy refuses to write are left alone. A protected path (``.git``,
``.vscode``, ...: see ``policy.layers``) is written only once the user allowed it, asked as a
tool's write is (``Asker``), whatever rule allows it: a policy that came with a file (an
imported session, ``.trellisd.toml``) cannot restore a git hook unasked. With nobody to ask,
or a denial, it is left alone (``protected``); after any question the files are checked again.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from ..changes import ABSENT, Content, GitTree, Kind, read_content, unified_diff
from ..changes.git import GitError
from ..changes.sharing import Command, Folder, Folders
from ..errors import Conflict, TrellisError
from ..policy import protected_entry
from ..records import FileChange, Restored, Session, Sharer, Skipped, ToolCall, TurnRef
from ..store.changes import Marks, Recorded
from ..store.facade import AsyncStore
from ..tools.base import Action, ToolContext, ToolFailure
from ..tools.edit import atomic_write, proposed, remove_file
from ..vocabulary import Decision, EventKind
from .policies import Policies
from .running import Running
from .seams import summary_line

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StepEdit:
    """What one step wrote to one text file (``path`` relative to the root)."""

    step: int
    path: str
    old_text: str | None
    new_text: str


Plan = dict[str, tuple[Content, Content]]
"""For each path: the content it should have now, and the content to put there."""

Shares = dict[str, frozenset[Sharer]]
"""For the paths of a plan another session may have changed too: those sessions' turns."""


class Asker(Protocol):
    """Who is asked before a restore writes a protected path: the editors following the
    session, through ``session/requestApproval``."""

    def can_ask(self, session_id: str) -> bool:
        """Whether any window follows the session now, to be asked."""
        ...

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision: ...


ALLOWED = (
    Decision.ALLOW,
    Decision.ALLOW_ALWAYS,
    Decision.ALLOW_ALWAYS_PROJECT,
    Decision.ALLOW_RULE,
    Decision.ALLOW_RULE_PROJECT,
)


def _net(changes: Iterable[Recorded]) -> Plan:
    """Each path's first ``before`` and last ``after``."""
    out: Plan = {}
    for c in changes:
        first = out.get(c.path, (c.before, c.after))[0]
        out[c.path] = (first, c.after)
    return out


def _shares(changes: Iterable[Recorded]) -> Shares:
    """Each path's marks, over all its changes."""
    out: dict[str, set[Sharer]] = {}
    for c in changes:
        if c.shared:
            out.setdefault(c.path, set()).update(c.shared)
    return {path: frozenset(sharers) for path, sharers in out.items()}


def _state(changes: list[Recorded], path: str, fallback: list[Recorded]) -> Content:
    """``path`` as ``changes`` left it; if they never touched it, as it was before
    ``fallback`` first did."""
    for c in reversed(changes):
        if c.path == path:
            return c.after
    return next(c.before for c in fallback if c.path == path)


NO_VARIABLES: Mapping[str, str] = MappingProxyType({})


class ChangeService:
    def __init__(
        self,
        store: AsyncStore,
        running: Running,
        policies: Policies,
        state_dir: Path,
        asker: Asker | None = None,
        git_environment: Mapping[str, str] = NO_VARIABLES,
    ) -> None:
        self.store, self.running, self.policies = store, running, policies
        self.state_dir, self.asker = state_dir, asker
        self.trees = Trees(state_dir, git_environment)
        self.folders = Folders()

    def watch(self, ref: TurnRef, context: ToolContext) -> Watch:
        return Watch(self.store, ref, context, self.trees, self.folders)

    async def turn(self, turn_id: str) -> list[FileChange]:
        """What the turn's own steps changed (not a later revert of them)."""
        changes = await self.store.changes.of_turns([turn_id])
        if not changes:
            await self.store.changes.turn_run(turn_id)  # NotFound for an unknown turn
        own = [c for c in changes if c.source != "revert"]
        return await self._listed(_net(own), _shares(own))

    async def step_edits(self, turn_id: str) -> list[StepEdit]:
        """Each text file the turn's steps wrote, step by step, with its text before (None:
        the file was new) and after; binary, too large and deleted files are left out."""
        out = []
        for c in await self.store.changes.of_turns([turn_id]):
            if c.source == "revert" or c.step is None or c.after.kind != Kind.TEXT:
                continue
            before, after = (
                await self.store.changes.load(c.before),
                await self.store.changes.load(c.after),
            )
            if after.data is None or (before.kind == Kind.TEXT and before.data is None):
                continue
            old = None if before.data is None else before.data.decode("utf-8", "replace")
            out.append(StepEdit(c.step, c.path, old, after.data.decode("utf-8", "replace")))
        return out

    async def between(
        self, session_id: str, from_turn: str | None, to_turn: str | None
    ) -> list[FileChange]:
        return await self._listed(*await self._between(session_id, from_turn, to_turn))

    async def restore(
        self, session: Session, head: str | None, target: str | None, force: bool
    ) -> Restored:
        """Put every file the turns between ``head`` and ``target`` changed as it is at
        ``target``. Call before the head moves (a ``Conflict`` leaves everything as it was)."""
        plan, shares = await self._between(session.session_id, head, target)
        restored, _ = await self._put_back(
            session, plan, force, target or head, "session/branch", shares
        )
        return restored

    async def revert(self, turn_id: str, force: bool) -> Restored:
        """Undo one turn's changes alone; recorded as changes (``revert``) and an event
        (``reverted``) of that turn's run."""
        turn = await self.store.changes.turn_run(turn_id)
        self.running.refuse(turn.session_id, "revert a turn")
        await self.store.leases.claim(turn.session_id)
        session = await self.store.sessions.get(turn.session_id)
        own = [c for c in await self.store.changes.of_turns([turn_id]) if c.source != "revert"]
        plan = {path: (after, before) for path, (before, after) in _net(own).items()}
        restored, found = await self._put_back(
            session, plan, force, turn_id, "turn/revert", _shares(own)
        )
        await self.store.changes.record(
            turn.run_id,
            None,
            "revert",
            [(path, found[path], plan[path][1]) for path in restored.restored],
        )
        await self.store.runs.add_event(
            turn.run_id,
            EventKind.REVERTED,
            None,
            {
                "files": restored.restored,
                "skipped": [{"path": s.path, "reason": s.reason} for s in restored.skipped],
                "force": force,
            },
        )
        return restored

    async def _between(self, session_id: str, a: str | None, b: str | None) -> tuple[Plan, Shares]:
        for turn_id in (a, b):
            if turn_id is not None:  # NotFound, or InvalidParams for another session's turn
                await self.store.sessions.turn(session_id, turn_id)
        path_a = {t.turn_id for t in await self.store.sessions.history_to(session_id, a)}
        path_b = {t.turn_id for t in await self.store.sessions.history_to(session_id, b)}
        changes_a = await self.store.changes.of_turns(sorted(path_a))
        changes_b = await self.store.changes.of_turns(sorted(path_b))
        apart = path_a ^ path_b
        touched = sorted({c.path for c in (*changes_a, *changes_b) if c.turn_id in apart})
        plan: Plan = {}
        for path in touched:
            at_a = _state(changes_a, path, changes_b)
            at_b = _state(changes_b, path, changes_a)
            if not at_a.same(at_b):
                plan[path] = (at_a, at_b)
        shares = _shares(c for c in (*changes_a, *changes_b) if c.turn_id in apart)
        return plan, {path: sharers for path, sharers in shares.items() if path in plan}

    async def _listed(self, plan: Plan, shares: Shares) -> list[FileChange]:
        out = []
        for path, (before, after) in sorted(plan.items()):
            if before.same(after):
                continue
            before, after = (
                await self.store.changes.load(before),
                await self.store.changes.load(after),
            )
            kinds = (before.kind, after.kind)
            out.append(
                FileChange(
                    path,
                    "added"
                    if before.kind == Kind.ABSENT
                    else "deleted"
                    if after.kind == Kind.ABSENT
                    else "modified",
                    await asyncio.to_thread(unified_diff, path, before, after),
                    binary=Kind.BINARY in kinds,
                    too_large=Kind.TOO_LARGE in kinds,
                    shared_with=tuple(sorted(shares.get(path, ()))),
                )
            )
        return out

    async def _put_back(
        self,
        session: Session,
        plan: Plan,
        force: bool,
        about: str | None,
        method: str,
        shares: Shares,
    ) -> tuple[Restored, dict[str, Content]]:
        """Check every file, ask about the protected ones, then write them; answers what
        was done and what each restored file held before. The turn ``about`` (the new
        head, the reverted turn) and ``method`` (the request's) name the restore in a
        question to the user. A path another session may have changed too (``shares``) is
        a ``Conflict``, unless ``force``."""
        if shares and not force:
            raise _shared_conflict(shares)
        context = ToolContext(Path(session.root))
        found = await self._found(context, plan, force)
        policy = await self.policies.of(session)
        skipped: list[Skipped] = []
        writes: dict[str, Content] = {}
        ask: dict[str, Content] = {}
        for path, (_, wanted) in sorted(plan.items()):
            wanted = await self.store.changes.load(wanted)
            ruling = policy.check(Action("write", path)).ruling
            if not wanted.restorable:
                skipped.append(Skipped(path, wanted.kind.value))
            elif ruling == "refuse":
                skipped.append(Skipped(path, "policy"))
            elif found[path].same(wanted):
                continue
            elif protected_entry(path) is not None:
                ask[path] = wanted
            else:
                writes[path] = wanted
        if ask:
            ref = await self._ref(session, about)
            for path, wanted in ask.items():
                if ref is not None and await self._allowed(ref, method, path, found[path], wanted):
                    writes[path] = wanted
                else:
                    skipped.append(Skipped(path, "protected"))
            # The user took their time: what was checked before may have changed since.
            self.running.refuse(session.session_id, "restore files")
            found = await self._found(context, plan, force)
        restored: list[str] = []
        git = await self.trees.of(session.session_id, context.real_root) if writes else None
        folder = None if git is None else self.folders.of(git.place.top)
        for path, wanted in sorted(writes.items()):
            start = 0 if folder is None else folder.tick()
            try:
                await asyncio.to_thread(_put, context, path, wanted)
            except (ToolFailure, OSError) as exc:
                log.warning("could not restore %s: %s", path, exc)
                skipped.append(Skipped(path, "unwritable"))
                continue
            restored.append(path)
            if folder is not None and git is not None and about is not None:
                # Another session's command running now does not take this write for its own.
                sharer = Sharer(session.session_id, about)
                folder.wrote(sharer, git.prefix + path, start, wanted.sha256)
        skipped.sort(key=lambda s: s.path)
        return Restored(restored, skipped), found

    async def _found(self, context: ToolContext, plan: Plan, force: bool) -> dict[str, Content]:
        """What each file to put back holds now; ``Conflict`` when one is not as the agent
        left it, unless ``force``."""
        found: dict[str, Content] = {}
        conflicts = []
        for path, (expected, _) in sorted(plan.items()):
            now = await asyncio.to_thread(read_content, context, path)
            found[path] = now if now is not None else ABSENT
            if now is None or not now.same(expected):
                conflicts.append(path)
        if conflicts and not force:
            raise Conflict(
                f"{len(conflicts)} file(s) changed since the agent last wrote them:"
                f" {', '.join(conflicts[:5])}{' …' if len(conflicts) > 5 else ''};"
                " nothing was restored (force: true overwrites them)",
                paths=conflicts,
            )
        return found

    async def _ref(self, session: Session, about: str | None) -> TurnRef | None:
        """The turn a question about a restore names; None when no window follows the
        session to be asked."""
        if about is None or self.asker is None or not self.asker.can_ask(session.session_id):
            log.info("a restore left protected files as they were: nobody could be asked")
            return None
        turn = await self.store.changes.turn_run(about)
        return TurnRef(session.session_id, turn.turn_id, turn.run_id)

    async def _allowed(
        self, ref: TurnRef, method: str, path: str, now: Content, wanted: Content
    ) -> bool:
        """Whether the user allows the restore to write the protected ``path``."""
        if self.asker is None:
            return False
        request: dict[str, Any] = {
            "tool": method,
            "arguments": {"path": path},
            "summary": summary_line(f"{method} wants to write {path}"),
            "diff": await asyncio.to_thread(unified_diff, path, now, wanted),
        }
        return await self.asker.ask_approval(ref, request) in ALLOWED


def _shared_conflict(shares: Shares) -> Conflict:
    paths = sorted(shares)
    return Conflict(
        f"{len(paths)} file(s) may hold another session's work, changed at the same time:"
        f" {', '.join(paths[:5])}{' …' if len(paths) > 5 else ''};"
        " nothing was restored (force: true overwrites them)",
        paths=paths,
        shared=[
            {
                "path": path,
                "sharedWith": [
                    {"sessionId": s.session_id, "turnId": s.turn_id} for s in sorted(shares[path])
                ],
            }
            for path in paths
        ],
    )


def _put(context: ToolContext, path: str, content: Content) -> None:
    real = context.resolve(path)
    if content.kind == Kind.ABSENT:
        remove_file(real, context)
    else:
        atomic_write(real, content.data or b"", context)


async def approval_diff(call: ToolCall, context: ToolContext) -> str | None:
    """The unified diff of what ``write_file`` or ``edit_file`` would write against the file
    on disk now; None for other tools and for edits that would fail."""

    def compute() -> str | None:
        found = proposed(call.name, call.arguments, context)
        if found is None:
            return None
        path, data = found
        relative = context.relative(path)
        before = read_content(context, relative)
        return unified_diff(relative, before or ABSENT, Content.of(data))

    return await asyncio.to_thread(compute)


class Trees:
    """Each session's git work tree, looked for once and kept from turn to turn (its private
    index then needs no ``write-tree`` when nothing changed since the last snapshot).
    ``environment``: the daemon's, which git runs in."""

    KEPT = 64

    def __init__(self, state: Path, environment: Mapping[str, str] = NO_VARIABLES) -> None:
        self.state, self.environment = state, environment
        self._trees: OrderedDict[tuple[str, Path], GitTree] = OrderedDict()

    async def of(self, session_id: str, root: Path) -> GitTree | None:
        key = (session_id, root)
        if (tree := self._trees.get(key)) is not None:
            self._trees.move_to_end(key)
            return tree
        tree = await asyncio.to_thread(GitTree.find, root, self.state, session_id, self.environment)
        if tree is not None:  # outside git: looked for again, in case of a ``git init``
            self._trees[key] = tree
            while len(self._trees) > self.KEPT:
                self._trees.popitem(last=False)
        return tree

    def forget(self, session_id: str, root: Path) -> None:
        self._trees.pop((session_id, root), None)


class Watch:
    """Records what each of a turn's tool calls changed in the workspace. In a git work tree
    each command and each file tool's write is told to the work tree's ``Folder``, which
    judges what of a command's diff another session may have made (``changes.sharing``)."""

    def __init__(
        self,
        store: AsyncStore,
        ref: TurnRef,
        context: ToolContext,
        trees: Trees,
        folders: Folders,
    ) -> None:
        self.store, self.ref, self.context, self.trees = store, ref, context, trees
        self.folders = folders
        self.sharer = Sharer(ref.session_id, ref.turn_id)
        self._git: GitTree | None | bool = False  # False: not looked for yet
        self._pending: set[asyncio.Task[None]] = set()

    @asynccontextmanager
    async def around(self, action: Action, step: int) -> AsyncIterator[None]:
        await self.settle()
        if action.kind == "write":
            git = await self._tree()
            folder = None if git is None else self.folders.of(git.place.top)
            start = 0 if folder is None else folder.tick()
            before = await asyncio.to_thread(read_content, self.context, action.target)
            try:
                yield
            finally:
                after = await asyncio.shield(self._file_after(action.target, before, step))
                if folder is not None and git is not None and after is not None:
                    folder.wrote(self.sharer, git.prefix + action.target, start, after.sha256)
        elif action.kind == "exec" and (git := await self._tree()) is not None:
            folder = self.folders.of(git.place.top)
            command = folder.begin(self.sharer, self.ref.run_id, step, git.prefix)
            tree: str | None = None
            try:
                tree = await self._snapshot(git, start=True)
            finally:
                if tree is None:  # not tracked: its marks on others stay
                    folder.settle(command, None)
            try:
                yield
            finally:
                if tree is not None:
                    task = asyncio.create_task(self._tree_after(git, tree, step, folder, command))
                    self._pending.add(task)
                    task.add_done_callback(self._pending.discard)
        else:
            yield

    async def settle(self) -> None:
        """Wait until what the last command changed is recorded."""
        while self._pending:
            done = await asyncio.shield(asyncio.gather(*self._pending, return_exceptions=True))
            for result in done:
                if isinstance(result, Exception):
                    log.error("a change set could not be recorded", exc_info=result)

    async def _tree(self) -> GitTree | None:
        if self._git is False:
            self._git = await self.trees.of(self.ref.session_id, self.context.real_root)
        return self._git if isinstance(self._git, GitTree) else None

    async def _snapshot(self, git: GitTree, start: bool = False) -> str | None:
        try:
            return await asyncio.to_thread(git.snapshot, start)
        except (GitError, OSError) as exc:
            log.warning("the work tree could not be snapshot; this command is not tracked: %s", exc)
            self.trees.forget(self.ref.session_id, self.context.real_root)
            return None

    async def _file_after(self, path: str, before: Content | None, step: int) -> Content | None:
        """What the file holds after the write, once recorded; None when unchanged."""
        after = await asyncio.to_thread(read_content, self.context, path)
        if before is None or after is None or before.same(after):
            return None
        await self._record(step, "tool", [(path, before, after)])
        return after

    async def _tree_after(
        self, git: GitTree, tree: str, step: int, folder: Folder, command: Command
    ) -> None:
        try:
            after = await self._snapshot(git)
            folder.ended(command)
            files = None if after is None else await self._read(git, tree, after)
            async with folder.lock:
                seen = None if files is None else {git.prefix + p: a.sha256 for p, _, a in files}
                judgement = folder.settle(command, seen)
                if files:
                    kept = [f for f in files if f[0] in judgement.kept]
                    await self._record(step, "command", kept, judgement.marks)
                for other, marks in judgement.unshare:
                    await self._unshare(other, marks)
        finally:
            if not command.settled:
                folder.settle(command, None)

    async def _read(
        self, git: GitTree, tree: str, after: str
    ) -> list[tuple[str, Content, Content]] | None:
        try:
            return await asyncio.to_thread(lambda: git.contents(git.changes(tree, after)))
        except (GitError, OSError) as exc:
            log.warning("what a command changed could not be read: %s", exc)
            return None

    async def _record(
        self,
        step: int,
        source: str,
        files: list[tuple[str, Content, Content]],
        shared: Marks | None = None,
    ) -> None:
        try:
            await self.store.changes.record(self.ref.run_id, step, source, files, shared)
        except TrellisError as exc:
            log.warning("a change set could not be recorded: %s", exc.message)

    async def _unshare(self, other: Command, marks: Marks) -> None:
        try:
            await self.store.changes.unshare(other.run_id, other.step, marks)
        except TrellisError as exc:
            log.warning("a change set's marks could not be taken back: %s", exc.message)
