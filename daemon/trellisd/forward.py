"""What the ``trellisd`` command does by default: attach the editor to the shared daemon of its
store, starting that daemon when none runs, and carry the editor's stdio to it and back.
``trellisd acp`` attaches the same way, as an ACP client of that daemon.

Standard library only, so that attaching costs an interpreter's start and a connection: the
daemon's own imports (pygls, the store, the providers) are paid once, by the shared daemon.

    attach     the editor's stdin to the daemon as it is; the daemon's records to stdout
    status     which daemon serves which store: pid, windows, sessions, running turns
    stop       ask the store's daemon to exit once its running turns have ended

Exit status: what the daemon's end record says (LSP's 0 after shutdown and exit, else 1), 1
with a line on stderr when the daemon dies, 2 when the window's settings are refused.
"""

from __future__ import annotations

# The C module, not ``socket``: that one imports enum and selectors at every window's start.
import _socket
import os
import select
import sys

from . import __version__
from .build import build
from .rendezvous import (
    END,
    RECORD_HEADER,
    Place,
    Unsafe,
    daemon_environment,
    fallback_folder,
    hello,
    own_folder,
    peer_uid,
    private_file,
    private_folder,
    read_line,
    recorded_folder,
    runtime_folder,
    shared_mode,
    store_digest,
    store_file,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import IO, Any, NoReturn

TTY_HINT = """\
trellisd {version}: a coding-agent daemon that editors start and talk to over stdin/stdout
(JSON-RPC with Content-Length framing). It is waiting for an editor now; Ctrl-D or Ctrl-C
ends it. To see what it does, run `trellisd demo`; `trellisd --help`
lists the settings.
"""

CHUNK = 256 * 1024
LOG_LEVELS = ("debug", "info", "warning", "error")


class AttachError(Exception):
    """The window could not attach: one line for stderr, and the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def serve_arguments(args: list[str], env: Mapping[str, str]) -> tuple[str | None, str, str] | None:
    """``(--db, --log-level, what is asked)`` when ``args`` is the plain command line an
    editor starts to attach (``serve`` or ``acp`` first, ``--db PATH``, ``--log-level LEVEL``,
    in any order), else None: the full command line's parser takes everything else,
    ``--help`` and mistakes included. What is asked is ``attach``, or ``acp`` for an ACP
    client."""
    if not shared_mode(False, env):
        return None
    db, level, rest = None, env.get("TRELLISD_LOG", "warning"), list(args)
    command = "acp" if rest[:1] == ["acp"] else "attach"
    if command == "acp":
        rest.pop(0)
    while rest:
        arg = rest.pop(0)
        name, equals, value = arg.partition("=")
        if arg == "serve" and command == "attach":
            continue
        if name not in ("--db", "--log-level"):
            return None
        if not equals:
            if not rest:
                return None
            value = rest.pop(0)
        if name == "--db":
            db = value
        else:
            level = value
    return (db, level, command) if level in LOG_LEVELS else None


def attach_command(db: str | None, log_level: str, command: str = "attach") -> NoReturn:
    """``trellisd`` (or ``trellisd acp``) as an editor starts it: attach, or one line and
    exit status 2."""
    try:
        store = store_file(db, os.environ)
    except ValueError as exc:
        _fail(str(exc), 2)
    if sys.stdin.isatty() and command == "attach":
        print(TTY_HINT.format(version=__version__), end="", file=sys.stderr, flush=True)
    attach(store, os.environ, log_level, command)


def connect(place: Place) -> _socket.socket | None:
    """A connection to the daemon at ``place``, or None when no daemon listens there;
    ``Unsafe`` when what listens is another user's process: nothing is sent to it."""
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(place.socket)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except OSError as exc:
        sock.close()
        raise AttachError(f"cannot reach the shared daemon at {place.socket}: {exc}") from exc
    uid = peer_uid(sock)
    if uid is not None and uid != os.getuid():
        sock.close()
        raise Unsafe(f"{place.socket}: uid {uid} listens on it, not this user")
    return sock


def places(store: str, env: Mapping[str, str]) -> Iterator[Place]:
    """Where a window looks for the store's daemon, in order: the runtime folder, the
    per-user folder under the temp folder, then a folder of the user's own (made when
    first needed). A window takes the first whose folder and socket are this user's."""
    first = Place(store, env)
    yield first
    fallback = Place(store, env, fallback_folder(env))
    if fallback.folder != first.folder:
        yield fallback
    own = Place(store, env, own_folder(env))
    if own.fits():
        yield own


def start_daemon(place: Place, env: Mapping[str, str], log_level: str) -> None:
    """Start the store's shared daemon in the background and wait until it listens: it
    says so on a pipe, or the pipe closes because it could not start."""
    import subprocess

    read_end, write_end = os.pipe()
    with open(private_file(place.log), "ab") as log_file:
        try:
            daemon = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "trellisd",
                    "daemon",
                    "--db",
                    place.store,
                    "--ready-fd",
                    str(write_end),
                    "--socket",
                    place.socket,
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
        last = _last_line(place.log)
        if daemon.wait() == 2:  # refused its settings (a config file's mistake): say it as is
            raise AttachError(last.removeprefix("trellisd: "), 2)
        raise AttachError(f"the shared daemon for {place.store} did not start: {last}")


def _last_line(path: str) -> str:
    try:
        with open(path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 4096))
            lines = log.read().decode("utf-8", "replace").strip().splitlines()
    except OSError:
        lines = []
    return lines[-1] if lines else f"see {path}"


