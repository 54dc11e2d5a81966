"""The launcher of a stdio MCP server: run as ``python -I launcher.py <daemon pid> <max
line bytes> -- <command> [args...]``, the leader of a process group of its own.

It asks the kernel to send it ``SIGTERM`` when the daemon dies (``PR_SET_PDEATHSIG``), even
by ``kill -9``, and on ``SIGTERM`` kills its whole process group: the server and whatever the
server started (``npx`` and its ``node``). So no server outlives its daemon.

It also stands between the server's stdout and the daemon: it copies the server's messages
through, and a message (a line) longer than the limit kills the server, with the reason on
stderr, before the daemon has read any of it: a hostile server cannot make the daemon hold
a message of any size. Its stdin and stderr are the server's own. The server gets only the
variables ``TRELLISD_MCP_KEEP`` names: not those the MCP SDK adds from the daemon's own.

It imports nothing but the standard library, and nothing of trellisd, so it starts fast.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1
CHUNK = 65536
KEEP = "TRELLISD_MCP_KEEP"


def _end_group(*_: object) -> None:
    os.killpg(0, signal.SIGKILL)


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
    try:
        server = subprocess.Popen(command, stdout=subprocess.PIPE, bufsize=0, env=_kept())
    except OSError as exc:
        print(f"cannot start {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 127
    assert server.stdout is not None
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
    if code:
        said = f"killed by signal {-code}" if code < 0 else f"exited with code {code}"
        print(f"the MCP server {said}", file=sys.stderr)
    return code


def _kept() -> dict[str, str] | None:
    if KEEP not in os.environ:
        return None
    names = set(os.environ[KEEP].split(","))
    return {name: value for name, value in os.environ.items() if name in names}


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
