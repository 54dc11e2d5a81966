"""The shared daemon: one per store and user, serving every window that attaches over its Unix
socket (see ``rendezvous`` for where it listens and what is said there).

Only the user who runs it may attach: the folder is a real folder of the user's, 0700
(checked before anything is made in it), the socket 0600, and each connection's peer is
checked (``SO_PEERCRED``) before anything is read from it. A connection
has ``TRELLISD_HELLO_TIMEOUT`` seconds (default 30) to say its first line, read on the event
loop; of those that have not said it yet, at most ``WAITING_HELLOS`` are kept (a new one
drops the oldest), so silent connections never keep a window out. It exits by
itself ``TRELLISD_IDLE_EXIT`` seconds (default 600) after its last window left and its last
turn ended, when ``trellisd stop`` asks once its turns have ended, and at SIGTERM (its running
turns record ``cancelled``).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import functools
import json
import logging
import os
import signal
import socket
import struct
from collections.abc import Mapping
from typing import IO, Any

from . import server
from .build import build
from .config_file import Settings, load_settings
from .edge import end_process
from .errors import StoreError
from .rendezvous import HELLO_LIMIT, Place, Unsafe, end_record, peer_uid, private_file, record
from .transport import FrameReader, FrameWriter

log = logging.getLogger(__name__)

IDLE_EXIT_SECONDS = 600.0
HELLO_SECONDS = 30.0
WAITING_HELLOS = 16
STARTUP_GRACE_SECONDS = 30.0
_PEERCRED = struct.Struct("3i")


def idle_exit_seconds(env: Mapping[str, str]) -> float:
    return _seconds(env, "TRELLISD_IDLE_EXIT", IDLE_EXIT_SECONDS)


def hello_seconds(env: Mapping[str, str]) -> float:
    """How long a connection may take to say its first line."""
    seconds = _seconds(env, "TRELLISD_HELLO_TIMEOUT", HELLO_SECONDS)
    if seconds == 0:
        raise ValueError("TRELLISD_HELLO_TIMEOUT must be more than zero seconds")
    return seconds


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        seconds = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of seconds, not {raw!r}") from None
    if not seconds >= 0:
        raise ValueError(f"{name} must be zero or more seconds, not {raw!r}")
    return seconds


class SharedDaemon:
    def __init__(
        self,
        db_path: str,
        settings: Settings,
        idle_exit: float,
        hello_timeout: float,
        socket_path: str,
    ) -> None:
        # The window that starts the daemon says where, having checked the folder; started
        # by hand, the command line finds the place (``rendezvous.Place``).
        self.place = Place.at(socket_path, db_path)
        self.settings = settings
        self.daemon = server.Daemon(db_path, settings, shared=True, end=end_process)
        self.daemon.on_change = self._changed
        self.idle_exit = idle_exit
        self.hello_timeout = hello_timeout
        self._waiting: dict[socket.socket, int] = {}  # said no hello yet: their peers' pids
        self.window_queue = settings.daemon.window_queue
        self.stopping = False
        self._idle_timer: asyncio.TimerHandle | None = None
        self._listener: socket.socket | None = None
        self._bound: int | None = None  # the socket file's inode, to unlink only our own
        self._life: IO[str] | None = None
        self._stop_waiters: list[socket.socket] = []
        self._exited = asyncio.Event()

    def claim(self) -> None:
        """Hold the store's life lock, or say which daemon already serves it."""
        try:
            self.place.make_folder()
            life = open(private_file(self.place.life_lock), "a+")  # noqa: SIM115 - held for its life
        except Unsafe as exc:
            raise SystemExit(f"trellisd: refused {exc}") from None
        try:
            fcntl.flock(life, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            life.seek(0)
            pid = life.read().strip() or "?"
            life.close()
            raise SystemExit(
                f"trellisd: a shared daemon (pid {pid}) already serves {self.place.store}"
            ) from None
        life.seek(0)
        life.truncate()
        life.write(f"{os.getpid()}\n")
        life.flush()
        self._life = life

    def listen(self) -> socket.socket:
        """Bind the socket (0600), replacing what a daemon that died left there."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.place.socket)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            listener.bind(self.place.socket)
        finally:
            os.umask(old_umask)
        os.chmod(self.place.socket, 0o600)
        self._bound = os.stat(self.place.socket).st_ino
        listener.listen(128)
        listener.setblocking(False)
        self._listener = listener
        return listener

    async def run(self, ready_fd: int | None) -> None:
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, lambda: asyncio.ensure_future(self.exit_now()))
        listener = self.listen()
        await self.daemon.open_store()
        if ready_fd is not None:
            os.write(ready_fd, b"ready\n")
            os.close(ready_fd)
        log.info("serving %s at %s", self.place.store, self.place.socket)
        # The window that started this daemon connects next; one that never does (its
        # editor died in between) leaves a daemon that exits after the grace.
        self._arm_idle(max(self.idle_exit, STARTUP_GRACE_SECONDS))
        while not self.stopping:
            try:
                conn, _ = await loop.sock_accept(listener)
            except OSError:
                break  # the listener was closed: stopping
            asyncio.ensure_future(self.welcome(conn))
        await self._exited.wait()

    async def welcome(self, conn: socket.socket) -> None:
        """A new connection: its peer checked, its first line read, then served."""
        pid, uid = _peer(conn)
        if uid != os.getuid():
            log.warning(
                "refused a connection from uid %s (pid %d): not this daemon's user", uid, pid
            )
            conn.close()
            return
        if len(self._waiting) >= WAITING_HELLOS:
            oldest, oldest_pid = next(iter(self._waiting.items()))
            log.warning(
                "%d connections have not said hello: dropped the oldest (pid %d)",
                len(self._waiting),
                oldest_pid,
            )
            del self._waiting[oldest]
            with contextlib.suppress(OSError):
                oldest.shutdown(socket.SHUT_RDWR)  # its read below ends
        self._waiting[conn] = pid
        try:
            async with asyncio.timeout(self.hello_timeout):
                line, rest = await _first_line(conn)
            said = json.loads(line)
            if not isinstance(said, dict):
                raise ValueError("the first line was not a JSON object")
        except TimeoutError:
            log.info("dropped a connection from pid %d: no hello in %g s", pid, self.hello_timeout)
            conn.close()
            return
        except (OSError, EOFError, ValueError) as exc:
            log.info("dropped a connection from pid %d before it said hello: %s", pid, exc)
            conn.close()
            return
        finally:
            self._waiting.pop(conn, None)
        conn.setblocking(True)
        command = said.get("command")
        if command in ("attach", "acp") and said.get("trellisd") != build():
            # A window of other code (its socket is named after its own build, so it came
            # here by a path of its own): refused, as it must not run this code's services.
            self._answer(conn, {"ok": False, "error": f"this daemon is trellisd {build()}"})
            conn.close()
        elif command == "status":
            self._answer(conn, self.status())
            conn.close()
        elif command == "stop":
            self._answer(conn, {"ok": True, **self.status()})
            self._stop_waiters.append(conn)
            self.stop()
        elif command in ("attach", "acp"):
            await self.attach(conn, rest, said, pid, acp=command == "acp")
        else:
            self._answer(conn, {"ok": False, "error": f"unknown command {command!r}"})
            conn.close()

    @staticmethod
    def _answer(conn: socket.socket, answer: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(answer).encode() + b"\n")

    async def attach(
        self, conn: socket.socket, rest: bytes, said: dict[str, Any], pid: int, acp: bool = False
    ) -> None:
        """Serve a window (``acp``: an ACP client's) until it ends; its turns run on."""
        env = said.get("env")
        try:
            if not isinstance(env, dict):
                raise ValueError("a window must hand over its environment as an object")
            # The window's settings and keys from its own environment only (never the
            # daemon's, which is the first window's), and the config file read again: a
            # window attaching after the file was broken is refused, as a daemon starting
            # would be. Its programs run in that environment less its secrets.
            settings = load_settings({str(k): str(v) for k, v in env.items()})
            settings = dataclasses.replace(settings, daemon=self.settings.daemon)
        except ValueError as exc:
            self._answer(conn, {"ok": False, "error": str(exc), "exit": 2})
            conn.close()
            return
        if self.stopping:
            self._answer(conn, {"ok": False, "error": "the shared daemon is stopping"})
            conn.close()
            return
        self._answer(conn, {"ok": True, "pid": os.getpid()})
        self._cancel_idle()
        if acp:
            await self.attach_acp(conn, rest, settings, pid)
            return
        peer = f"window pid {pid}"
        writer = FrameWriter(
            conn.fileno(),
            wrap=record,
            limit=self.window_queue,
            overflow=lambda: self._later(self._drop, window, conn),
        )
        window = server.window(self.daemon, settings, writer, peer)
        window.pid = pid
        log.info("%s attached", peer)
        code = await self.daemon.serve_window(window, FrameReader(conn.fileno(), initial=rest))
        log.info("%s detached (exit %d)", peer, code)
        await window.close(end_record(code, None))
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)
        conn.close()

    async def attach_acp(
        self, conn: socket.socket, rest: bytes, settings: Settings, pid: int
    ) -> None:
        from .acp.window import files_for, serve_window, terminals_for

        try:
            services = self.daemon.services
        except StoreError as exc:  # the store could not be opened: said, as a daemon would
            with contextlib.suppress(OSError):
                conn.sendall(end_record(1, exc.message))
            conn.close()
            self._changed()
            return
        services.turns.editor_files = functools.partial(files_for, self.daemon.hub)
        services.processes.terminals = functools.partial(terminals_for, self.daemon.hub)
        await serve_window(self.daemon.hub, services, settings, conn, rest, pid)

    @staticmethod
    def _later(fn: Any, *args: Any) -> None:
        asyncio.get_running_loop().call_soon(fn, *args)

    def _drop(self, window: server.TrellisServer, conn: socket.socket) -> None:
        """A window that stopped reading: given up on, so it slows no one else."""
        log.warning(
            "dropped %s: it stopped reading and more than %d bytes waited for it",
            window.peer,
            self.window_queue,
        )
        self.daemon.hub.detach(window)
        with contextlib.suppress(OSError):
            conn.shutdown(socket.SHUT_RDWR)

    def status(self) -> dict[str, Any]:
        running = self.daemon.running_sessions()
        hub = self.daemon.hub
        native = [w for w in hub.windows if isinstance(w, server.TrellisServer)]
        return {
            "version": build(),
            "pid": os.getpid(),
            "store": self.place.store,
            "socket": self.place.socket,
            "windows": [{"pid": w.pid} for w in native]
            + [{"pid": w.pid, "acp": True} for w in hub.windows if w not in native],
            "sessions": sorted(s for s, ws in hub.following.items() if not ws.isdisjoint(native)),
            "runningTurns": running,
            "stopping": self.stopping,
        }

    def _changed(self) -> None:
        """A window left or a turn ended: stopping and no turn runs, exit; no window and no
        turn, exit after the idle time unless a window comes first."""
        if self.stopping:
            if not self.daemon.running_turns():
                asyncio.ensure_future(self.exit_now())
            return
        if self.daemon.idle():
            self._arm_idle(self.idle_exit)

    def _arm_idle(self, seconds: float) -> None:
        self._cancel_idle()
        self._idle_timer = asyncio.get_running_loop().call_later(
            seconds, lambda: asyncio.ensure_future(self._idle_over())
        )

    async def _idle_over(self) -> None:
        if self.daemon.idle():
            log.info("no window for %g s and no turn running: exiting", self.idle_exit)
            await self.exit_now()

    def _cancel_idle(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def stop(self) -> None:
        """``trellisd stop``: take no new window, and exit once no turn runs."""
        self.stopping = True
        self._close_listener()
        if not self.daemon.running_turns():
            asyncio.ensure_future(self.exit_now())

    def _close_listener(self) -> None:
        """New windows find no daemon here from now on (and start a new one)."""
        if self._listener is None:
            return
        with contextlib.suppress(OSError):
            if os.stat(self.place.socket).st_ino == self._bound:
                os.unlink(self.place.socket)
        self._listener.close()
        self._listener = None

    async def exit_now(self) -> None:
        self.stopping = True
        self._close_listener()
        for window in list(self.daemon.hub.windows):
            await window.close(end_record(1, "the shared daemon was stopped"))
        self._exited.set()
        await self.daemon.exit(0)


def _peer(conn: socket.socket) -> tuple[int, int | None]:
    """The pid (0 where the system does not say it) and uid of the connecting process."""
    if hasattr(socket, "SO_PEERCRED"):
        pid, uid, _ = _PEERCRED.unpack(
            conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
        )
        return pid, uid
    return 0, peer_uid(conn)


async def _first_line(conn: socket.socket) -> tuple[bytes, bytes]:
    """The connection's first line, and what came after it in the same reads, read on the
    loop; ``EOFError`` when it ends first, ``ValueError`` past ``HELLO_LIMIT``."""
    loop = asyncio.get_running_loop()
    data = bytearray()
    while b"\n" not in data:
        if len(data) > HELLO_LIMIT:
            raise ValueError(f"a handshake line over {HELLO_LIMIT} bytes")
        chunk = await loop.sock_recv(conn, 65536)
        if not chunk:
            raise EOFError("the connection ended before its first line")
        data += chunk
    line, _, rest = bytes(data).partition(b"\n")
    return line, rest


def serve_shared(
    db_path: str,
    settings: Settings,
    ready_fd: int | None,
    idle_exit: float,
    hello_timeout: float,
    socket_path: str,
) -> None:
    daemon = SharedDaemon(db_path, settings, idle_exit, hello_timeout, socket_path)
    daemon.claim()

    async def run() -> None:
        await daemon.run(ready_fd)

    asyncio.run(run())
