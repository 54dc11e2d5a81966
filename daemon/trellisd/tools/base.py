"""The seam for the tools of the agent loop: a ``Tool`` runs with a ``ToolContext`` confined
to the session root and answers with text for the model. A ``ToolFailure`` is a result too:
the model is told what went wrong and can adapt.

Before it runs, a tool says what it is about to do as an ``Action`` (read a path, write a
path, run a command line), so the session's policy can allow it, ask the user, or refuse it
without the tool having touched anything. Paths are confined here, once, for every tool:
``'..'``, absolute paths outside the root and symlinks that lead out are refused before
anything is read or written.

Checking a path and then opening it by name would leave a gap: a folder swapped for a
symlink in between leads the open outside the root. So a tool resolves a path once
(``resolve``, which the policy judges) and then opens what it found with ``open`` or
``folder``: from a descriptor of the root, one component at a time, each relative to the
descriptor of the folder before it and none followed if it is a symlink (``O_NOFOLLOW``).
A symlink that appears on the way since is refused; nothing outside the root is touched.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from ..plans import PlanEntry
    from ..sandbox.walls import Walls

ActionKind = Literal["read", "write", "exec"]


class ToolFailure(Exception):
    """The tool could not do what was asked; the message goes back to the model."""


@dataclass(frozen=True)
class Action:
    """What a tool is about to do: ``target`` is the root-relative posix path (``.`` for the
    root itself) for a read or a write, the command line (``shlex.join(argv)``) for an exec."""

    kind: ActionKind
    target: str
    escalate: bool = False
    """A command asked to run outside the walls: a person is always asked, and no grant
    covers it."""
    argv: tuple[str, ...] | None = field(default=None, compare=False)
    """An exec's words as the program gets them (``target`` joins them), which a rule
    (``policy.rules``) is matched on; None for a read, a write, an MCP tool's call. Grants
    compare kind and target only."""


class EditorFiles(Protocol):
    """The editor's own view of the files (ACP's ``fs`` methods), for the file tools: a read
    sees unsaved buffers, a write lands in the editor, which tracks the edit. Paths are real
    paths that ``ToolContext.resolve`` found (and the policy judged) first. A read answers
    None when the editor does not read files or could not give this one, a write False when
    the editor does not write files: the tool then uses the disk. A write the editor refused
    raises ``ToolFailure`` with its reason."""

    async def read_text(self, path: Path) -> str | None: ...

    async def write_text(self, path: Path, text: str) -> bool: ...


@dataclass(frozen=True)
class ToolContext:
    """Where a tool works. ``may_read`` is asked, with a root-relative posix path, before a
    tool that reads many files (``search``) opens one of them: the session's policy plugs in
    here so that a search does not show what a read would be refused. None reads everything.
    ``editor``: the editor's files, which ``read_file``, ``write_file`` and ``edit_file`` go
    through when it is there.
    ``output`` is given a running program's output as it is produced (``run_command``), for
    the editor to show live; None when no one watches.
    ``killed`` is told (the tool's name and the program's argv) when a cancel had to kill a
    running program: it did not end when asked, and what it left needs a person's decision.
    ``walls``: what confines the programs a tool starts.
    """

    root: Path
    may_read: Callable[[str], bool] | None = None
    editor: EditorFiles | None = None
    output: Callable[[bytes], None] | None = None
    killed: Callable[[str, tuple[str, ...]], None] | None = None
    walls: Walls | None = None
    """The walls the programs a tool starts run in (``sandbox``); None: none."""
    child: Callable[[str], None] | None = None
    """Told the id of the child session a ``task`` call started, for the editor to show it
    under the call; None when no one watches."""
    plan: Callable[[tuple[PlanEntry, ...]], Awaitable[None]] | None = None
    """Keeps the plan an ``update_plan`` call gave as the turn's, and tells the editor;
    None outside a running call."""

    def resolve(self, given: Any, *, field: str = "path") -> Path:
        """The real path of ``given`` under the root; refuses anything that leads out.

        ``given`` is relative to the root, or absolute inside it. Symlinks are followed as
        far as they go (a dangling one to its would-be target), so a symlinked file, a
        symlinked folder on the way and a dangling symlink are all judged by where they
        really lead. The answer may not exist yet (a file about to be written).
        """
        if not isinstance(given, str) or not given:
            raise ToolFailure(f"{field} must be a non-empty string")
        if "\x00" in given:
            raise ToolFailure(f"{field} must not contain a NUL character")
        root = self.real_root
        candidate = Path(given)
        if ".." in candidate.parts:
            raise ToolFailure(f"{given} leads out of the session root ('..' is refused)")
        if candidate.is_absolute():
            lexical = Path(os.path.normpath(candidate))
            if not (within(lexical, root) or within(lexical, Path(os.path.abspath(self.root)))):
                raise ToolFailure(
                    f"{given} is outside the session root; give a path relative to the root"
                )
        try:
            real = Path(os.path.realpath(root / candidate))
        except OSError as exc:  # a symlink on the way vanished while it was read
            raise ToolFailure(f"{given} changed while it was being resolved; try again") from exc
        if not within(real, root):
            raise ToolFailure(f"{given} leads out of the session root through a symlink")
        return real

    @property
    def real_root(self) -> Path:
        return Path(os.path.realpath(self.root))

    def relative(self, path: Path) -> str:
        """The root-relative posix form of a real path under the root; ``.`` for the root."""
        rel = path.relative_to(self.real_root).as_posix()
        return rel or "."

    def readable(self, relative: str) -> bool:
        return self.may_read is None or self.may_read(relative)

    def open(self, path: Path, flags: int, mode: int = 0o666) -> int:
        """A descriptor of ``path`` (a real path from ``resolve``), opened with ``flags``
        without following a symlink anywhere under the root; the caller closes it. Raises
        ``FileNotFoundError`` if it is gone, ``ToolFailure`` if a symlink is on the way."""
        *folders, last = self._parts(path) or ["."]
        parent = self._walk(path, folders, make=False)
        try:
            return self._step(path, parent, last, flags | os.O_NOFOLLOW, mode)
        finally:
            os.close(parent)

    def folder(self, path: Path, *, make: bool = False) -> int:
        """A descriptor of the folder ``path`` (a real path from ``resolve``), opened as
        ``open`` does; ``make`` creates the missing folders on the way, as ``mkdir -p``."""
        return self._walk(path, self._parts(path), make=make)

    def _parts(self, path: Path) -> list[str]:
        return [p for p in self.relative(path).split("/") if p != "."]

    def _walk(self, path: Path, parts: list[str], *, make: bool) -> int:
        fd = os.open(self.real_root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for part in parts:
                flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                try:
                    inner = self._step(path, fd, part, flags)
                except FileNotFoundError:
                    if not make:
                        raise
                    try:
                        os.mkdir(part, dir_fd=fd)
                    except FileExistsError:
                        pass
                    inner = self._step(path, fd, part, flags)
                os.close(fd)
                fd = inner
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _step(self, path: Path, folder: int, name: str, flags: int, mode: int = 0o666) -> int:
        try:
            return os.open(name, flags | os.O_CLOEXEC, mode, dir_fd=folder)
        except OSError as exc:
            if exc.errno == errno.ELOOP or (
                exc.errno == errno.ENOTDIR and _is_symlink(folder, name)
            ):
                raise ToolFailure(
                    f"{self.relative(path)} changed while in use: a symlink appeared on its"
                    " way; nothing was done"
                ) from exc
            if exc.errno == errno.ENOTDIR and flags & os.O_DIRECTORY:
                raise NotADirectoryError(exc.errno, exc.strerror, name) from exc
            raise


def _is_symlink(folder: int, name: str) -> bool:
    try:
        os.readlink(name, dir_fd=folder)
    except OSError:
        return False
    return True


def within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


class Tool(Protocol):
    name: str
    description: str
    parameters: dict[str, Any]

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action | None:
        """What ``run`` would do with these arguments, for the policy to judge; None when it
        touches nothing (``update_plan``), and no policy applies. Touches nothing; raises
        ``ToolFailure`` for bad arguments and paths that lead out."""
        ...

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        """Do the work (blocking work in a thread) and answer with text for the model.
        Cancellation must stop the work: a command is killed, nothing is left half-written."""
        ...
