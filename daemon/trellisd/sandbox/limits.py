"""How many processes a confined program may run at once, so a fork bomb stops at the wall.

For a user other than root, ``RLIMIT_NPROC`` set inside the walls' user namespace does it:
the kernel counts the processes of that uid in that namespace. Root is exempt from
``RLIMIT_NPROC`` (the kernel skips the check for uid 0 of the initial namespace, and
``--unshare-user`` maps the uid inside to that same uid 0), so for root the program runs in
a ``pids`` cgroup of its own with ``pids.max`` set (cgroup v1's ``pids`` hierarchy or a
cgroup v2 folder where ``pids`` is delegated). ``process_bound`` says which applies here.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Bound:
    """The argv that goes before bwrap (``outer``, a cgroup's joining) and before the
    program inside (``inner``, a ``prlimit``); ``folder`` is a cgroup to remove after."""

    outer: tuple[str, ...] = ()
    inner: tuple[str, ...] = ()
    folder: Path | None = None
    how: str = ""

    def release(self) -> None:
        """Kill what is left in the cgroup, then remove it."""
        if self.folder is None:
            return
        for _ in range(5):
            try:
                pids = (self.folder / "cgroup.procs").read_text().split()
            except OSError:
                break
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                    os.kill(int(pid), 9)
        try:
            self.folder.rmdir()
        except OSError:  # its last processes are still being reaped: removed next time
            _leftover.append(self.folder)


_leftover: list[Path] = []
atexit.register(lambda: _remove_leftovers())


STALE_SECONDS = 600
"""An empty ``trellisd-*`` cgroup this old was left by a daemon that ended before it could
remove it (killed, or its last processes still being reaped at its exit): removed."""


def _remove_stale(parent: Path) -> None:
    now = time.time()
    for folder in parent.glob("trellisd-*"):
        with contextlib.suppress(OSError):
            if now - folder.stat().st_mtime > STALE_SECONDS:
                folder.rmdir()  # refused (EBUSY) while a process is in it


def _remove_leftovers() -> None:
    for folder in list(_leftover):
        try:
            folder.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            continue
        _leftover.remove(folder)


def pids_parent() -> Path | None:
    """A cgroup folder this process may make a ``pids``-bounded child in, if any."""
    v1 = CGROUP_ROOT / "pids"
    if (v1 / "cgroup.procs").is_file() and os.access(v1, os.W_OK):
        return v1
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    own = next((line[3:] for line in lines if line.startswith("0::")), None)
    if own is None:
        return None
    parent = CGROUP_ROOT / own.lstrip("/")
    try:
        delegated = (parent / "cgroup.subtree_control").read_text().split()
    except OSError:
        return None
    return parent if "pids" in delegated and os.access(parent, os.W_OK) else None


def process_bound(processes: int) -> Bound | None:
    """How ``processes`` is enforced here; None when it cannot be (root without a
    ``pids`` cgroup, or no ``prlimit``)."""
    if os.geteuid() != 0:
        prlimit = shutil.which("prlimit")
        if prlimit is None:
            return None
        return Bound(inner=(prlimit, f"--nproc={processes}", "--"), how="RLIMIT_NPROC")
    _remove_leftovers()
    parent = pids_parent()
    if parent is None:
        return None
    _remove_stale(parent)
    folder = parent / f"trellisd-{secrets.token_hex(6)}"
    try:
        folder.mkdir()
        (folder / "pids.max").write_text(str(processes))
    except OSError:
        with contextlib.suppress(OSError):
            folder.rmdir()
        return None
    join = 'echo $$ > "$1/cgroup.procs" || exit 125; shift; exec "$@"'
    sh = shutil.which("sh") or "/bin/sh"
    return Bound(outer=(sh, "-c", join, "sh", str(folder)), folder=folder, how="pids cgroup")
