"""Where a window finds the shared daemon of its store, and what they say when they meet.

Standard library only, and only its lightest modules (no pathlib, json or re): the forwarder
that an editor starts imports this and little else.

    folder      $XDG_RUNTIME_DIR/trellisd (else trellisd-<uid> under the temp folder), 0700;
                one that is not a real folder of this user's closed to others is refused
                (``private_folder``), and a window then takes the next: trellisd-<uid>
                under the temp folder, then one of its own with a random name
                (``own_folder``), recorded in the user's state folder for the next windows
    socket      <folder>/<build>-<hash of the store path>.sock, 0600: a window never
                attaches to a daemon running other code (``build``: the version and a
                digest of the installed code), a store never to another store's
    start lock  <socket>.start: held by the one forwarder that starts the daemon
    life lock   <socket>.pid: held by the daemon for its life, with its pid in it

On the socket a window says one line first (``hello``), the daemon answers one line, and
then the editor's frames flow to the daemon as they are, while the daemon's come back as
records: a 4-byte big-endian length and that many bytes of frames, or ``END`` and a
length-prefixed JSON ``{"exit": code, "message": ...}`` saying how the window ends. A stream
that stops without that record is a daemon that died.
"""

from __future__ import annotations

import _socket
import os
import stat
import struct

from .build import build
from .secrecy import secret_variable

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

try:  # the C module itself: hashlib would load OpenSSL at every window's start
    from _sha256 import sha256  # type: ignore[import-not-found, unused-ignore]
except ImportError:  # pragma: no cover - Python 3.12 renamed it
    from hashlib import sha256

# AF_UNIX paths are at most 108 bytes with the terminating NUL.
MAX_SOCKET_PATH = 107
HELLO_LIMIT = 1024 * 1024
END = 0xFFFFFFFF
RECORD_HEADER = struct.Struct(">I")

# The variables of the forwarder's environment that are the window's own settings: the ones
# that choose and reach a model. The daemon's own (its store, its log, its heartbeat) are not.
PROVIDER_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY")
WINDOW_VARIABLES = (
    "TRELLISD_PROVIDER",
    "TRELLISD_MODEL",
    "TRELLISD_BASE_URL",
    "TRELLISD_API_KEY",
    "TRELLISD_SCRIPT",
    "TRELLISD_TEMPERATURE",
    "TRELLISD_MAX_TOKENS",
    "TRELLISD_MAX_RETRIES",
    "TRELLISD_RETRY_BUDGET",
    "TRELLISD_READ_TIMEOUT",
    "OPENROUTER_MODEL",
    *PROVIDER_KEY_VARIABLES,
)


def store_file(cli_value: str | None, env: Mapping[str, str]) -> str:
    """The store's path: ``--db``, else ``$TRELLISD_DB``, else under ``$XDG_DATA_HOME``;
    ``ValueError`` saying what to change when it cannot be a database file."""
    if cli_value:
        path, source = os.path.expanduser(cli_value), "--db"
    elif env.get("TRELLISD_DB"):
        path, source = os.path.expanduser(env["TRELLISD_DB"]), "TRELLISD_DB"
    else:
        data = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local/share")
        path, source = os.path.join(data, "trellisd", "trellisd.db"), "the store"
    if os.path.isdir(path):
        example = os.path.join(path, "trellisd.db")
        raise ValueError(f"{source} {path} is a folder; give the path of a file, e.g. {example}")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    if os.path.exists(parent) and not os.path.isdir(parent):
        raise ValueError(f"{source} {path}: {parent} is a file, not a folder")
    return path


def shared_mode(standalone_flag: bool, env: Mapping[str, str]) -> bool:
    """Whether ``trellisd`` attaches to a shared daemon: yes unless ``--standalone`` or
    ``TRELLISD_SHARED=0``."""
    setting = env.get("TRELLISD_SHARED", "1").strip().lower()
    return not standalone_flag and setting not in ("0", "false", "no", "off")


def window_environment(env: Mapping[str, str]) -> dict[str, str]:
    """What a window hands the daemon: its environment less the secrets its programs may
    not see (``secrecy``), but with what its settings need: its model settings and keys,
    the variable the config file's ``keyVariable`` names, and those ``passEnv`` (or
    ``TRELLISD_PASS_ENV``) lets through. The daemon scrubs it again by the effective rule."""
    keep = {*WINDOW_VARIABLES, *config_names(env)}
    keep.update(name.strip() for name in env.get("TRELLISD_PASS_ENV", "").split(","))
    return {k: v for k, v in env.items() if k in keep or not secret_variable(k, v)}


