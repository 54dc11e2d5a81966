"""Building the walls on Linux with bubblewrap (``bwrap``), and the sweep after a program.

``confine`` gives the argv that runs a program inside ``Walls``; where bubblewrap cannot build
them (not installed, user namespaces off) it builds Landlock's weaker walls instead
(``landlock_walls``), and where neither can, the program does not run. With bubblewrap: a user
namespace (``--unshare-user``, with no further user namespaces inside) whose process has no
capability, its own process ids (``--unshare-pid``, a new ``/proc``: the daemon and every other
process of the host are out of sight, their ``/proc/<pid>/environ`` too), its own IPC and host
name, its own network unless the network is ``True`` (the session's private loopback, which its
walled programs share: ``netns.Loopback``; where that cannot be had, ``--unshare-net``, a
loopback of the program's own), a new session (``--new-session``, so it cannot type into the
editor's terminal) and ``--die-with-parent``: when the call ends and kills bwrap, the kernel
kills every process inside, a ``setsid`` grandchild too.

The file system, in the order the mounts are made (a later one covers an earlier one):

1. the host's ``/`` read-only; a new ``/dev`` and ``/proc``;
2. ``/run`` empty (the host's sockets are out of reach: a read-only mount does not stop
   ``connect`` on a socket), and ``/tmp`` a memory file system of ``temp_bytes``;
3. the root read-only (``read-only``) or writable (``workspace-write``), the named caches
   writable, and, when the root's ``.git`` is a linked worktree's pointer, that worktree's
   git folder and the common one writable (a commit must write there);
4. every protected path that exists (``walls.PROTECTED``), read-only, and every folder on
   the way to it bound over itself, so that it cannot be deleted, renamed or replaced
   (the kernel refuses to move or remove a mount point);
5. every secret that exists hidden: an empty read-only folder over a folder, ``/dev/null``
   over a file;
6. the folder of the network proxy's socket, when the network is a list.

A protected path that does not exist cannot be mounted over without creating it in the
user's tree, so it is not: ``Launch.sweep`` looks after the program has ended and every
process of the call is dead, takes away whatever protected path appeared (a file, a folder
with its content, a symlink: never followed; moved into the quarantine folder in the
daemon's store, which no program can reach) and names it, and the call is reported as
refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import network
from .landlock_walls import ProtectedCopies, available, landlock_argv, private_temp
from .limits import Bound, process_bound
from .walls import PROTECTED, Walls, hidden_around

Via = Literal["bubblewrap", "landlock"]

INSIDE_TEMP = "/tmp"
GATE_FOLDER = "/run/trellisd-network"
HOW_TO_TURN_OFF = (
    'to run programs without walls, set policy.sandbox to "off" (config file,'
    " initializationOptions or session/open's policy); `trellisd doctor` says what is missing"
)


class WallsUnavailable(Exception):
    """The walls cannot be built here: the program does not run. The message says why and
    how to choose ``"off"``."""


def find_bwrap() -> str | None:
    return shutil.which("bwrap")


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _exists(path: Path) -> bool:
    return os.path.lexists(path)


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def linked_git_folders(root: Path) -> tuple[Path, ...]:
    """When ``root/.git`` is a file (a linked worktree, a submodule): the git folder it
    names and that folder's common folder, which a commit writes to."""
    pointer = root / ".git"
    try:
        if not pointer.is_file() or pointer.is_symlink():
            return ()
        text = pointer.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ()
    if not text.startswith("gitdir:"):
        return ()
    gitdir = _real(root / text.removeprefix("gitdir:").strip())
    found = [gitdir]
    with contextlib.suppress(OSError, UnicodeDecodeError):
        common = (gitdir / "commondir").read_text(encoding="utf-8").strip()
        found.append(_real(gitdir / common))
    return tuple(p for p in found if p.is_dir())


def _protected_in(folder: Path) -> list[Path]:
    """The git folder's own protected parts (its hooks and config)."""
    return [folder / "hooks", folder / "config"]


