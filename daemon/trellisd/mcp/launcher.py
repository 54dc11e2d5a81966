"""The launcher of a stdio MCP server: run as ``python -I launcher.py <daemon pid> <max
line bytes> -- <command> [args...]``, the leader of a process group of its own.

It asks the kernel to send it ``SIGTERM`` when the daemon dies (``PR_SET_PDEATHSIG``), even
by ``kill -9``, and on ``SIGTERM``, or as soon as the server exits (its stdin closed when its
session closes), kills everything the server started (``npx`` and its ``node``): its process
group and session, and every process that carries the server's mark (``TRELLISD_RUN``, as
``run_command`` marks a command's processes), which finds a child that left the group with
``setsid``. So no server, nor anything it started, outlives its session or its daemon; only a
process that both leaves the session and clears its environment escapes.

It also stands between the server's stdout and the daemon: it copies the server's messages
through, and a message (a line) longer than the limit kills the server, with the reason on
stderr, before the daemon has read any of it: a hostile server cannot make the daemon hold
a message of any size. Its stdin and stderr are the server's own. The server gets only the
variables ``TRELLISD_MCP_KEEP`` names: not those the MCP SDK adds from the daemon's own.

It imports nothing but the standard library, and nothing of trellisd, so it starts fast.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import signal
import subprocess
import sys
import threading

PR_SET_PDEATHSIG = 1
CHUNK = 65536
KEEP = "TRELLISD_MCP_KEEP"
RUN_MARK = "TRELLISD_RUN"  # as tools.command's: the variable that marks a server's processes
ROUNDS = 5  # a process may fork while the others die: a few rounds catch its children


def _end_group(*_: object) -> None:
    _end_started()
    os.killpg(0, signal.SIGKILL)


def _end_started() -> None:
    """Kill (SIGKILL) every process but this one in this launcher's group or session, or
    carrying its mark, until none is left."""
    me = os.getpid()
    needle = f"{RUN_MARK}={os.environ.get(RUN_MARK, '')}".encode()
    for _ in range(ROUNDS):
        found = [pid for pid in _processes() if pid != me and _started(pid, me, needle)]
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _processes() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _started(pid: int, leader: int, needle: bytes) -> bool:
    """Whether ``pid`` runs in ``leader``'s group or session or carries the mark; a zombie
    (already dead) does not count."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        if fields[0] == b"Z":
            return False
        if int(fields[2]) == leader or int(fields[3]) == leader:
            return True
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except (OSError, IndexError, ValueError):
        return False


def _end_with(server: subprocess.Popen[bytes]) -> None:
    """Once the server exits, kill what it started (which may hold its stdout open)."""
    server.wait()
    _end_started()


def main(argv: list[str]) -> int:
    if len(argv) < 4 or argv[2] != "--":
        print(
            "usage: launcher.py <daemon pid> <max line bytes> -- <command> [args...]",
            file=sys.stderr,
        )
        return 2
    parent, limit, command = int(argv[0]), int(argv[1]), argv[3:]
    signal.signal(signal.SIGTERM, _end_group)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        print("the MCP server's launcher could not watch its daemon", file=sys.stderr)
        return 1
    if os.getppid() != parent:  # the daemon died before the watch was set
        return 1
    os.environ[RUN_MARK] = secrets.token_hex(8)
    try:
        server = subprocess.Popen(command, stdout=subprocess.PIPE, bufsize=0, env=_kept())
    except OSError as exc:
        print(f"cannot start {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    assert server.stdout is not None
    threading.Thread(target=_end_with, args=(server,), daemon=True).start()
    source, line = server.stdout.fileno(), 0
    while chunk := os.read(source, CHUNK):
        parts = chunk.split(b"\n")
        longest = max([line + len(parts[0]), *(len(p) for p in parts[1:-1])])
        line = line + len(parts[0]) if len(parts) == 1 else len(parts[-1])
        if max(longest, line) > limit:
            print(
                f"the MCP server sent a message longer than {limit} bytes; it was stopped",
                file=sys.stderr,
            )
            _end_group()
        _write_all(chunk)
    code = server.wait()
    _end_started()
    if code:
        said = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
        print(f"the MCP server {said}", file=sys.stderr)
    return code


def _kept() -> dict[str, str] | None:
    if KEEP not in os.environ:
        return None
    names = {*os.environ[KEEP].split(","), RUN_MARK}  # the mark finds the server's processes
    return {name: value for name, value in os.environ.items() if name in names}


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
