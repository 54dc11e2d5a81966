"""The walls built with Landlock, where bubblewrap cannot build its own (not installed, or
user namespaces off): weaker walls, never none.

``landlock_argv`` gives the argv prefix that runs a program under ``landlock``'s runner
(``python -m trellisd.sandbox.landlock``), which restricts itself and then becomes the
program. ``ProtectedCopies`` keeps a copy of the protected paths that exist, for ``Launch.sweep``
to put back. What these walls are, against bubblewrap's:

- the hidden paths are unreadable (there, but unreadable; not empty);
- writable: the root (``workspace-write``; nothing of it under ``read-only``), the named
  caches, a linked worktree's git folders, and a private temporary folder the daemon makes
  for the call in the host's temporary folder (``TMPDIR`` points at it) and removes after;
  everything else is read-only;
- network ``False``: every TCP bind and connect is denied (Landlock ABI 4 or later), the
  program's own loopback too, so a test suite's local server cannot listen; ``True``: the
  host's network; a list cannot be built (Landlock's rules name ports, not hosts, and the
  network gate needs a network namespace): the call fails, never runs unconfined;
- the protected paths in the root cannot be made read-only (a rule on the root covers all
  below it): each one that exists is copied before the program runs, and after it, a
  protected path the program changed or removed is moved to the quarantine and its copy put
  back, as one it created is taken away; the call is reported as refused. While the program
  runs, a changed hook is there for a ``git`` started outside the walls to run;
- the program has no capability, root's neither (``landlock.drop_capabilities``), and the
  daemon is non-dumpable: its ``/proc/<pid>/environ`` and memory are out of reach;
- no pid, mount or network namespace: the program sees the user's other processes and
  their command lines, the
  host's ``/tmp`` and ``/run`` (and can ``connect`` to a socket there), and the private
  temporary folder's size is not bounded; the process bound (``limits``) counts, for a user
  other than root, every process of that user, not the program's only.
"""

from __future__ import annotations

import contextlib
import filecmp
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .landlock import abi_version, keep_environment_private, landlock_prefix
from .walls import PROTECTED, Walls, hidden_around

NETWORK_ABI = 4
"""The Landlock ABI that can deny TCP bind and connect."""


def landlock_problem(walls: Walls, abi: int) -> str | None:
    """Why Landlock (of ``abi``) cannot build ``walls`` here, or None."""
    if abi < 1:
        return "this kernel offers no Landlock either"
    if isinstance(walls.network, tuple):
        return (
            "Landlock, the fallback, cannot limit the network to a list of hosts (that needs"
            " a network namespace); set policy.network to true or false"
        )
    if walls.network is False and abi < NETWORK_ABI:
        return (
            f"this kernel's Landlock (ABI {abi}) cannot deny the network (ABI {NETWORK_ABI}"
            " is needed)"
        )
    return None


def available(walls: Walls) -> str | None:
    """Why Landlock cannot build ``walls`` on this kernel, or None."""
    return landlock_problem(walls, abi_version())


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def landlock_argv(walls: Walls, temp: Path, linked: Sequence[Path] = ()) -> list[str]:
    """The prefix that runs a program inside ``walls`` built with Landlock; ``temp`` is the
    call's private temporary folder, ``linked`` the git folders of a linked worktree. The
    daemon makes itself non-dumpable first: the program sees its process."""
    keep_environment_private()
    caches = [_real(cache) for cache in walls.writable if os.path.isdir(cache)]
    shown = [_real(walls.root), *linked, *caches]
    writable = [temp, *shown] if walls.mode == "workspace-write" else [temp]
    hidden: list[Path] = []
    for secret in walls.hidden:
        if os.path.lexists(secret):
            hidden += hidden_around(_real(secret), shown)
    return landlock_prefix(hidden, writable, walls.network is True)


@contextlib.contextmanager
def private_temp() -> Iterator[Path]:
    """A temporary folder of the call's own, removed after it."""
    folder = Path(tempfile.mkdtemp(prefix="trellisd-tmp-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _same(one: Path, other: Path) -> bool:
    """Whether two trees are alike: the same kinds, names, link targets and contents."""
    if one.is_symlink() or other.is_symlink():
        return one.is_symlink() and other.is_symlink() and os.readlink(one) == os.readlink(other)
    if one.is_dir() and other.is_dir():
        names = sorted(os.listdir(one))
        if names != sorted(os.listdir(other)):
            return False
        return all(_same(one / name, other / name) for name in names)
    if one.is_file() and other.is_file():
        return filecmp.cmp(one, other, shallow=False)
    return False


@dataclass
class ProtectedCopies:
    """Copies of the protected paths that exist (``name`` for the report, the path, its
    copy), kept in ``folder`` until ``restore``."""

    folder: Path
    kept: list[tuple[str, Path, Path]]

    @classmethod
    def take(cls, walls: Walls, linked: Sequence[Path]) -> ProtectedCopies:
        root = _real(walls.root)
        paths = [(name, root / name) for name in PROTECTED]
        for folder in linked:
            paths += [(str(folder / part), folder / part) for part in ("hooks", "config")]
        into = Path(tempfile.mkdtemp(prefix="trellisd-protected-"))
        kept: list[tuple[str, Path, Path]] = []
        for number, (name, path) in enumerate(paths):
            if not os.path.lexists(path):
                continue
            copy = into / str(number)
            try:
                if path.is_dir() and not path.is_symlink():
                    shutil.copytree(path, copy, symlinks=True)
                else:
                    shutil.copy2(path, copy, follow_symlinks=False)
            except (OSError, shutil.Error):
                continue
            kept.append((name, path, copy))
        return cls(into, kept)

    def restore(self, into: Path | None) -> list[str]:
        """Put back each protected path the program changed or removed (the changed one
        moved into ``into``, or removed when None); their names. Then drop the copies."""
        changed: list[str] = []
        try:
            for name, path, copy in self.kept:
                with contextlib.suppress(OSError):
                    if os.path.lexists(path) and _same(path, copy):
                        continue
                changed.append(name)
                with contextlib.suppress(OSError, shutil.Error):
                    if os.path.lexists(path):
                        if into is not None:
                            aside = into / name.lstrip("/")
                            aside.parent.mkdir(parents=True, exist_ok=True)
                            shutil.move(path, aside)
                        elif path.is_dir() and not path.is_symlink():
                            shutil.rmtree(path)
                        else:
                            path.unlink()
                    shutil.move(copy, path)
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)
        return changed

    def drop(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