@dataclass
class Launch:
    """A program about to run inside (or, ``off``, outside) the walls: ``argv`` and
    ``env`` to start it with."""

    argv: list[str]
    env: dict[str, str]
    walls: Walls
    missing: tuple[str, ...] = ()
    bound: Bound | None = None
    swept: list[str] = field(default_factory=list)
    moved_to: Path | None = None
    """Where ``sweep`` moved what it took away; None: removed."""
    via: Via | None = None
    """What built the walls; None: there are none (``off``)."""
    snapshot: ProtectedCopies | None = None
    """Copies of the protected paths that exist, where the walls could not keep them
    read-only (Landlock): ``sweep`` puts back what the program changed."""

    def record(self) -> dict[str, Any]:
        """What a step's record says of the walls the program ran in, and what built them."""
        if self.via is None:
            return self.walls.record()
        return {**self.walls.record(), "via": self.via}

    def sweep(self) -> list[str]:
        """Take away the protected paths the program created (they were missing before it
        ran), and, where the walls could not keep them read-only, put back those it changed
        or removed: what is taken away is moved into the walls' ``quarantine`` folder when
        there is one (nothing is lost, should someone else have made one meanwhile), else
        removed. Their names (root-relative in the root). Call once every process of the
        call is dead."""
        root = self.walls.root
        into = self.walls.quarantine
        if into is not None:
            into = into / f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"
        if self.snapshot is not None:
            self.swept.extend(self.snapshot.restore(into))
            self.snapshot = None
        for name in self.missing:
            path = root / name
            if not _exists(path):
                continue
            with contextlib.suppress(OSError, shutil.Error):
                if into is not None:
                    (into / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.move(path, into / name)
                elif stat.S_ISDIR(os.lstat(path).st_mode):
                    shutil.rmtree(path)
                else:
                    path.unlink()
            self.swept.append(name)
        if self.swept and into is not None:
            self.moved_to = into
        return self.swept


def daemon_program_folders() -> list[Path]:
    """The daemon's own Python and package, where the private ``/tmp`` or ``/run`` of the
    walls would hide them (a virtual environment or a checkout under ``/tmp``), shown again
    read-only: the relay runs inside the walls with the daemon's interpreter, and so does a
    command that names it. Only these folders, never what a call names: a folder under
    ``/tmp`` may hold another program's socket (a terminal multiplexer's, an agent's)."""
    import trellisd  # the package's own folder, wherever it is installed

    hidden = (Path(INSIDE_TEMP), Path("/run"))
    package = Path(trellisd.__file__).resolve().parents[1]
    kept: set[Path] = set()
    for folder in (Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), package):
        real = _real(folder)
        if real.is_dir() and any(real == h or h in real.parents for h in hidden):
            kept.add(real)
    return sorted(kept)


def bwrap_argv(
    walls: Walls,
    bwrap: str,
    cwd: Path,
    *,
    gate_folder: Path | None = None,
    shared_net: bool = False,
) -> list[str]:
    """bwrap's own arguments (up to and including ``--``) for ``walls``; see the module.
    ``shared_net``: bwrap starts inside the session's network (``netns.Loopback``), which
    it keeps rather than making one of its own."""
    root = _real(walls.root)
    out = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc"]
    if "--disable-userns" in _options.get(bwrap, ""):  # bubblewrap 0.8 and later
        out.append("--disable-userns")
    out += ["--unshare-uts", "--unshare-cgroup-try", "--die-with-parent", "--new-session"]
    if walls.network is not True and not shared_net:
        out.append("--unshare-net")
    out += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if os.path.isdir("/run"):
        out += ["--tmpfs", "/run"]
        resolver = Path("/run/systemd/resolve")
        if walls.network is True and resolver.is_dir():
            out += ["--ro-bind", str(resolver), str(resolver)]
    if "--size" in _options.get(bwrap, ""):  # bubblewrap 0.5 and later
        out += ["--size", str(walls.temp_bytes)]
    out += ["--tmpfs", INSIDE_TEMP]
    for own in daemon_program_folders():
        out += ["--ro-bind", str(own), str(own)]
    writes = walls.mode == "workspace-write"
    bind = "--bind" if writes else "--ro-bind"
    out += [bind, str(root), str(root)]
    pinned: list[Path] = []
    protected = [root / name for name in PROTECTED]
    if writes:
        for cache in walls.writable:
            if os.path.isdir(cache):
                out += ["--bind", str(_real(cache)), str(_real(cache))]
        for folder in linked_git_folders(root):
            out += ["--bind", str(folder), str(folder)]
            pinned.append(folder)
            protected += _protected_in(folder)
        for path in protected:
            if not _exists(path):
                continue
            real = _real(path)
            for parent in reversed(real.parents):
                if _within(parent, root) and parent != root and parent not in pinned:
                    out += ["--bind", str(parent), str(parent)]
                    pinned.append(parent)
            out += ["--ro-bind", str(real), str(real)]
    shown = [root, *(_real(c) for c in walls.writable if os.path.isdir(c))]
    for secret in walls.hidden:
        if _exists(secret):
            out += _hide(_real(secret), shown)
    if gate_folder is not None:
        out += ["--ro-bind", str(gate_folder), GATE_FOLDER]
    out += ["--chdir", str(_real(cwd)), "--"]
    return out


