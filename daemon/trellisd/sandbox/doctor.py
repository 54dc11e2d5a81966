"""``trellisd doctor``: what of the walls works on this machine, and why not.

Each line is a check, ``ok`` or ``no`` and what was found; the walls are built for real (a
program runs inside each mode's walls and must exit 0), not guessed from settings. A line says
whether the walled programs of a session share a loopback (``netns``), another which walls this
machine gets: bubblewrap's, else Landlock's (weaker, and how), else none. The exit code is 0
when the default walls (``workspace-write``, no network) can be built.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .bwrap import Via, WallsUnavailable, confine, find_bwrap, probe
from .landlock import abi_version
from .landlock_walls import NETWORK_ABI
from .limits import process_bound
from .netns import Loopback, find_nsenter
from .walls import DEFAULT_PROCESSES, Network, SandboxMode, Walls

LANDLOCK_LIMITS = (
    "weaker than bubblewrap's: the user's other processes, the host's /tmp and /run are in"
    " sight; network false denies every TCP bind and connect, the program's own loopback too;"
    " a network list cannot be built; protected paths are put back after a call rather than"
    " kept read-only; the private temporary folder has no size bound"
)


@dataclass(frozen=True)
class Finding:
    check: str
    ok: bool
    said: str

    def line(self) -> str:
        return f"{'ok' if self.ok else 'no':<3} {self.check}: {self.said}"


async def _walls_run(
    mode: SandboxMode,
    network: Network,
    find: Callable[[], str | None],
    loopback: Loopback | None = None,
) -> tuple[str | None, Via | None]:
    """Run ``true`` inside walls of ``mode`` (on ``loopback``, if given); why it failed (or
    None), and what built them."""
    with tempfile.TemporaryDirectory(prefix="trellisd-doctor-") as folder:
        walls = Walls(mode, network, Path(folder), loopback=loopback)
        env = {"PATH": "/usr/bin:/bin"}
        try:
            async with confine(walls, ["true"], Path(folder), env, find=find) as run:
                process = await asyncio.create_subprocess_exec(
                    *run.argv,
                    env=run.env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )
                _, err = await process.communicate()
                run.sweep()
        except WallsUnavailable as exc:
            return str(exc), None
        if process.returncode == 0:
            return None, run.via
        lines = err.decode("utf-8", "replace").strip().splitlines()
        return (lines[-1] if lines else f"exit code {process.returncode}"), run.via


def _landlock() -> Finding:
    abi = abi_version()
    if abi == 0:
        return Finding("Landlock", False, "the kernel offers no Landlock ABI")
    if abi < NETWORK_ABI:
        return Finding("Landlock", True, f"ABI {abi} (cannot deny the network)")
    return Finding("Landlock", True, f"ABI {abi}")


async def _session_loopback(
    find: Callable[[], str | None], find_nsenter: Callable[[], str | None]
) -> Finding:
    """Whether the walled programs of a session can share a loopback here."""
    loopback = Loopback(find_nsenter)
    try:
        problem, _ = await _walls_run("workspace-write", False, find, loopback)
        shared = loopback.problem is None and problem is None
    finally:
        await loopback.close()
    if shared:
        return Finding(
            "session loopback", True, "the walled programs of a session share a loopback"
        )
    why = loopback.problem or problem
    return Finding(
        "session loopback",
        False,
        f"{why}: each walled program gets a loopback of its own (a process's server is out of"
        " reach of the session's later commands)",
    )


def _which_walls(via: Via | None) -> Finding:
    if via == "bubblewrap":
        return Finding("walls built with", True, "bubblewrap")
    if via == "landlock":
        return Finding(
            "walls built with",
            True,
            f"Landlock, as bubblewrap cannot build them here; {LANDLOCK_LIMITS}",
        )
    return Finding(
        "walls built with", False, "nothing: neither bubblewrap nor Landlock builds them"
    )


async def examine(
    find: Callable[[], str | None] = find_bwrap,
    find_nsenter: Callable[[], str | None] = find_nsenter,
) -> tuple[list[Finding], bool]:
    """Every finding, and whether the default walls can be built (``find`` finds bwrap,
    ``find_nsenter`` nsenter)."""
    found: list[Finding] = []
    bwrap = find()
    if bwrap is None:
        found.append(
            Finding(
                "bubblewrap", False, "bwrap is not on PATH (Debian: apt-get install bubblewrap)"
            )
        )
    else:
        found.append(Finding("bubblewrap", True, bwrap))
        for check, namespaces in (
            ("user namespace", ("--unshare-user",)),
            ("pid namespace and a new /proc", ("--unshare-user", "--unshare-pid")),
            ("network namespace", ("--unshare-user", "--unshare-net")),
        ):
            problem = await probe(bwrap, namespaces)
            found.append(Finding(check, problem is None, problem or "bwrap builds it"))
    found.append(_landlock())
    default_ok, default_via = False, None
    for mode, network in (
        ("workspace-write", False),
        ("read-only", False),
        ("workspace-write", True),
    ):
        problem, via = await _walls_run(mode, network, find)  # type: ignore[arg-type]
        name = f"walls {mode}, network {str(network).lower()}"
        said = problem or f"a program ran inside them ({via})"
        found.append(Finding(name, problem is None, said))
        if (mode, network) == ("workspace-write", False):
            default_ok, default_via = problem is None, via if problem is None else None
    if default_via == "bubblewrap":
        found.append(await _session_loopback(find, find_nsenter))
    bound = process_bound(DEFAULT_PROCESSES)
    if bound is None:
        found.append(
            Finding(
                "process bound",
                False,
                "a fork bomb is not bounded: root is exempt from RLIMIT_NPROC and no pids"
                " cgroup can be made here (or prlimit is missing)",
            )
        )
    else:
        bound.release()
        found.append(Finding("process bound", True, f"{DEFAULT_PROCESSES} processes ({bound.how})"))
    found.append(_which_walls(default_via))
    return found, default_ok


def main() -> int:
    found, default_ok = asyncio.run(examine())
    for finding in found:
        print(finding.line())
    if default_ok:
        print("the default walls (workspace-write, no network) can be built here")
        return 0
    print(
        "the default walls cannot be built here: commands will not run unless policy.sandbox"
        ' is "off"'
    )
    return 1


__all__ = ["Finding", "examine", "main"]