def daemon_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the shared daemon starts with: the first window's, less its model
    settings, its keys and what ``passEnv`` names, which stay that window's (every window
    hands its own)."""
    own = {*WINDOW_VARIABLES, *config_names(env)}
    return {name: value for name, value in env.items() if name not in own}


def config_names(env: Mapping[str, str]) -> set[str]:
    """The variables the config file names (``keyVariable``, ``passEnv``); none when it
    cannot be read, which the daemon then says. Parsed only when it names any."""
    base = env.get("XDG_CONFIG_HOME") or os.path.join(
        env.get("HOME") or os.path.expanduser("~"), ".config"
    )
    try:
        with open(os.path.join(base, "trellisd", "config.toml"), "rb") as file:
            data = file.read(HELLO_LIMIT + 1)
        if b"keyVariable" not in data and b"passEnv" not in data:
            return set()
        import tomllib

        parsed = tomllib.loads(data.decode())
    except (OSError, ValueError):
        return set()
    passed = parsed.get("passEnv")
    named = [parsed.get("keyVariable"), *(passed if isinstance(passed, list) else [])]
    return {name for name in named if isinstance(name, str)}


def store_digest(store: str) -> str:
    """The part of a socket's name that says its store (after the build and a dash)."""
    return str(sha256(os.path.abspath(store).encode()).hexdigest()[:16])


class Unsafe(Exception):
    """A folder or a socket that may be another user's: the message says why, in one line."""


class Place:
    """The rendezvous of one store's shared daemon: in ``folder`` if given, else in the
    runtime folder (or the fallback when its path would be too long for a socket)."""

    def __init__(self, store: str, env: Mapping[str, str], folder: str | None = None) -> None:
        self.store = os.path.abspath(store)
        name = f"{build()}-{store_digest(self.store)}.sock"
        if folder is None:
            folder = runtime_folder(env)
            if len(os.path.join(folder, name)) > MAX_SOCKET_PATH:
                folder = fallback_folder(env)
        self._name(os.path.join(folder, name))

    @classmethod
    def at(cls, socket_path: str, store: str = "") -> Place:
        """The place of the daemon listening at ``socket_path`` (of ``store``)."""
        place = cls.__new__(cls)
        place.store = store
        place._name(socket_path)
        return place

    def _name(self, socket_path: str) -> None:
        self.folder = os.path.dirname(socket_path)
        self.socket = socket_path
        self.start_lock = socket_path + ".start"
        self.life_lock = socket_path + ".pid"
        self.log = socket_path[: -len(".sock")] + ".log"

    def make_folder(self) -> None:
        """The folder, made 0700 if missing and checked (``private_folder``)."""
        private_folder(self.folder)

    def fits(self) -> bool:
        return len(self.socket) <= MAX_SOCKET_PATH


