"""Where a window finds the shared daemon of its store, and what they say when they meet.

Standard library only: the forwarder that an editor starts imports this and nothing heavy.

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

import hashlib
import json
import os
import struct
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import __version__

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


def default_db_path(env: Mapping[str, str]) -> Path:
    data = env.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data) / "trellisd" / "trellisd.db"


def db_path(cli_value: str | None, env: Mapping[str, str]) -> Path:
    if cli_value:
        return Path(cli_value).expanduser()
    if env.get("TRELLISD_DB"):
        return Path(env["TRELLISD_DB"]).expanduser()
    return default_db_path(env)


def shared_mode(standalone_flag: bool, env: Mapping[str, str]) -> bool:
    """Whether ``trellisd`` attaches to a shared daemon: yes unless ``--standalone`` or
    ``TRELLISD_SHARED=0``."""
    return not standalone_flag and env.get("TRELLISD_SHARED", "1").strip().lower() not in (
        "0",
        "false",
        "no",
        "off",
    )


def window_environment(env: Mapping[str, str]) -> dict[str, str]:
    """What a window hands the daemon: its model settings and keys, nothing else."""
    return {name: env[name] for name in WINDOW_VARIABLES if env.get(name)}


def daemon_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The environment the shared daemon starts with: the first window's, less its model
    settings and keys, which stay that window's (every window hands its own)."""
    return {name: value for name, value in env.items() if name not in WINDOW_VARIABLES}


class Place:
    """The rendezvous of one store's shared daemon."""

    def __init__(self, store: Path, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.store = store.absolute()
        digest = hashlib.sha256(str(self.store).encode()).hexdigest()[:16]
        name = f"{__version__}-{digest}.sock"
        folder = runtime_folder(env)
        if len(str(folder / name)) > MAX_SOCKET_PATH:
            folder = fallback_folder()
        self._name(folder / name)

    @classmethod
    def at(cls, socket_path: Path) -> Place:
        """The place of the daemon listening at ``socket_path``, whatever its store."""
        place = cls.__new__(cls)
        place._name(socket_path)
        return place

    def _name(self, socket_path: Path) -> None:
        self.folder = socket_path.parent
        self.socket = socket_path
        self.start_lock = socket_path.with_name(socket_path.name + ".start")
        self.life_lock = socket_path.with_name(socket_path.name + ".pid")

    def make_folder(self) -> None:
        """The folder, made 0700 if missing; one that another user owns, or that others may
        enter, is refused (a socket there could be anyone's)."""
        self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = self.folder.stat()
        if info.st_uid != os.getuid():
            raise PermissionError(f"{self.folder} belongs to another user (uid {info.st_uid})")
        if info.st_mode & 0o077:
            os.chmod(self.folder, 0o700)


def runtime_folder(env: Mapping[str, str]) -> Path:
    runtime = env.get("XDG_RUNTIME_DIR")
    if runtime and Path(runtime).is_absolute():
        return Path(runtime) / "trellisd"
    return fallback_folder()


def fallback_folder() -> Path:
    """A short per-user folder: used without ``$XDG_RUNTIME_DIR``, or when its paths are too
    long for a Unix socket."""
    base = "/tmp" if len(tempfile.gettempdir()) > 40 else tempfile.gettempdir()
    return Path(base) / f"trellisd-{os.getuid()}"


def hello(env: Mapping[str, str], command: str = "attach") -> bytes:
    message = {
        "trellisd": __version__,
        "command": command,
        "pid": os.getpid(),
        "env": window_environment(env),
    }
    return json.dumps(message).encode() + b"\n"


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
    body = json.dumps({"exit": code, "message": message}).encode()
    return RECORD_HEADER.pack(END) + RECORD_HEADER.pack(len(body)) + body