def reach(place: Place, env: Mapping[str, str], log_level: str) -> _socket.socket:
    """A connection to the store's daemon, started first when none listens. Of forwarders
    started at the same instant, one starts it (under the start lock); the others wait on
    that lock and then find it listening."""
    import fcntl

    place.make_folder()
    sock = connect(place)
    if sock is not None:
        return sock
    with open(private_file(place.start_lock)) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        sock = connect(place)
        if sock is None:
            start_daemon(place, env, log_level)
            sock = connect(place)
    if sock is None:
        raise AttachError(f"the shared daemon for {place.store} started but does not listen")
    return sock


def attach(store: str, env: Mapping[str, str], log_level: str, command: str = "attach") -> NoReturn:
    """Attach as a native window (``attach``) or an ACP client (``acp``): the daemon serves
    either over the same socket, and the records come back the same way. A folder or a
    socket that may be another user's is refused before anything is sent, saying so, and
    the next place is tried; with none left the window is served standalone."""
    try:
        for place in places(store, env):
            try:
                sock, line, rest = _attach_at(place, env, log_level, command)
            except Unsafe as exc:
                print(
                    f"trellisd: refused {exc}; trying the next folder", file=sys.stderr, flush=True
                )
                continue
            pump(sock, rest, _accepted(line), store)
    except Unsafe as exc:
        print(f"trellisd: refused {exc}", file=sys.stderr, flush=True)
    print(
        "trellisd: no folder of this user's for the shared daemon's socket:"
        " this window is served standalone",
        file=sys.stderr,
        flush=True,
    )
    args = ["acp"] if command == "acp" else ["serve"]
    os.execv(
        sys.executable,
        [sys.executable, "-m", "trellisd", *args, "--standalone", "--db", store]
        + ["--log-level", log_level],
    )


def _attach_at(
    place: Place, env: Mapping[str, str], log_level: str, command: str
) -> tuple[_socket.socket, bytes, bytes]:
    """The connection to the daemon at ``place``, once it has said yes to the hello."""
    for attempt in range(3):
        try:
            sock = reach(place, env, log_level)
            sock.sendall(hello(env, command))
            line, rest = read_line(sock.recv)
            return sock, line, rest
        except (EOFError, ConnectionResetError, BrokenPipeError):
            # The daemon was ending (idle) as this window came: start a new one.
            if attempt == 2:
                _fail(f"the shared daemon for {place.store} closed every connection")
        except AttachError as exc:
            _fail(str(exc), exc.code)
        except Unsafe:
            raise
        except (OSError, ValueError) as exc:
            _fail(f"cannot attach to the shared daemon for {place.store}: {exc}")
    raise AssertionError("unreachable")


def _accepted(line: bytes) -> int:
    """The daemon's pid from its answer to the hello; a refusal ends the command."""
    if line.startswith(b'{"ok": true, "pid": ') and line.endswith(b"}"):
        return int(line[len(b'{"ok": true, "pid": ') : -1])
    import json

    answer = json.loads(line)
    _fail(str(answer.get("error")), int(answer.get("exit", 1)))


