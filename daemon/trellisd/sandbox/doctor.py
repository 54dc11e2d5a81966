"""``trellisd doctor``: what of the walls works on this machine, and why not.

Each line is a check, ``ok`` or ``no`` and what was found; the walls are built for real
(a program runs inside each mode's walls and must exit 0), not guessed from settings. The
exit code is 0 when the default walls (``workspace-write``, no network) can be built.
"""

from __future__ import annotations

import asyncio
import importlib
import tempfile
from dataclasses import dataclass
from pathlib import Path

from .bwrap import WallsUnavailable, confine, find_bwrap, probe
from .limits import process_bound
from .walls import DEFAULT_PROCESSES, Network, SandboxMode, Walls


@dataclass(frozen=True)
class Finding:
    check: str
    ok: bool
    said: str

    def line(self) -> str:
        return f"{'ok' if self.ok else 'no':<3} {self.check}: {self.said}"


async def _walls_run(mode: SandboxMode, network: Network) -> str | None:
    """Run ``true`` inside walls of ``mode``; why it failed, or None."""
    with tempfile.TemporaryDirectory(prefix="trellisd-doctor-") as folder:
        walls = Walls(mode, network, Path(folder))
        try:
            async with confine(walls, ["true"], Path(folder), {"PATH": "/usr/bin:/bin"}) as run:
                process = await asyncio.create_subprocess_exec(
                    *run.argv,
                    env=run.env,
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )
                _, err = await process.communicate()
        except WallsUnavailable as exc:
            return str(exc)
        if process.returncode == 0:
            return None
        lines = err.decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else f"exit code {process.returncode}"


def _landlock() -> Finding:
    try:
        landlock = importlib.import_module(f"{__package__}.landlock")
    except ImportError:
        return Finding("Landlock", False, "not checked: this build lacks trellisd.sandbox.landlock")
    abi = int(landlock.abi_version())
    if abi:
        return Finding("Landlock", True, f"ABI {abi}")
    return Finding("Landlock", False, "the kernel offers no Landlock ABI")


async def examine() -> tuple[list[Finding], bool]:
    """Every finding, and whether the default walls can be built."""
    found: list[Finding] = []
    bwrap = find_bwrap()
    if bwrap is None:
        found.append(
            Finding(
                "bubblewrap", False, "bwrap is not on PATH (Debian: apt-get install bubblewrap)"
            )
        )
        found.append(_landlock())
        return found, False
    found.append(Finding("bubblewrap", True, bwrap))
    for check, namespaces in (
        ("user namespace", ("--unshare-user",)),
        ("pid namespace and a new /proc", ("--unshare-user", "--unshare-pid")),
        ("network namespace", ("--unshare-user", "--unshare-net")),
    ):
        problem = await probe(bwrap, namespaces)
        found.append(Finding(check, problem is None, problem or "bwrap builds it"))
    default_ok = False
    for mode, network in (
        ("workspace-write", False),
        ("read-only", False),
        ("workspace-write", True),
    ):
        problem = await _walls_run(mode, network)  # type: ignore[arg-type]
        name = f"walls {mode}, network {str(network).lower()}"
        found.append(Finding(name, problem is None, problem or "a program ran inside them"))
        if (mode, network) == ("workspace-write", False):
            default_ok = problem is None
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
    found.append(_landlock())
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