def _hide(secret: Path, shown: list[Path]) -> list[str]:
    """The mounts that hide ``secret``: an empty read-only folder over a folder,
    ``/dev/null`` over a file; around what is shown (``walls.hidden_around``)."""
    out: list[str] = []
    for path in hidden_around(secret, shown):
        if path.is_dir():
            out += ["--tmpfs", str(path), "--remount-ro", str(path)]
        else:
            out += ["--ro-bind", "/dev/null", str(path)]
    return out


def _missing(walls: Walls) -> tuple[str, ...]:
    if walls.mode != "workspace-write":
        return ()
    root = _real(walls.root)
    names = [name for name in PROTECTED if not _exists(root / name)]
    return tuple(names)


NO_BWRAP = (
    "bubblewrap (bwrap) is not installed, so no walls can be built (Debian: apt-get install"
    " bubblewrap)"
)


@contextlib.asynccontextmanager
async def confine(
    walls: Walls,
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    *,
    find: Callable[[], str | None] = find_bwrap,
) -> AsyncIterator[Launch]:
    """The launch of ``argv`` in ``cwd`` inside ``walls``: built with bubblewrap (``find``
    finds it), else, where bubblewrap cannot build them, with Landlock (``landlock_walls``
    says how they are weaker). On leaving, the network proxy, the private temporary folder
    and the process bound are released. Raises ``WallsUnavailable`` when neither can build
    the walls (never runs a program unconfined in a confined mode)."""
    if not walls.confined:
        yield Launch(list(argv), env, walls)
        return
    bwrap = await _builder(walls, find)
    bound = await asyncio.to_thread(process_bound, walls.processes)
    try:
        if bwrap is not None:
            async with _bubblewrapped(walls, bwrap, argv, cwd, env, bound) as launch:
                yield launch
        else:
            async with _landlocked(walls, argv, env, bound) as launch:
                yield launch
    finally:
        if bound is not None:
            bound.release()


async def _builder(walls: Walls, find: Callable[[], str | None]) -> str | None:
    """bwrap's path when it builds ``walls`` here; None when Landlock does instead.
    ``WallsUnavailable`` when neither can."""
    bwrap = find()
    problem = NO_BWRAP if bwrap is None else await bwrap_problem(bwrap)
    if problem is None:
        return bwrap
    fallback = available(walls)
    if fallback is not None:
        raise WallsUnavailable(
            f"the command was not run: {problem}, and {fallback}; {HOW_TO_TURN_OFF}"
        )
    return None


async def builder(walls: Walls, find: Callable[[], str | None] = find_bwrap) -> Via | None:
    """What would build ``walls`` here, without building them (for a record made before a
    program starts); None for ``off``. ``WallsUnavailable`` when nothing can."""
    if not walls.confined:
        return None
    return "bubblewrap" if await _builder(walls, find) is not None else "landlock"