def private_folder(folder: str, make: bool = True) -> None:
    """Make ``folder`` (0700) if it is missing and ``make``; then ``Unsafe`` unless it is a
    real folder (not a symlink) of this user's. One of this user's that others may enter is
    closed to them, through a descriptor of the folder itself, never through a symlink."""
    if make:
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise Unsafe(f"{folder}: cannot make it: {exc.strerror or exc}") from None
    try:
        info = os.lstat(folder)
    except OSError as exc:
        raise Unsafe(f"{folder}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise Unsafe(f"{folder}: it is a symlink, not a folder")
    if not stat.S_ISDIR(info.st_mode):
        raise Unsafe(f"{folder}: it is not a folder")
    if info.st_uid != os.getuid():
        raise Unsafe(f"{folder}: it belongs to uid {info.st_uid}, not to this user")
    if info.st_mode & 0o077:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        try:
            if os.fstat(fd).st_ino != info.st_ino:
                raise Unsafe(f"{folder}: it changed while it was checked")
            os.fchmod(fd, 0o700)
        finally:
            os.close(fd)


def private_file(path: str, flags: int = os.O_RDWR | os.O_CREAT | os.O_APPEND) -> int:
    """A descriptor of ``path`` (made 0600) in a private folder: never through a symlink,
    and ``Unsafe`` when the file is another user's (left there before the folder was
    closed)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise Unsafe(f"{path}: {exc.strerror or exc}") from None
    if os.fstat(fd).st_uid != os.getuid():
        os.close(fd)
        raise Unsafe(f"{path}: it belongs to another user")
    return fd


_PEERCRED = struct.Struct("3i")  # Linux: pid, uid, gid
_XUCRED = struct.Struct("=2I")  # macOS: cr_version, cr_uid, then the groups


def peer_uid(sock: Any) -> int | None:
    """The uid of the process at the other end of a connected Unix socket: ``SO_PEERCRED``
    on Linux, ``LOCAL_PEERCRED`` on macOS; None where the system says neither."""
    if hasattr(_socket, "SO_PEERCRED"):
        raw = sock.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, _PEERCRED.size)
        return int(_PEERCRED.unpack(raw)[1])
    if hasattr(_socket, "LOCAL_PEERCRED"):
        raw = sock.getsockopt(0, _socket.LOCAL_PEERCRED, 76)  # SOL_LOCAL, struct xucred
        return int(_XUCRED.unpack_from(raw)[1])
    return None


def own_folder(env: Mapping[str, str]) -> str:
    """A folder of this user's own for the sockets, when the usual ones are refused: under
    the temp folder with a random name no one could have made first, recorded in the
    user's state folder, where the next windows find it (and check it as any other)."""
    import fcntl

    note = _own_note(env)
    try:
        os.makedirs(os.path.dirname(note), mode=0o700, exist_ok=True)
    except OSError as exc:
        raise Unsafe(f"{os.path.dirname(note)}: {exc.strerror or exc}") from None
    lock = private_file(note + ".lock")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        recorded = recorded_folder(env)
        if recorded is not None:
            return recorded
        base = _temp_base(env)
        for _ in range(100):
            folder = os.path.join(base, f"trellisd-{os.getuid()}-{os.urandom(6).hex()}")
            try:
                os.mkdir(folder, 0o700)
                break
            except FileExistsError:
                continue
        else:
            raise Unsafe(f"{base}: cannot make a folder of this user's own in it")
        private_folder(folder, make=False)
        fd = private_file(note + ".new", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with open(fd, "w") as out:
            out.write(folder + "\n")
        os.replace(note + ".new", note)
        return folder
    except OSError as exc:
        raise Unsafe(f"a folder of this user's own: {exc.strerror or exc}") from None
    finally:
        os.close(lock)


def recorded_folder(env: Mapping[str, str]) -> str | None:
    """The folder ``own_folder`` made, if it is still there and still private."""
    try:
        with open(_own_note(env)) as note:
            folder = note.read().strip()
        if folder:
            private_folder(folder, make=False)
            return folder
    except (OSError, Unsafe):
        pass
    return None


def _own_note(env: Mapping[str, str]) -> str:
    state = env.get("XDG_STATE_HOME") or ""
    if not os.path.isabs(state):
        state = os.path.join(env.get("HOME") or os.path.expanduser("~"), ".local", "state")
    return os.path.join(state, "trellisd", "socket-folder")


def runtime_folder(env: Mapping[str, str]) -> str:
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "trellisd")
    return fallback_folder(env)


def fallback_folder(env: Mapping[str, str]) -> str:
    """A short per-user folder: used without ``$XDG_RUNTIME_DIR``, or when its paths are too
    long for a Unix socket."""
    return os.path.join(_temp_base(env), f"trellisd-{os.getuid()}")


def _temp_base(env: Mapping[str, str]) -> str:
    base = env.get("TMPDIR") or "/tmp"
    if len(base) > 40 or not os.path.isabs(base):
        base = "/tmp"
    return base


def json_string(text: str) -> str:
    """``text`` as a JSON string, without importing json; a lone surrogate (a byte of the
    environment that is not UTF-8) is escaped, and read back as the same string."""
    out = []
    for ch in text:
        if ch in '"\\' or ord(ch) < 0x20 or 0xD800 <= ord(ch) <= 0xDFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def hello(env: Mapping[str, str], command: str = "attach") -> bytes:
    """A window's first line: its build, what it asks, its pid, and its environment
    (``window_environment``): the daemon reads the window's settings and keys from it, and
    starts the window's programs in it. It is said only to a daemon of this user's
    (``forward.connect`` checks)."""
    handed = window_environment(env).items()
    settings = ", ".join(f"{json_string(k)}: {json_string(v)}" for k, v in handed)
    return (
        f'{{"trellisd": {json_string(build())}, "command": {json_string(command)},'
        f' "pid": {os.getpid()}, "env": {{{settings}}}}}\n'
    ).encode()


def read_line(recv: Any, limit: int = HELLO_LIMIT) -> tuple[bytes, bytes]:
    """One line from ``recv(n)`` (a socket's), and what came after it in the same reads."""
    data = bytearray()
    while b"\n" not in data:
        if len(data) > limit:
            raise ValueError(f"a handshake line over {limit} bytes")
        chunk = recv(65536)
        if not chunk:
            raise EOFError("the connection ended before its first line")
        data += chunk
    line, _, rest = bytes(data).partition(b"\n")
    return line, rest


def record(payload: bytes) -> bytes:
    return RECORD_HEADER.pack(len(payload)) + payload


def end_record(code: int, message: str | None) -> bytes:
    body = (
        f'{{"exit": {int(code)}, "message": {"null" if message is None else json_string(message)}}}'
    )
    data = body.encode()
    return RECORD_HEADER.pack(END) + RECORD_HEADER.pack(len(data)) + data
