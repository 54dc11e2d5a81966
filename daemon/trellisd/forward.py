"""What the ``trellisd`` command does by default: attach the editor to the shared daemon of its
store, starting that daemon when none runs, and carry the editor's stdio to it and back.

Standard library only, so that attaching costs an interpreter's start and a connection: the
daemon's own imports (pygls, the store, the providers) are paid once, by the shared daemon.

    attach     the editor's stdin to the daemon as it is; the daemon's records to stdout
    status     which daemon serves which store: pid, windows, sessions, running turns
    stop       ask the store's daemon to exit once its running turns have ended

Exit status: what the daemon's end record says (LSP's 0 after shutdown and exit, else 1), 1
with a line on stderr when the daemon dies, 2 when the window's settings are refused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any, NoReturn

from . import __version__
from .rendezvous import (
    END,
    RECORD_HEADER,
    Place,
    daemon_environment,
    fallback_folder,
    hello,
    read_line,
    runtime_folder,
)

STDIN_CHUNK = 256 * 1024


class AttachError(Exception):
    """The window could not attach: one line for stderr, and the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def connect(place: Place) -> socket.socket | None:
    """A connection to the daemon at ``place``, or None when no daemon listens there."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(place.socket))
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except OSError as exc:
        sock.close()
        raise AttachError(f"cannot reach the shared daemon at {place.socket}: {exc}") from exc
    return sock


def start_daemon(place: Place, env: Mapping[str, str], log_level: str) -> None:
    """Start the store's shared daemon in the background and wait until it listens: it
    says so on a pipe, or the pipe closes because it could not start."""
    import subprocess

    place.make_folder()
    log_path = place.socket.with_suffix(".log")
    read_end, write_end = os.pipe()
    with open(log_path, "ab") as log_file:
        try:
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "trellisd",
                    "daemon",
                    "--db",
                    str(place.store),
                    "--ready-fd",
                    str(write_end),
                    "--log-level",
                    log_level,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log_file,
                pass_fds=(write_end,),
                start_new_session=True,
                env=daemon_environment(env),
            )
        finally:
            os.close(write_end)
    with os.fdopen(read_end, "rb") as ready:
        said = ready.readline()
    if said != b"ready\n":
        raise AttachError(
            f"the shared daemon for {place.store} did not start: {_last_line(log_path)}"
        )


def _last_line(path: Path) -> str:
    try:
        lines = path.read_bytes()[-4096:].decode("utf-8", "replace").strip().splitlines()
    except OSError:
        lines = []
    return lines[-1] if lines else f"see {path}"


def reach(place: Place, env: Mapping[str, str], log_level: str) -> socket.socket:
    """A connection to the store's daemon, started first when none listens. Of forwarders
    started at the same instant, one starts it (under the start lock); the others wait on
    that lock and then find it listening."""
    sock = connect(place)
    if sock is not None:
        return sock
    place.make_folder()
    with open(place.start_lock, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = connect(place)
        if sock is None:
            start_daemon(place, env, log_level)
            sock = connect(place)
    if sock is None:
        raise AttachError(f"the shared daemon for {place.store} started but does not listen")
    return sock


def handshake(sock: socket.socket, message: bytes) -> tuple[dict[str, Any], bytes]:
    """Say ``message``; the daemon's answer and what followed it in the same reads."""
    sock.sendall(message)
    line, rest = read_line(sock.recv)
    answer = json.loads(line)
    if not isinstance(answer, dict):
        raise ValueError("the daemon's answer was not an object")
    return answer, rest


def attach(store: Path, env: Mapping[str, str], log_level: str) -> NoReturn:
    place = Place(store, env)
    for attempt in range(3):
        try:
            sock = reach(place, env, log_level)
            answer, rest = handshake(sock, hello(env))
            break
        except (EOFError, ConnectionResetError, BrokenPipeError):
            # The daemon was ending (idle) as this window came: start a new one.
            if attempt == 2:
                _fail(f"the shared daemon for {store} closed every connection")
        except AttachError as exc:
            _fail(str(exc), exc.code)
        except (OSError, ValueError) as exc:
            _fail(f"cannot attach to the shared daemon for {store}: {exc}")
    if not answer.get("ok"):
        _fail(str(answer.get("error")), int(answer.get("exit", 1)))
    pump(sock, rest, answer.get("pid"), store)