@contextlib.asynccontextmanager
async def _bubblewrapped(
    walls: Walls,
    bwrap: str,
    argv: Sequence[str],
    cwd: Path,
    env: dict[str, str],
    bound: Bound | None,
) -> AsyncIterator[Launch]:
    inside_env = {**env, "TMPDIR": INSIDE_TEMP}
    async with contextlib.AsyncExitStack() as stack:
        gate_folder = None
        inner: list[str] = list(bound.inner) if bound is not None else []
        if isinstance(walls.network, tuple):
            gate_folder = Path(stack.enter_context(tempfile.TemporaryDirectory()))
            gate = await stack.enter_async_context(network.NetworkGate(walls.network, gate_folder))
            inside = f"{GATE_FOLDER}/{Path(gate.socket_path).name}"
            # A port the kernel picks, which the relay sets the proxy variables to: the
            # programs of a session share a loopback, each with a relay of its own.
            inner += network.relay_prefix(inside, 0)
        prefix = list(bound.outer) if bound is not None else []
        enter = None
        if walls.network is not True and walls.loopback is not None:
            enter = await walls.loopback.enter(bwrap)
        if enter is not None:
            prefix += enter
        shared = enter is not None
        full = prefix + bwrap_argv(walls, bwrap, cwd, gate_folder=gate_folder, shared_net=shared)
        yield Launch(
            full + inner + list(argv), inside_env, walls, _missing(walls), bound, via="bubblewrap"
        )


@contextlib.asynccontextmanager
async def _landlocked(
    walls: Walls, argv: Sequence[str], env: dict[str, str], bound: Bound | None
) -> AsyncIterator[Launch]:
    writes = walls.mode == "workspace-write"
    linked = linked_git_folders(_real(walls.root)) if writes else ()
    with private_temp() as temp:
        snapshot = await asyncio.to_thread(ProtectedCopies.take, walls, linked) if writes else None
        try:
            outer = list(bound.outer) if bound is not None else []
            inner = list(bound.inner) if bound is not None else []
            full = outer + landlock_argv(walls, temp, linked) + inner + list(argv)
            inside_env = {**env, "TMPDIR": str(temp)}
            yield Launch(
                full, inside_env, walls, _missing(walls), bound, via="landlock", snapshot=snapshot
            )
        finally:
            if snapshot is not None:
                snapshot.drop()


_ready: set[str] = set()
_options: dict[str, str] = {}
"""bwrap's ``--help`` by its path: which options this build of it knows."""


async def bwrap_problem(bwrap: str) -> str | None:
    """Why ``bwrap`` cannot build a wall here (a user namespace, a pid namespace, a network
    namespace), or None: tried until it can, then remembered."""
    if bwrap in _ready:
        return None
    problem = await probe(bwrap)
    if problem is not None:
        return problem
    helping = await asyncio.create_subprocess_exec(
        bwrap, "--help", stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    said, _ = await helping.communicate()
    _options[bwrap] = said.decode("utf-8", "replace")
    _ready.add(bwrap)
    return None


NAMESPACES = ("--unshare-user", "--unshare-pid", "--unshare-net")


async def probe(
    bwrap: str, namespaces: Sequence[str] = NAMESPACES, prefix: Sequence[str] = ()
) -> str | None:
    """Run ``true`` in the smallest wall bwrap builds with ``namespaces`` (started by
    ``prefix``, as ``nsenter ...``, if given); why it failed, or None."""
    argv = [*prefix, bwrap, *namespaces, "--die-with-parent"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev"]
    if "--unshare-pid" in namespaces:
        argv += ["--proc", "/proc"]
    argv += ["--", "true"]
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        return f"bwrap could not be started ({exc.strerror or exc})"
    _, err = await process.communicate()
    if process.returncode == 0:
        return None
    said = err.decode("utf-8", "replace").strip().splitlines()
    reason = said[-1] if said else f"exit code {process.returncode}"
    return f"bwrap cannot build the walls here ({reason})"
