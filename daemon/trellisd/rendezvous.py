"""Where a window finds the shared daemon of its store, and what they say when they meet.

Standard library only, and only its lightest modules (no pathlib, json or re): the forwarder
that an editor starts imports this and little else.

    folder      $XDG_RUNTIME_DIR/trellisd (else trellisd-<uid> under the temp folder), 0700
    socket      <folder>/<version>-<hash of the store path>.sock, 0600; a version never
                attaches to another version's daemon, a store never to another store's
    start lock  <socket>.start: held by the one forwarder that starts the daemon
    life lock   <socket>.pid: held by the daemon for its life, with its pid in it

On the socket a window says one line first (``hello``), the daemon answers one line, and
then the editor's frames flow to the daemon as they are, while the daemon's come back as
records: a 4-byte big-endian length and that many bytes of frames, or ``END`` and a
length-prefixed JSON ``{"exit": code, "message": ...}`` saying how the window ends. A stream
that stops without that record is a daemon that died.
"""

from __future__ import annotations

import os
import struct

from . import __version__

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


def daemon_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the shared daemon starts with: the first window's, less its model
    settings and keys, which stay that window's (every window hands its own)."""
    return {name: value for name, value in env.items() if name not in WINDOW_VARIABLES}


class Place:
    """The rendezvous of one store's shared daemon."""

    def __init__(self, store: str, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.store = os.path.abspath(store)
        digest = sha256(self.store.encode()).hexdigest()[:16]
        name = f"{__version__}-{digest}.sock"
        folder = runtime_folder(env)
        if len(os.path.join(folder, name)) > MAX_SOCKET_PATH:
            folder = fallback_folder(env)
        self._name(os.path.join(folder, name))

    @classmethod
    def at(cls, socket_path: str) -> Place:
        """The place of the daemon listening at ``socket_path``, whatever its store."""
        place = cls.__new__(cls)
        place.store = ""
        place._name(socket_path)
        return place

    def _name(self, socket_path: str) -> None:
        self.folder = os.path.dirname(socket_path)
        self.socket = socket_path
        self.start_lock = socket_path + ".start"
        self.life_lock = socket_path + ".pid"
        self.log = socket_path[: -len(".sock")] + ".log"

    def make_folder(self) -> None:
        """The folder, made 0700 if missing; one that another user owns is refused (a
        socket there could be anyone's), and one that others may enter is closed to them."""
        os.makedirs(self.folder, mode=0o700, exist_ok=True)
        info = os.stat(self.folder)
        if info.st_uid != os.getuid():
            raise PermissionError(f"{self.folder} belongs to another user (uid {info.st_uid})")
        if info.st_mode & 0o077:
            os.chmod(self.folder, 0o700)


def runtime_folder(env: Mapping[str, str]) -> str:
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "trellisd")
    return fallback_folder(env)


def fallback_folder(env: Mapping[str, str]) -> str:
    """A short per-user folder: used without ``$XDG_RUNTIME_DIR``, or when its paths are too
    long for a Unix socket."""
    base = env.get("TMPDIR") or "/tmp"
    if len(base) > 40 or not os.path.isabs(base):
        base = "/tmp"
    return os.path.join(base, f"trellisd-{os.getuid()}")


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
    """A window's first line: its version, what it asks, its pid, and its whole environment
    (``env``): the daemon reads the window's settings and keys from it, and starts the
    window's programs in it less its secrets. It is said only to a daemon of this user's,
    which could read it from ``/proc`` anyway (``forward.reach`` checks)."""
    settings = ", ".join(f"{json_string(k)}: {json_string(v)}" for k, v in env.items())
    return (
        f'{{"trellisd": {json_string(__version__)}, "command": {json_string(command)},'
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
