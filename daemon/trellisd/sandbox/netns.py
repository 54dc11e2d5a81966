"""One private loopback per session: the network the walled programs of a session share.

With the network ``false`` or a list of hosts, a walled program has no network of the host's,
only a loopback. Were each program to get a loopback of its own, a dev server that
``start_process`` started would listen on its loopback and a later ``run_command`` (on
another) could not reach it. So the walled programs of one session share one network
namespace of their own: one loopback per session, neither the host's nor another session's.

The namespace is held open by a holder: ``bwrap --unshare-user --unshare-net`` (bubblewrap
brings its loopback up) around ``cat`` reading a pipe of the daemon's (a line it echoes says the
namespaces are ready), started on the session's first walled program and stopped when the
session is closed or deleted, or when the daemon ends (``--die-with-parent``: even killed, the
daemon leaves none behind; the pipe closing ends it too). It needs no privilege: the user who
runs the daemon owns the holder's user namespace, so ``nsenter --target <holder> --user --net
--preserve-credentials`` enters it, and bubblewrap, started there without ``--unshare-net``,
builds every other wall as before (a user namespace of its own nested in the holder's, its own
processes, IPC, a new ``/proc``). Landlock's walls, built where bubblewrap cannot build any,
have no network namespace and start no holder. The holder itself runs nothing of the session's
and holds no capability a program inside the walls could use: a program's user namespace is a
child of the holder's.

Where the holder cannot be had (``nsenter`` missing, user namespaces off), or bubblewrap
cannot build the smallest walls inside its network (tried once, when the holder starts), each
walled program gets a loopback of its own, as ``bwrap --unshare-net`` gives it; the log says
so once, and ``trellisd doctor`` says which holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
from collections.abc import Callable

from .bwrap import probe

log = logging.getLogger(__name__)

NO_NSENTER = "nsenter (util-linux) is not installed"


def find_nsenter() -> str | None:
    return shutil.which("nsenter")


class Loopback:
    """A session's private loopback: its holder, started on first use (``holder``), and the
    argv prefix that starts a program inside its network (``enter``)."""

    def __init__(self, find: Callable[[], str | None] = find_nsenter) -> None:
        self._find = find
        self._process: asyncio.subprocess.Process | None = None
        self._pid: int | None = None
        self._nsenter: str | None = None
        self._lock = asyncio.Lock()
        self._closed = False
        self.problem: str | None = None
        """Why the session's programs do not share a loopback here (each has its own)."""

    @property
    def pid(self) -> int | None:
        """The holder's process inside the namespace, while it runs."""
        running = self._process is not None and self._process.returncode is None
        return self._pid if running and self._pid is not None and _alive(self._pid) else None

    async def enter(self, bwrap: str) -> list[str] | None:
        """The argv prefix that puts what follows it (bubblewrap, without ``--unshare-net``)
        in the session's network, starting the holder if it does not run; None when a shared
        loopback cannot be had here (``problem`` says why) or the session was closed."""
        async with self._lock:
            if self._closed or self.problem is not None:
                return None
            if self.pid is None:
                if self._process is not None:
                    log.warning("the session's loopback ended; a new one is started")
                    await self._reap()
                await self._start(bwrap)
            if self.pid is None or self._nsenter is None:
                return None
            return self._enter(self.pid)

    async def _start(self, bwrap: str) -> None:
        nsenter = self._find()
        if nsenter is None:
            self._unshared(NO_NSENTER)
            return
        self._nsenter = nsenter
        reading, writing = os.pipe()
        try:
            cat = shutil.which("cat") or "/bin/cat"  # the host's, under the read-only /
            argv = [bwrap, *HOLDER, "--info-fd", str(writing), "--", cat]
            # Started from the event loop's thread: --die-with-parent ties the holder to the
            # thread that forked it.
            self._process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(writing,),
                start_new_session=True,
                env={},
            )
        except OSError as exc:
            os.close(reading)
            self._unshared(f"bwrap could not be started ({exc.strerror or exc})")
            return
        finally:
            os.close(writing)
        try:
            info = await asyncio.to_thread(_read_info, reading)
        finally:
            os.close(reading)
        pid = info.get("child-pid")
        if not isinstance(pid, int) or not await self._ready():
            said = await self._reap()
            self._unshared(f"bwrap cannot hold a network namespace here ({said})")
            return
        self._pid = pid
        # Tried once: bubblewrap may not build walls inside (a set-user-id one, say).
        problem = await probe(bwrap, ("--unshare-user", "--unshare-pid"), self._enter(pid))
        if problem is not None:
            await self._reap()
            self._unshared(f"inside a shared network, {problem}")
            return
        log.info("the session's loopback is held by process %d", pid)

    async def _ready(self) -> bool:
        """Whether ``cat`` inside echoes a line: bwrap writes the child's pid before it has
        mapped the user and brought the loopback up, and runs ``cat`` only after."""
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(b"ready\n")
            await process.stdin.drain()
        except OSError:
            return False
        return await process.stdout.readline() == b"ready\n"

    def _enter(self, pid: int) -> list[str]:
        assert self._nsenter is not None
        target = str(pid)
        return [self._nsenter, "--target", target, "--user", "--net", "--preserve-credentials"]

    def _unshared(self, problem: str) -> None:
        self.problem = problem
        log.warning(
            "%s: the session's walled programs cannot share a loopback; each gets one of its own",
            problem,
        )

    async def _reap(self) -> str:
        """Stop the holder (if it runs) and wait for it; what it said on stderr, last line."""
        process, self._process, self._pid = self._process, None, None
        if process is None:
            return "not started"
        if process.stdin is not None:
            process.stdin.close()
        with contextlib.suppress(ProcessLookupError):
            process.kill()  # bwrap's end kills the holder inside (--die-with-parent)
        said = b""
        if process.stderr is not None:
            said = await process.stderr.read()
        if process.stdout is not None:  # to its end: cat has ended, its stdin being closed
            await process.stdout.read()
        await process.wait()
        lines = said.decode("utf-8", "replace").strip().splitlines()
        return lines[-1] if lines else f"exit code {process.returncode}"

    async def close(self) -> None:
        """Stop the holder; the session's loopback ends with its last program."""
        async with self._lock:
            self._closed = True
            if self._process is not None:
                await self._reap()
                log.info("the session's loopback was let go")