def pump(sock: _socket.socket, rest: bytes, pid: int, store: str) -> NoReturn:
    """Carry stdin to the daemon and its records to stdout until the window ends."""
    stdin, stdout, daemon = sys.stdin.fileno(), sys.stdout.fileno(), sock.fileno()
    poll = select.poll()
    poll.register(stdin, select.POLLIN)
    poll.register(daemon, select.POLLIN)
    buf = bytearray(rest)
    while True:
        _records(buf, stdout)
        for fd, _ in poll.poll():
            if fd == stdin:
                chunk = _read(stdin)
                if chunk:
                    try:
                        sock.sendall(chunk)
                        continue
                    except OSError:
                        pass  # the daemon is gone: its end is read below
                poll.unregister(stdin)
                _shut(sock)
            else:
                try:
                    chunk = sock.recv(CHUNK)
                except OSError:
                    chunk = b""
                if not chunk:
                    _records(buf, stdout)
                    _fail(
                        f"the shared daemon (pid {pid}) for {store} stopped without a word:"
                        " it was killed or crashed; starting trellisd again starts a new one"
                    )
                buf += chunk


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, CHUNK)
    except OSError:
        return b""


def _shut(sock: _socket.socket) -> None:
    try:
        sock.shutdown(_socket.SHUT_WR)
    except OSError:
        pass


def _records(buf: bytearray, stdout: int) -> None:
    """Write the whole records in ``buf`` to ``stdout`` and drop them; end at the end record."""
    header = RECORD_HEADER.size
    while len(buf) >= header:
        (size,) = RECORD_HEADER.unpack_from(buf)
        if size == END:
            if len(buf) >= 2 * header:
                (length,) = RECORD_HEADER.unpack_from(buf, header)
                if len(buf) >= 2 * header + length:
                    _ended(bytes(buf[2 * header : 2 * header + length]))
            return
        if len(buf) < header + size:
            return
        _write_all(stdout, memoryview(buf)[header : header + size])
        del buf[: header + size]


def _write_all(fd: int, data: memoryview) -> None:
    try:
        while data:
            data = data[os.write(fd, data) :]
    except OSError:
        pass  # the editor is gone; the daemon still ends the window


def _ended(body: bytes) -> NoReturn:
    import json

    end = json.loads(body)
    if end.get("message"):
        print(f"trellisd: {end['message']}", file=sys.stderr, flush=True)
    os._exit(int(end.get("exit", 1)))


def _fail(message: str, code: int = 1) -> NoReturn:
    print(f"trellisd: {message}", file=sys.stderr, flush=True)
    os._exit(code)


def ask(place: Place, command: str) -> tuple[_socket.socket, dict[str, Any]] | None:
    """``command`` said to the daemon at ``place``; None when none listens there."""
    import json

    try:
        private_folder(place.folder, make=False)
        sock = connect(place)
    except (AttachError, Unsafe):
        return None
    if sock is None:
        return None
    try:
        sock.sendall(hello({}, command))
        line, _ = read_line(sock.recv)
        answer = json.loads(line)
    except (OSError, EOFError, ValueError):
        sock.close()
        return None
    return sock, answer


def status(env: Mapping[str, str], out: IO[str]) -> int:
    """Every shared daemon of this user that answers: which store, pid, windows, sessions
    followed and turns running."""
    folders = {runtime_folder(env), fallback_folder(env), recorded_folder(env) or ""} - {""}
    found = 0
    for folder in sorted(folders):
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        for name in (n for n in names if n.endswith(".sock")):
            reached = ask(Place.at(os.path.join(folder, name)), "status")
            if reached is None:
                continue
            sock, answer = reached
            sock.close()
            found += 1
            print(_describe(answer), file=out)
    if not found:
        print(f"no shared trellisd daemon is running (this is trellisd {build()})", file=out)
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


def stop(store: str, env: Mapping[str, str], out: IO[str]) -> int:
    """Ask the store's daemons to exit after their running turns (this build's, and one
    still running the code from before an upgrade); wait until they have."""
    place = Place(store, env)
    suffix = f"-{store_digest(place.store)}.sock"
    reached = []
    folders = (place.folder, fallback_folder(env), recorded_folder(env) or "")
    for folder in dict.fromkeys(f for f in folders if f):
        names = sorted(os.listdir(folder)) if os.path.isdir(folder) else []
        for name in (n for n in names if n.endswith(suffix)):
            asked = ask(Place.at(os.path.join(folder, name), place.store), "stop")
            if asked is not None:
                reached.append(asked)
    if not reached:
        print(f"no shared trellisd daemon serves {place.store}", file=out)
        return 0
    for _, answer in reached:
        turns = len(answer.get("runningTurns", []))
        print(
            f"asked the shared daemon (pid {answer.get('pid')}) to exit"
            + (f" after its {turns} running turn(s)" if turns else ""),
            file=out,
            flush=True,
        )
    for sock, _ in reached:
        try:
            while sock.recv(4096):
                pass
        except OSError:
            pass
        sock.close()
    print("it has exited" if len(reached) == 1 else "they have exited", file=out)
    return 0