def pump(sock: socket.socket, rest: bytes, pid: Any, store: Path) -> NoReturn:
    """Carry stdin to the daemon and its records to stdout until the window ends."""
    threading.Thread(target=_to_daemon, args=(sock,), daemon=True).start()
    stdout = sys.stdout.fileno()
    buf = bytearray(rest)
    while True:
        while len(buf) >= RECORD_HEADER.size:
            (size,) = RECORD_HEADER.unpack_from(buf)
            if size == END:
                if len(buf) < 2 * RECORD_HEADER.size:
                    break
                (length,) = RECORD_HEADER.unpack_from(buf, RECORD_HEADER.size)
                end = 2 * RECORD_HEADER.size + length
                if len(buf) < end:
                    break
                _ended(json.loads(bytes(buf[2 * RECORD_HEADER.size : end])))
            if len(buf) < RECORD_HEADER.size + size:
                break
            _write_all(stdout, memoryview(buf)[RECORD_HEADER.size : RECORD_HEADER.size + size])
            del buf[: RECORD_HEADER.size + size]
        try:
            chunk = sock.recv(STDIN_CHUNK)
        except OSError:
            chunk = b""
        if not chunk:
            _fail(
                f"the shared daemon (pid {pid}) for {store} stopped without a word: it was"
                " killed or crashed; starting trellisd again starts a new one"
            )
        buf += chunk


def _to_daemon(sock: socket.socket) -> None:
    stdin = sys.stdin.fileno()
    try:
        while chunk := os.read(stdin, STDIN_CHUNK):
            sock.sendall(chunk)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def _write_all(fd: int, data: memoryview) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the editor is gone; the daemon still ends the window


def _ended(end: dict[str, Any]) -> NoReturn:
    code = int(end.get("exit", 1))
    if end.get("message"):
        print(f"trellisd: {end['message']}", file=sys.stderr, flush=True)
    os._exit(code)


def _fail(message: str, code: int = 1) -> NoReturn:
    print(f"trellisd: {message}", file=sys.stderr, flush=True)
    os._exit(code)


def ask(place: Place, command: str) -> tuple[socket.socket, dict[str, Any]] | None:
    """``command`` said to the daemon at ``place``; None when none listens there."""
    try:
        sock = connect(place)
    except AttachError:
        return None
    if sock is None:
        return None
    try:
        answer, _ = handshake(sock, hello({}, command))
    except (OSError, EOFError, ValueError):
        sock.close()
        return None
    return sock, answer


def status(env: Mapping[str, str], out: IO[str]) -> int:
    """Every shared daemon of this user that answers: which store, pid, windows, sessions
    followed and turns running."""
    folders = {runtime_folder(env), fallback_folder()}
    found = 0
    for folder in sorted(folders):
        for path in sorted(folder.glob("*.sock")) if folder.is_dir() else ():
            reached = ask(Place.at(path), "status")
            if reached is None:
                continue
            sock, answer = reached
            sock.close()
            found += 1
            print(_describe(answer), file=out)
    if not found:
        print(f"no shared trellisd daemon is running (version {__version__})", file=out)
    return 0


def _describe(answer: dict[str, Any]) -> str:
    windows = answer.get("windows", [])
    turns = answer.get("runningTurns", [])
    lines = [
        f"{answer.get('store')}",
        f"  daemon   pid {answer.get('pid')}, trellisd {answer.get('version')},"
        f" socket {answer.get('socket')}",
        f"  windows  {len(windows)}"
        + (": " + ", ".join(f"pid {w.get('pid')}" for w in windows) if windows else ""),
        f"  sessions {len(answer.get('sessions', []))} followed",
        f"  turns    {len(turns)} running"
        + (": " + ", ".join(f"{t['sessionId']}/{t['turnId']}" for t in turns) if turns else ""),
    ]
    if answer.get("stopping"):
        lines.append("  stopping once its running turns end")
    return "\n".join(lines)


def stop(store: Path, env: Mapping[str, str], out: IO[str]) -> int:
    """Ask the store's daemon to exit after its running turns; wait until it has."""
    place = Place(store, env)
    reached = ask(place, "stop")
    if reached is None:
        print(f"no shared trellisd daemon serves {place.store}", file=out)
        return 0
    sock, answer = reached
    turns = len(answer.get("runningTurns", []))
    print(
        f"asked the shared daemon (pid {answer.get('pid')}) to exit"
        + (f" after its {turns} running turn(s)" if turns else ""),
        file=out,
        flush=True,
    )
    with contextlib.suppress(OSError):
        while sock.recv(4096):
            pass
    sock.close()
    print("it has exited", file=out)
    return 0