HOLDER = (
    "--unshare-user",
    "--unshare-net",
    "--die-with-parent",
    "--new-session",
    "--ro-bind",
    "/",
    "/",
)
"""bwrap's arguments for the holder: a user and a network namespace, nothing else of its
own; not ``--disable-userns``, as each program's walls nest a user namespace in it."""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie has left its namespaces: it counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _read_info(fd: int) -> dict[str, object]:
    """bwrap's ``--info-fd`` JSON, read until it parses or the pipe ends (bwrap failed)."""
    data = b""
    while chunk := os.read(fd, 4096):
        data += chunk
        with contextlib.suppress(ValueError):
            found = json.loads(data)
            return found if isinstance(found, dict) else {}
    return {}


class Loopbacks:
    """The loopback of each session of this daemon, by session id."""

    def __init__(self, find: Callable[[], str | None] = find_nsenter) -> None:
        self._find = find
        self._by_session: dict[str, Loopback] = {}

    def of(self, session_id: str) -> Loopback:
        """The session's loopback (its holder starts with its first walled program)."""
        loopback = self._by_session.get(session_id)
        if loopback is None:
            loopback = self._by_session[session_id] = Loopback(self._find)
        return loopback

    async def close(self, session_id: str) -> None:
        """The session was closed or deleted: stop its holder."""
        loopback = self._by_session.pop(session_id, None)
        if loopback is not None:
            await loopback.close()

    async def close_all(self) -> None:
        """The daemon ends: every holder is stopped, all at once."""
        await asyncio.gather(*(self.close(session_id) for session_id in list(self._by_session)))
