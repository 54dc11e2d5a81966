"""The guard of a process that outlives a tool call (``start_process``): run as ``python -I
guard.py <daemon pid> -- <argv...>``, the leader of a session of its own, with the program
(or the walls around it) as its one child.

It asks the kernel to send it ``SIGTERM`` when the daemon dies (``PR_SET_PDEATHSIG``), even
by ``kill -9``. On ``SIGTERM`` (the daemon's ``stop_process``, or the daemon gone) it asks
every process of the program to stop (``SIGTERM`` to each process carrying the program's
mark, ``TRELLISD_RUN``, but bubblewrap, whose end would end everything inside at once), gives
them ``GRACE_SECONDS``, then kills everything the program started (``kill_everything``: its
process group and session, and every process that carries the mark) and ends as the program
ended. When the program ends by itself, what it left behind is killed too. So nothing a
process started outlives its session or its daemon; only a process that both leaves the
session and clears its environment escapes, and inside the walls not even that.

The program's stdin, stdout and stderr are the guard's own: the daemon's pipes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1
GRACE_SECONDS = 2.0
"""How long a program asked to stop has to end before it is killed."""
POLL_SECONDS = 0.02


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: guard.py <daemon pid> -- <command> [args...]", file=sys.stderr)
        return 2
    parent, command = int(argv[0]), argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        print("the process could not be tied to its daemon", file=sys.stderr)
        return 1
    if os.getppid() != parent:  # the daemon died before the tie was made
        return 1
    # Imported once the tie holds: the daemon's own way to find and kill a call's processes.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from trellisd.tools.command import (
        RUN_MARK,
        belongs_to_run,
        kill_everything,
        process_name,
        running_pids,
    )

    mark = os.environ.get(RUN_MARK, "")
    needle = f"{RUN_MARK}={mark}".encode()
    asked: list[object] = []  # a SIGTERM while the program starts is served once it runs
    signal.signal(signal.SIGTERM, lambda *_: asked.append(True))
    try:
        child = subprocess.Popen(command, start_new_session=True)
    except OSError as exc:
        print(f"{command[0]}: cannot be started: {exc.strerror or exc}", file=sys.stderr)
        return 127

    def stop(*_: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for pid in running_pids():
            if not belongs_to_run(pid, child.pid, needle) or process_name(pid) == "bwrap":
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        status = None
        while status is None and time.monotonic() < deadline:
            status = _reaped(child.pid)
            if status is None:
                time.sleep(POLL_SECONDS)
        kill_everything(child.pid, mark)
        _end_as(-signal.SIGKILL if status is None else status)

    signal.signal(signal.SIGTERM, stop)
    if asked:
        stop()
    while (status := _reaped(child.pid, 0)) is None:
        pass
    kill_everything(child.pid, mark)
    _end_as(status)
    return 0


def _reaped(pid: int, flags: int = os.WNOHANG) -> int | None:
    """The child's exit code (minus the signal that killed it) once it ended; None before."""
    try:
        done, status = os.waitpid(pid, flags)
    except ChildProcessError:
        return -signal.SIGKILL
    if done == 0:
        return None
    return os.waitstatus_to_exitcode(status)


def _end_as(code: int) -> None:
    """End as the program ended: with its exit code, or by the signal that killed it."""
    sys.stdout.flush()
    if code < 0:
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    os._exit(code & 0xFF)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
