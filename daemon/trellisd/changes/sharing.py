"""Who else was at work in a git work tree while a command ran, so that what the command
changed is not taken for its session's alone when another session may have made it.

A command's snapshots (``git``) see the whole work tree: whatever another session did between
them lands in the command's diff too. So the daemon keeps, for each work tree (``Folders``, by
the real path of its top level), the commands running in it (each one's interval, from just
before its first snapshot to just after its last, on a clock of its own, no wall time) and the
file tools' writes (``write_file``, ``edit_file``: the path and the SHA-256 written). When a
command's diff is read (``Folder.settle``), each path it changed is judged against the other
sessions' work that overlapped it:

- written by another session's file tool, and holding what the tool wrote: left out, since
  the tool's own change set has it, exactly; holding something else: kept, shared with it;
- changed by another session's command that ran at the same time: kept on both sides, each
  marked shared with the other's session and turn;
- while that other command still runs (its diff not read yet), every path is marked shared
  with it; once its diff is read, the marks of the paths it did not change are taken back.
  A command whose diff could not be read keeps the marks it caused.

A command that ran alone keeps all it changed, unmarked. Paths here are relative to the work
tree's top level; each command's ``prefix`` (its session root's) turns them into its own.
What overlapped nothing that still runs is forgotten.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..records import Sharer

Marks = dict[str, set[Sharer]]
"""For some paths of a command's change set (relative to its session root): the other
sessions' turns it shares them with."""


@dataclass(eq=False)
class Command:
    """A command running, or run, in the work tree: whose, which step, and its interval."""

    sharer: Sharer
    run_id: str
    step: int
    prefix: str
    start: int
    end: int | None = None
    paths: frozenset[str] | None = None
    """What it changed (top-relative), once its diff is read; None: not known."""
    settled: bool = False

    def overlaps(self, start: int, end: int | None) -> bool:
        return (end is None or self.start < end) and (self.end is None or start < self.end)

    def own(self, path: str) -> str:
        return path[len(self.prefix) :] if path.startswith(self.prefix) else path


@dataclass(frozen=True)
class Write:
    """A file tool's write: whose, where (top-relative), when, and what it left (SHA-256)."""

    sharer: Sharer
    path: str
    start: int
    end: int
    sha256: str | None


@dataclass
class Judgement:
    """What a settled command records and what it changes of the others' marks."""

    kept: set[str] = field(default_factory=set)  # its paths, relative to its root
    marks: Marks = field(default_factory=dict)  # the marks on its own paths
    unshare: list[tuple[Command, Marks]] = field(default_factory=list)


class Folder:
    """One work tree's commands and writes. ``lock``: held while a command is settled and
    its change set recorded, so that another command's marks find its rows written."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self._clock = 0
        self.commands: list[Command] = []
        self.writes: list[Write] = []

    def tick(self) -> int:
        self._clock += 1
        return self._clock

    def begin(self, sharer: Sharer, run_id: str, step: int, prefix: str) -> Command:
        """A command is about to be snapshot before it runs."""
        command = Command(sharer, run_id, step, prefix, self.tick())
        self.commands.append(command)
        return command

    def ended(self, command: Command) -> None:
        """The command's snapshot after it is taken (or could not be)."""
        command.end = self.tick()

    def wrote(self, sharer: Sharer, path: str, start: int, sha256: str | None) -> None:
        """A file tool wrote ``path`` between ``start`` (a ``tick`` taken before) and now."""
        write = Write(sharer, path, start, self.tick(), sha256)
        if any(not c.settled and c.overlaps(write.start, write.end) for c in self.commands):
            self.writes.append(write)

    def settle(self, command: Command, after: Mapping[str, str | None] | None) -> Judgement:
        """Judge what ``command`` changed: ``after`` maps each top-relative path of its diff
        to the SHA-256 it holds after (None: absent); None when its diff could not be read."""
        if command.end is None:
            command.end = self.tick()
        command.settled = True
        if after is None:
            self._forget()
            return Judgement()
        command.paths = frozenset(after)
        end = command.end
        judgement = Judgement()
        kept = set(after)
        for write in self.writes:
            theirs = write.sharer.session_id != command.sharer.session_id
            if theirs and write.path in after and command.overlaps(write.start, write.end):
                if after[write.path] == write.sha256:
                    kept.discard(write.path)
                else:
                    judgement.marks.setdefault(command.own(write.path), set()).add(write.sharer)
        for other in self.commands:
            if other is command or other.sharer.session_id == command.sharer.session_id:
                continue
            if not other.overlaps(command.start, end):
                continue
            common = kept if other.paths is None else kept & other.paths
            for path in common:
                judgement.marks.setdefault(command.own(path), set()).add(other.sharer)
            if other.settled and other.paths is not None:
                # Its paths were marked shared with this command while it still ran.
                apart = {other.own(p): {command.sharer} for p in other.paths - common}
                if apart:
                    judgement.unshare.append((other, apart))
        judgement.kept = {command.own(p) for p in kept}
        self._forget()
        return judgement

    def _forget(self) -> None:
        """Drop what overlaps no command still running or not yet settled."""
        open_ = [c for c in self.commands if not c.settled]
        self.commands = [
            c
            for c in self.commands
            if not c.settled or any(o.overlaps(c.start, c.end) for o in open_)
        ]
        self.writes = [w for w in self.writes if any(o.overlaps(w.start, w.end) for o in open_)]


class Folders:
    """Each work tree's ``Folder``, by the real path of its top level (a few per daemon:
    kept while it runs)."""

    def __init__(self) -> None:
        self._folders: dict[str, Folder] = {}

    def of(self, top: Path) -> Folder:
        key = os.path.realpath(top)
        folder = self._folders.get(key)
        if folder is None:
            folder = self._folders[key] = Folder()
        return folder
